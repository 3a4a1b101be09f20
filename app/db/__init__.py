"""PostgreSQL: the source of truth."""
