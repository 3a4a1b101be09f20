"""The media package's fixed numbers and names, each with why (settings: app.config MEDIA_*)."""

from __future__ import annotations

# The types accepted, by their one Content-Type each; nothing else is ever stored or served
# (no HTML, no SVG: decision 0080).
JPEG, PNG, WEBP, GIF = "image/jpeg", "image/png", "image/webp", "image/gif"
CONTENT_TYPES = (JPEG, PNG, WEBP, GIF)
# Pillow's format name per type: what its header parser must agree on.
PILLOW_FORMATS = {JPEG: "JPEG", PNG: "PNG", WEBP: "WEBP", GIF: "GIF"}

MAX_MEDIA_PER_POST = 4  # post_media.position 0-3
BUDGET_WINDOW_SECONDS = 86_400  # the per-user upload budgets count the last 24 h
# The cleanup job's work per pass, in bounded batches (as jobs.housekeeping).
CLEANUP_BATCH = 500
CLEANUP_MAX_BATCHES = 20
