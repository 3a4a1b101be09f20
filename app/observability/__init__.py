"""Metrics and logging."""
