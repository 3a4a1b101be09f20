"""The fan-out batch's one call (decision 0049): a post's timeline insert and the live counts
of its online recipients in one EVALSHA (the store's write with the counts' tail,
`app.timelines.tails`, `app.realtime.batch_counts`), against the real Redis and PostgreSQL;
the guess of who is online may be stale without losing a count."""

from __future__ import annotations

from app.fanout.notifier import FusingNotifier
from app.posts.ids import created_ms
from app.realtime import batch_counts, counts
from app.realtime.keys import Channels, count_key
from app.timelines.tails import Tail
from tests.helpers import author_with_fans, eventually, post, post_id_at, sql, timeline_ids


async def _fans(client, state, n: int = 4) -> tuple[str, int, list[int]]:
    """An author and n followers with (empty) timelines; the author's token and id, fan ids."""
    token, author, made = await author_with_fans(client, n)
    fans = [fan_id for _, fan_id in made]
    for fan in fans:
        await state.timelines.rebuild(fan, [])
    return token, author, fans


async def _counted(state, user_id: int) -> list[int]:
    return [int(m) for m in await state.redis.zrange(count_key(user_id), 0, -1)]


async def _push_and_count(
    state,
    post_id: int,
    fans: list[int],
    guessed: list[int],
    *,
    author_id: int,
    counting: bool,
    tail: Tail | None = None,
) -> tuple[int, int, list[int]]:
    """One fused call: the store's write with the counts' tail (and `tail`); (timelines
    gained, users notified, online users not counted)."""
    count = batch_counts.count_tail(
        state.redis, post_id, created_ms(post_id), fans, guessed, state.settings,
        author_id=author_id, counting=counting,
    )  # fmt: skip
    tails = [count] if tail is None else [count, tail]
    gained = await state.timelines.push_with_tails(post_id, created_ms(post_id), fans, tails)
    return (gained, *batch_counts.counted(count, fans))


async def test_one_call_writes_timelines_and_counts_the_guessed_online(client, state) -> None:
    token, author, fans = await _fans(client, state)
    post_id = await post(client, token, "hello")
    await counts.mark_online(state.redis, [fans[0], fans[2]], state.settings)
    pubsub = state.redis.pubsub()
    await pubsub.subscribe(
        Channels.for_redis(state.redis, state.settings.realtime_namespace).user(fans[0])
    )
    await pubsub.get_message(timeout=1)

    gained, published, missed = await _push_and_count(
        state,
        post_id,
        fans,
        [fans[0], fans[1]],  # fans[1] is not online; fans[2] is, unguessed
        author_id=author,
        counting=True,
    )
    assert gained == len(fans)
    assert published == 1
    assert missed == [fans[2]]  # online, but its keys were not declared: left to the caller
    assert await _counted(state, fans[0]) == [post_id]
    assert await _counted(state, fans[1]) == [] and await _counted(state, fans[2]) == []
    message = await pubsub.get_message(timeout=1)
    assert message is not None and counts.decode_count(message["data"]).count == 1
    await pubsub.aclose()
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]

    again = await _push_and_count(state, post_id, fans, [fans[0]], author_id=author, counting=True)
    assert again[:2] == (0, 0)  # a replay adds and announces nothing


