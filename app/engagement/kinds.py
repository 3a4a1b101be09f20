"""What one row of the engagement log is: its kind and its columns.

Kinds are stored as small integers (the codes below never change meaning; a new kind takes a
new code). IMPRESSION is a post served on a feed page, SEEN one the client reported shown
(`reportImpressions`), PAGE one feed page's figures; LIKE, UNLIKE, COMMENT come from the
mutations; HIDE, MUTE, FEWER from negative feedback; RECOMMENDATION_SHOWN and CLICK from the
client (`reportEngagement`).
"""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum
from typing import NamedTuple

from app.db.models import ENGAGEMENT_EVENTS


class Kind(IntEnum):
    IMPRESSION = 1
    SEEN = 2
    LIKE = 3
    UNLIKE = 4
    COMMENT = 5
    HIDE = 6
    MUTE = 7
    FEWER = 8
    RECOMMENDATION_SHOWN = 9
    CLICK = 10
    PAGE = 11


# What counts as engaging with a served post (source quality, the report's rate): a viewer's
# (post) pair that was served and then met one of these. Not UNLIKE nor the negative ones.
ENGAGEMENTS = (Kind.LIKE, Kind.COMMENT, Kind.CLICK)
# Kinds whose author the caller may not know: the writer reads it from `posts` at its flush.
AUTHOR_LOOKUP = frozenset({Kind.SEEN, Kind.CLICK, Kind.RECOMMENDATION_SHOWN})


class Event(NamedTuple):
    """One row, in the table's column order (COLUMNS): what the writer buffers and COPYs."""

    at: datetime
    kind: int
    viewer_id: int
    post_id: int | None = None
    author_id: int | None = None
    session_id: str | None = None
    position: int | None = None
    reason: str | None = None
    model_version: str | None = None
    arm: str | None = None
    shown: int | None = None
    duplicates: int | None = None
    empty: bool | None = None
    cost_ms: float | None = None


COLUMNS: tuple[str, ...] = Event._fields
TABLE = ENGAGEMENT_EVENTS.name
assert tuple(ENGAGEMENT_EVENTS.columns.keys()) == COLUMNS  # the model's order, the COPY's


def kind_name(code: int) -> str:
    """A stored code's name (an unknown one as its number: a newer release's kind)."""
    try:
        return Kind(code).name
    except ValueError:
        return str(code)
