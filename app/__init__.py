"""Hybrid fan-out home feed service."""
