"""The schema's custom scalars: DateTime with its wire format stated, so clients and codegen
type it (a string in RFC 3339) instead of `unknown`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import strawberry

from app.api.upstream.strawberry import STRAWBERRY_DATETIME, STRAWBERRY_ISOFORMAT

RFC_3339 = "https://datatracker.ietf.org/doc/html/rfc3339"

# Strawberry's own DateTime with a description and @specifiedBy: the same serializer object
# (the fast path recognises a DateTime leaf by it, app.api.fast.compiler `_quick`) and parser.
DATETIME = strawberry.scalar(
    name="DateTime",
    description=(
        "A moment in time, as an RFC 3339 (ISO 8601) string in UTC with its offset: "
        "`2026-12-04T08:26:17.123456+00:00`; the fraction has six digits, or is left out "
        "when it is zero."
    ),
    specified_by_url=RFC_3339,
    serialize=STRAWBERRY_ISOFORMAT,
    parse_value=STRAWBERRY_DATETIME.parse_value,
)

# Strawberry's documented way to replace a built-in scalar (`Schema(scalar_overrides=...)`).
SCALAR_OVERRIDES: Mapping[object, Any] = {datetime: DATETIME}
