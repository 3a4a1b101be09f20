"""Operators' moderation commands: `python -m app.moderation` (an entry point; the record and
its rules are app.posts.restrictions and app.posts.visibility, decision 0088)."""
