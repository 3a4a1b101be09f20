"""Opaque, signed feed cursors (itsdangerous: HMAC over a compact JSON payload).

Two kinds: a session position ({"s": session id, "p": next position}) for RANKED pages
inside a frozen feed session, and a keyset ({"k": [created_ms, post_id]}) for CHRONOLOGICAL
pages and for RANKED pages past the end of the session. Both carry a fingerprint of the
viewer and mode, so a cursor is never applied to another user's or another mode's feed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from itsdangerous import BadSignature, URLSafeSerializer

from app.errors import BadInput

_SALT = "feed-cursor-v1"


@dataclass(frozen=True)
class SessionPosition:
    session_id: str
    position: int


@dataclass(frozen=True)
class Keyset:
    created_ms: int
    post_id: int


Cursor = SessionPosition | Keyset


def fingerprint(viewer_id: int, mode: str) -> str:
    return hashlib.blake2b(f"{viewer_id}:{mode}".encode(), digest_size=6).hexdigest()


class CursorCodec:
    def __init__(self, secret: str) -> None:
        self._serializer = URLSafeSerializer(secret, salt=_SALT)

    def encode(self, cursor: Cursor, fp: str) -> str:
        if isinstance(cursor, SessionPosition):
            payload: dict[str, object] = {"s": cursor.session_id, "p": cursor.position, "f": fp}
        else:
            payload = {"k": [cursor.created_ms, cursor.post_id], "f": fp}
        return str(self._serializer.dumps(payload))

    def decode(self, raw: str, fp: str) -> Cursor:
        invalid = BadInput("The 'after' cursor is not valid for this feed; start from the top.")
        try:
            payload = self._serializer.loads(raw)
        except BadSignature:
            raise invalid from None
        if not isinstance(payload, dict) or payload.get("f") != fp:
            raise invalid
        try:
            if "s" in payload:
                return SessionPosition(str(payload["s"]), int(payload["p"]))
            created_ms, post_id = payload["k"]
            return Keyset(int(created_ms), int(post_id))
        except (KeyError, TypeError, ValueError):
            raise invalid from None
