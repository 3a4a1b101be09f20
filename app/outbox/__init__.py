"""Transactional outbox: side effects leave the database only after commit."""
