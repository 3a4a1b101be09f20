"""The two orders of a home feed (the GraphQL `FeedMode` maps onto these)."""

from __future__ import annotations

from enum import StrEnum


class FeedMode(StrEnum):
    RANKED = "ranked"  # scored, frozen for a while as a feed session, then newest first
    CHRONOLOGICAL = "chronological"  # newest first, keyset pages
