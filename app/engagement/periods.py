"""`--since` and `--until` of the log's commands: an ISO date or time (UTC unless it says
otherwise), or a span back from now: `7d`, `12h`, `30m`."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_SPAN = re.compile(r"^(\d{1,6})([dhm])$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


class BadPeriod(ValueError):
    """A `--since`/`--until` that is no time."""


def parse_when(text: str, now: datetime) -> datetime:
    """A point in time; BadPeriod with a readable message for anything else."""
    text = text.strip()
    span = _SPAN.match(text)
    if span is not None:
        return now - timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadPeriod(
            f"{text!r} is neither an ISO date/time nor a span such as 7d, 12h, 30m"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
