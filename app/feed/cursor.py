"""Opaque, signed feed cursors: base64url(payload + keyed BLAKE2b tag).

Two kinds: a session position ("s", session id, next position) for RANKED pages inside a
frozen feed session, and a keyset ("k", created_ms, post_id) for CHRONOLOGICAL pages and for
RANKED pages past the end of the session. Both carry a fingerprint of the viewer and mode, so
a cursor is never applied to another user's or another mode's feed; any change to a byte
breaks the 128-bit tag and the cursor is rejected.

Why not itsdangerous (what this used before): every page signs one cursor per edge, and its
JSON + per-call key derivation + HMAC-SHA1 cost ~25 us each, ~0.5 ms of CPU per 20-post page;
this costs ~3 us. The key is derived once per secret. Cursors of the old format no longer
decode: BAD_USER_INPUT, the client restarts from the top (sessions live 30 minutes anyway).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass
from functools import lru_cache

from app.errors import BadInput
from app.feed.modes import FeedMode

_SALT = b"feed-cursor-v2"
_TAG = 16  # bytes of BLAKE2b tag


@dataclass(frozen=True)
class SessionPosition:
    session_id: str
    position: int


@dataclass(frozen=True)
class Keyset:
    created_ms: int
    post_id: int


Cursor = SessionPosition | Keyset


def fingerprint(viewer_id: int, mode: FeedMode) -> str:
    return hashlib.blake2b(f"{viewer_id}:{mode}".encode(), digest_size=6).hexdigest()


@lru_cache(maxsize=4)
def _key(secret: str) -> bytes:
    return hashlib.blake2b(secret.encode(), key=_SALT, digest_size=32).digest()


@lru_cache(maxsize=4)
def _keyed(secret: str) -> hashlib.blake2b:
    """The tag's BLAKE2b with the key block already absorbed: each tag copies it and feeds
    the payload (the same digest as `blake2b(payload, key=...)`, without compressing the key
    block again: ~0.3 us a tag, not ~1.5; a page signs one cursor per edge)."""
    return hashlib.blake2b(key=_key(secret), digest_size=_TAG)


class CursorCodec:
    def __init__(self, secret: str) -> None:
        self._key = _key(secret)
        self._keyed = _keyed(secret)

    def _tag(self, payload: bytes) -> bytes:
        tag = self._keyed.copy()
        tag.update(payload)
        return tag.digest()

    def encode(self, cursor: Cursor, fp: str) -> str:
        if isinstance(cursor, SessionPosition):
            text = f"s|{cursor.session_id}|{cursor.position}|{fp}"
        else:
            text = f"k|{cursor.created_ms}|{cursor.post_id}|{fp}"
        payload = text.encode()
        return base64.urlsafe_b64encode(payload + self._tag(payload)).rstrip(b"=").decode()

    def decode(self, raw: str, fp: str) -> Cursor:
        invalid = BadInput("The 'after' cursor is not valid for this feed; start from the top.")
        try:
            blob = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        except (binascii.Error, ValueError):
            raise invalid from None
        payload, tag = blob[:-_TAG], blob[-_TAG:]
        if len(blob) <= _TAG or not hmac.compare_digest(tag, self._tag(payload)):
            raise invalid
        try:
            kind, first, second, cursor_fp = payload.decode().split("|")
            if cursor_fp != fp:
                raise invalid
            if kind == "s":
                return SessionPosition(first, int(second))
            if kind == "k":
                return Keyset(int(first), int(second))
        except (UnicodeDecodeError, ValueError):
            pass
        raise invalid