async def test_the_service_counts_whom_the_guess_missed_and_honours_stop_marks(
    client, state
) -> None:
    service = state.fanout
    assert isinstance(service.notifier, FusingNotifier)
    assert service.notifier.fuses_with(state.timelines)
    token, author, fans = await _fans(client, state)
    # The worker's copy of the online set is taken before anyone is online ...
    assert await service.notifier.online_guess(fans) == []
    await counts.mark_online(state.redis, fans[:3], state.settings)
    # ... and fans[1] stopped counting the author (an unfollow racing the batch).
    await counts.stop_counting(
        state.redis, [(fans[1], author)], lambda ids: _no_owners(ids), state.settings
    )
    post_id = await post(client, token, "hi")
    assert await service.deliver(author, [(post_id, created_ms(post_id))], fans) == len(fans)
    assert await _counted(state, fans[0]) == [post_id]  # counted the old way, after the check
    assert await _counted(state, fans[1]) == []  # the stop mark holds
    assert await _counted(state, fans[2]) == [post_id]
    assert await _counted(state, fans[3]) == []  # offline: no count kept

    # Once the copy is fresh the same users are counted inside the one call, marks honoured.
    service.notifier.online = batch_counts.OnlineUsers()
    assert sorted(await service.notifier.online_guess(fans)) == sorted(fans[:3])
    second = await post(client, token, "again")
    assert await service.deliver(author, [(second, created_ms(second))], fans) == len(fans)
    assert await _counted(state, fans[0]) == [post_id, second]
    assert await _counted(state, fans[1]) == []
    assert await _counted(state, fans[2]) == [post_id, second]


async def test_a_post_deleted_before_its_batch_is_written_but_not_counted(client, state) -> None:
    service = state.fanout
    token, author, fans = await _fans(client, state, 2)
    await counts.mark_online(state.redis, fans, state.settings)
    service.notifier.online = batch_counts.OnlineUsers()
    post_id = await post(client, token, "soon gone")
    await sql("UPDATE posts SET deleted_at = now() WHERE id = $1", post_id)
    assert await service.deliver(author, [(post_id, created_ms(post_id))], fans) == 2
    assert await _counted(state, fans[0]) == [] and await _counted(state, fans[1]) == []
    # Readers filter the timeline entry; only the count must not announce it.
    assert await timeline_ids(state, fans[0]) == [post_id]


async def test_the_write_path_counts_an_online_follower_through_the_worker(
    client, state, pipeline
) -> None:
    token, _, fans = await _fans(client, state, 3)
    await counts.mark_online(state.redis, [fans[1]], state.settings)
    post_id = await post(client, token, "through ARQ")
    await pipeline.settle()

    async def counted() -> bool:
        return await _counted(state, fans[1]) == [post_id]

    await eventually(counted)
    assert await _counted(state, fans[0]) == [] and await _counted(state, fans[2]) == []
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]


async def _no_owners(post_ids: list[int]) -> dict[int, int]:
    return {}


async def test_the_tracking_step_rides_the_call_and_waits_for_the_insert(client, state) -> None:
    import pytest
    from redis.exceptions import ResponseError

    from app.timelines.store import timeline_key
    from jobs import tracking

    _, author, fans = await _fans(client, state, 3)
    post_id = post_id_at(counts.now_ms())
    job = "fb:test:1"
    await tracking.owe(state.redis, post_id, [job, "fb:test:2"], ttl=60)

    # A timeline the insert cannot handle (not a packed string of entries): the call fails
    # before its tracking step, so the job is still owed (its retry will settle it).
    await state.redis.set(timeline_key(fans[1]), b"\x01abc")
    tail = tracking.settle_tail(post_id, job, tracking.Progress(written=3), ttl=60)
    with pytest.raises(ResponseError):
        await _push_and_count(state, post_id, fans, [], author_id=author, counting=False, tail=tail)
    assert tail.reply is None
    owed = await state.redis.smembers(tracking.pending_key(post_id))
    assert sorted(owed) == [b"fb:test:1", b"fb:test:2"]

    await state.timelines.rebuild(fans[1], [])
    tail = tracking.settle_tail(post_id, job, tracking.Progress(written=3), ttl=60)
    gained, _, _ = await _push_and_count(
        state, post_id, fans, [], author_id=author, counting=False, tail=tail
    )
    assert gained == 2 and list(tail.reply) == [1, 0, 1, 0]  # counted, first visible
    assert tracking.settled(post_id, tail, "default") is False  # fb:test:2 is still owed
    assert await state.redis.smembers(tracking.pending_key(post_id)) == {b"fb:test:2"}
    assert await state.redis.hget(tracking.state_key(post_id), "written") == b"3"
