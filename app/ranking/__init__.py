"""Feed ranking: scoring and the diversity rule."""
