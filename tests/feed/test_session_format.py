"""A feed session keeps what it was ranked with (model, arm) and which of its ids came from
the recommendation source, through real Redis; sessions written before those fields read as
before."""

from __future__ import annotations

from app.feed.sessions import NO_RANKING, FeedSessionStore, SessionRanking


async def test_a_session_round_trips_its_ranking(state) -> None:
    store = FeedSessionStore(state.redis, ttl_seconds=60)
    ranking = SessionRanking("gbm-2026-12", "treatment", frozenset({5, 3}))
    made = await store.create(7, [9, 5, 4, 3], (1_700_000_000_000, 3), ranking=ranking)
    loaded = await store.load(7, made.session_id)
    assert loaded == made
    assert loaded is not None and loaded.ranking.recommended == {3, 5}


async def test_a_session_without_ranking_is_stored_as_before(state) -> None:
    store = FeedSessionStore(state.redis, ttl_seconds=60)
    made = await store.create(7, [9, 8], None)
    raw = await state.redis.get(f"fs:{{7}}:{made.session_id}")
    assert raw == b"\n" + (9).to_bytes(8, "big") + (8).to_bytes(8, "big")
    loaded = await store.load(7, made.session_id)
    assert loaded is not None and loaded.ranking == NO_RANKING and loaded.ids == [9, 8]


async def test_a_legacy_session_with_a_tail_reads_as_before(state) -> None:
    await state.redis.set("fs:{7}:old", b"1700:42\n" + (42).to_bytes(8, "big"))
    loaded = await FeedSessionStore(state.redis, ttl_seconds=60).load(7, "old")
    assert loaded is not None
    assert (loaded.ids, loaded.tail, loaded.ranking) == ([42], (1700, 42), NO_RANKING)
