"""ARQ worker settings and tasks: thin wrappers that call app.fanout."""
