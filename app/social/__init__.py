"""The social graph (follows, blocks) and engagement (likes, comments)."""
