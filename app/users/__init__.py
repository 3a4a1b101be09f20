"""Accounts: sign-up, log-in, lookups."""
