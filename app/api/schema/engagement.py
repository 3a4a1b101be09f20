"""`reportEngagement`'s GraphQL side: the client's event kinds as an enum (its values map
onto app.engagement.client.CLIENT_KINDS)."""

from __future__ import annotations

from enum import Enum

import strawberry

from app.engagement.client import CLIENT_KINDS


@strawberry.enum(description="What a client reports of the posts it showed.")
class ClientEngagement(Enum):
    CLICK = "CLICK"  # the viewer opened the post (its thread, a link in it)
    RECOMMENDATION_SHOWN = "RECOMMENDATION_SHOWN"  # a recommended post was on screen


assert {member.value for member in ClientEngagement} == set(CLIENT_KINDS)
