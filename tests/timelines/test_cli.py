"""`python -m app.timelines`: the operators' one-line look at a timeline, and the one-way
conversion of zset timelines (the layout before decision 0034) into the packed layout, against
the session's Redis db (REDIS_URL points there in tests). The zsets are written with raw
Redis commands, as an earlier release left them; the result is read through the store."""

from __future__ import annotations

import asyncio
import random

import pytest
from pydantic import ValidationError
from redis.asyncio import Redis

from app.config import Settings
from app.timelines import TimelineStore, author_posts_key, created_at_ms, timeline_key
from app.timelines.__main__ import main
from app.timelines.convert import convert_zsets
from app.timelines.packed import pack_ids
from app.timelines.scripts import FORMAT_BYTE
from tests.conftest import TEST_REDIS_URL
from tests.helpers import post_id_at as pid

BASE_MS = 1_790_000_000_000
EMPTY = "0" * 19  # an earlier release's marker of a known-empty zset timeline


def zset_of(posts: list[int]) -> dict[str, int]:
    """ZADD's mapping for an earlier release's zset timeline: 19-digit member, creation ms."""
    return {str(p).zfill(19): created_at_ms(p) for p in posts}


async def _seed(posts: list[int]) -> None:
    redis = Redis.from_url(TEST_REDIS_URL)
    try:
        await redis.flushdb()
        await redis.zadd(timeline_key(42), zset_of(posts))
        await redis.zadd(timeline_key(43), {EMPTY: 0})
        big = [pid(BASE_MS - 1000 + i, 2) for i in range(450)]  # past TIMELINE_MAX (400)
        await redis.zadd(timeline_key(44), zset_of(big))
        await redis.zadd(author_posts_key(7), zset_of(posts[:1]))
        store = TimelineStore(redis, 800, 200)
        await store.rebuild(45, [(p, created_at_ms(p)) for p in posts[:3]])  # packed already
    finally:
        await redis.aclose()


async def _read(posts: list[int]) -> None:
    redis = Redis.from_url(TEST_REDIS_URL)
    try:
        store = TimelineStore(redis, 400, 100)
        newest_first = [(p, created_at_ms(p)) for p in reversed(posts)]
        assert await store.latest_or_none(42, 50) == newest_first
        cursor_id, cursor_ms = newest_first[9]
        assert await store.before(42, cursor_ms, cursor_id, 5) == newest_first[10:15]
        assert await store.latest_or_none(43, 5) == []
        assert await redis.get(timeline_key(43)) == FORMAT_BYTE
        big = [pid(BASE_MS - 1000 + i, 2) for i in range(450)]
        assert [p for p, _ in await store.latest(44, 1000)] == list(reversed(big[-400:]))
        assert await store.author_latest_many_or_none([7], 5) == {7: [newest_first[-1]]}
        assert await store.latest(45, 5) == newest_first[-3:]
        # The fan-out writes into converted timelines as into any other.
        post = pid(BASE_MS + 100)
        assert await store.push_to_timelines(post, created_at_ms(post), [42, 43, 46]) == 2
        assert (await store.latest(43, 5)) == [(post, created_at_ms(post))]
    finally:
        await redis.aclose()


def test_show_and_convert(capsys: pytest.CaptureFixture[str]) -> None:
    posts = [pid(BASE_MS + i, 1) for i in range(30)]
    asyncio.run(_seed(posts))
    assert main(["show", "42"]) == 1
    assert "tl:{42}: a zset" in capsys.readouterr().out

    assert main(["convert", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "tl:{*}: 4 keys scanned, 3 to convert to packed" in out
    assert "posts:{*}: 1 keys scanned, 1 to convert to packed" in out
    assert main(["convert", "--pause-ms", "0", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "tl:{*}: 4 keys scanned, 3 converted to packed" in out
    assert "posts:{*}: 1 keys scanned, 1 converted to packed" in out
    assert main(["convert", "--pause-ms", "0"]) == 0  # nothing left: idempotent
    assert "tl:{*}: 4 keys scanned, 0 converted to packed" in capsys.readouterr().out

    assert main(["show", "42", "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tl:{42}: packed, 30 of at most 400 entries")
    assert out[2].split() == [str(pid(BASE_MS + 29, 1)), "2026-09-21T14:13:20.029+00:00"]
    assert out[4] == "... 28 older (--limit 0 shows all)"
    assert main(["show", "43"]) == 0
    assert "packed, 0 of at most 400 entries (known empty)" in capsys.readouterr().out
    assert main(["show", "7", "--author"]) == 0
    assert "posts:{7}: packed, 1 of at most 100 entries" in capsys.readouterr().out
    assert main(["show", "46"]) == 1
    assert "tl:{46}: missing" in capsys.readouterr().out

    asyncio.run(_read(posts))


async def test_ids_convert_exactly() -> None:
    """Ids at the edges of every 32-bit half and of the 19-digit range survive the trip from
    decimal members to 8-byte entries."""
    ids = {1, 2**22, 2**32 - 1, 2**32, 2**32 + 1, 2**53 + 1, 10**18, 10**18 + 1}
    ids |= {2**63 - 1, 2**62 + 12345}
    ids |= {random.Random(i).randrange(10**18, 2**63) for i in range(200)}
    ordered = sorted(ids)
    redis = Redis.from_url(TEST_REDIS_URL)
    try:
        await redis.zadd(timeline_key(1), {str(p).zfill(19): p >> 22 for p in ordered})
        assert await convert_zsets(redis, [timeline_key(1), timeline_key(2)], 1000) == 1
        assert await redis.get(timeline_key(1)) == FORMAT_BYTE + pack_ids(ordered)
        assert not await redis.exists(timeline_key(2))
    finally:
        await redis.aclose()


def test_the_zset_setting_is_refused_with_the_upgrade_command() -> None:
    """TIMELINE_ENCODING stays accepted (deployments set it), `packed` only; it is a retired
    variable, no longer a setting (app.config.RETIRED_VARIABLES, decision 0073)."""
    assert "timeline_encoding" not in Settings(timeline_encoding="packed").model_dump()
    with pytest.raises(ValidationError, match=r"no longer supported.*app\.timelines convert"):
        Settings(timeline_encoding="zset")
