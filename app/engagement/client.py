"""What a client may report (`reportEngagement`): the kinds, and the checks of its input.

Whether the viewer may see a reported post is not checked (as `reportImpressions`): a
client event only counts where the post was served to that viewer (features and the report
join it to an IMPRESSION), so a made-up click moves no author's quality."""

from __future__ import annotations

from collections.abc import Sequence

from app.engagement.constants import MAX_REPORTED, SESSION_ID_MAX
from app.engagement.kinds import Kind
from app.errors import BadInput
from app.posts.ids import parse_reported_ids

# The kinds a client reports, by the GraphQL enum's names.
CLIENT_KINDS = {"CLICK": Kind.CLICK, "RECOMMENDATION_SHOWN": Kind.RECOMMENDATION_SHOWN}


def reported_posts(raw: Sequence[str]) -> list[int]:
    """The post ids of a report; BAD_USER_INPUT for too many or a malformed one."""
    return parse_reported_ids(raw, MAX_REPORTED)


def session_label(raw: str | None) -> str | None:
    """A client's session id: 1-SESSION_ID_MAX printable ASCII characters, or none."""
    if raw is None:
        return None
    if not 1 <= len(raw) <= SESSION_ID_MAX or not raw.isascii() or not raw.isprintable():
        raise BadInput(f"sessionId is 1-{SESSION_ID_MAX} printable ASCII characters.")
    return raw
