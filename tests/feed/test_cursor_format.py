"""The cursor's wire format stays what app.feed.cursor documents: base64url(payload + a
16-byte BLAKE2b tag keyed with the secret's derived key). Cursors handed out before a change
of how the tag is computed (decision 0056: a copy of a pre-keyed hasher) must still decode,
and new ones must be byte-identical to the documented construction."""

from __future__ import annotations

import base64
import hashlib

import pytest

from app.errors import BadInput
from app.feed.cursor import CursorCodec, Keyset, SessionPosition, fingerprint
from app.feed.modes import FeedMode

SECRET = "a-test-secret-of-some-length-0123456789"


def documented(payload: str) -> str:
    key = hashlib.blake2b(SECRET.encode(), key=b"feed-cursor-v2", digest_size=32).digest()
    raw = payload.encode()
    tag = hashlib.blake2b(raw, key=key, digest_size=16).digest()
    return base64.urlsafe_b64encode(raw + tag).rstrip(b"=").decode()


@pytest.mark.parametrize("position", [1, 21, 399, 10_000])
def test_session_cursors_are_the_documented_bytes(position: int) -> None:
    fp = fingerprint(42, FeedMode.RANKED)
    codec = CursorCodec(SECRET)
    cursor = SessionPosition("k3YbJx0f2cQ1u9W8rT5vZa", position)
    text = codec.encode(cursor, fp)
    assert text == documented(f"s|k3YbJx0f2cQ1u9W8rT5vZa|{position}|{fp}")
    assert codec.decode(text, fp) == cursor
    # The same codec signs many cursors: each tag is its own (the hasher is copied, not fed).
    assert codec.encode(SessionPosition("k3YbJx0f2cQ1u9W8rT5vZa", position + 1), fp) != text


def test_keyset_cursors_are_the_documented_bytes() -> None:
    fp = fingerprint(7, FeedMode.CHRONOLOGICAL)
    cursor = Keyset(1_764_633_600_000, 1_577_000_000_000_000_123)
    text = CursorCodec(SECRET).encode(cursor, fp)
    assert text == documented(f"k|{cursor.created_ms}|{cursor.post_id}|{fp}")
    assert CursorCodec(SECRET).decode(documented(f"k|1|2|{fp}"), fp) == Keyset(1, 2)


def test_another_secret_or_a_changed_byte_is_refused() -> None:
    fp = fingerprint(42, FeedMode.RANKED)
    text = CursorCodec(SECRET).encode(SessionPosition("abc", 3), fp)
    with pytest.raises(BadInput):
        CursorCodec(SECRET + "x").decode(text, fp)
    flipped = text[:-2] + ("A" if text[-2] != "A" else "B") + text[-1]
    with pytest.raises(BadInput):
        CursorCodec(SECRET).decode(flipped, fp)
