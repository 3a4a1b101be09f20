"""`python -m app.timelines`: the operators' one-line look at a timeline, and the background
conversion, against the session's Redis db (REDIS_URL points there in tests)."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from app.timelines import TimelineStore, created_at_ms
from app.timelines.__main__ import main
from tests.conftest import TEST_REDIS_URL
from tests.helpers import post_id_at as pid

BASE_MS = 1_790_000_000_000


async def _seed() -> None:
    redis = Redis.from_url(TEST_REDIS_URL)
    try:
        await redis.flushdb()
        zset = TimelineStore(redis, 800, 200, encoding="zset")
        posts = [pid(BASE_MS + i, 1) for i in range(30)]
        await zset.rebuild(42, [(p, created_at_ms(p)) for p in posts])
        await zset.rebuild(43, [])
        await zset.push_author_post(7, posts[0], created_at_ms(posts[0]))
    finally:
        await redis.aclose()


def test_show_and_convert(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_seed())
    assert main(["show", "42", "--limit", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tl:{42}: zset, 30 of at most 400 entries")
    assert out[2].split() == [str(pid(BASE_MS + 29, 1)), "2026-09-21T14:13:20.029+00:00"]
    assert out[4] == "... 28 older (--limit 0 shows all)"

    assert main(["convert", "--dry-run"]) == 0
    assert "tl:{*}: 2 keys scanned, 2 to convert to packed" in capsys.readouterr().out
    assert main(["convert", "--pause-ms", "0"]) == 0
    out = capsys.readouterr().out
    assert "tl:{*}: 2 keys scanned, 2 converted to packed" in out
    assert "posts:{*}: 1 keys scanned, 1 converted to packed" in out

    assert main(["show", "42", "--limit", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tl:{42}: packed, 30 of at most 400 entries")
    assert len(out) == 2 + 30
    assert main(["show", "43"]) == 0
    assert "packed, 0 of at most 400 entries (known empty)" in capsys.readouterr().out
    assert main(["show", "7", "--author"]) == 0
    assert "posts:{7}: packed, 1 of at most 100 entries" in capsys.readouterr().out
    assert main(["show", "44"]) == 1
    assert "tl:{44}: missing" in capsys.readouterr().out
