"""FanoutBatch jobs of several pages (decision 0054): a split reads its first page alone,
then groups of JOB_PAGES pages; a job writes each page with its own script call (insert and
live counts), and its tracking step rides the last call, sent only once the others
succeeded. A long fan-out's split writes every page itself (decisions 0060, 0064).
Against the real Redis, PostgreSQL and ARQ workers (FANOUT_BATCH_SIZE is 4 in the tests: a
page is 4 followers)."""

from __future__ import annotations

import pytest
from redis.exceptions import ResponseError

from app.fanout import lanes
from app.fanout.constants import JOB_PAGES
from app.posts.ids import created_ms
from app.realtime import batch_counts, counts
from app.realtime.keys import count_key
from app.redis_scripts import run_script
from app.timelines.store import timeline_key
from jobs import tasks, tracking
from tests.helpers import author_with_fans, eventually, post, sql, timeline_ids


async def _fans(client, state, n: int) -> tuple[str, int, list[int]]:
    """An author and n followers with (empty) timelines; the author's token and id, fan ids."""
    token, author, made = await author_with_fans(client, n)
    fans = sorted(fan_id for _, fan_id in made)
    for fan in fans:
        await state.timelines.rebuild(fan, [])
    return token, author, fans


async def _counted(state, user_id: int) -> list[int]:
    return [int(m) for m in await state.redis.zrange(count_key(user_id), 0, -1)]


async def test_a_job_of_several_pages_settles_only_after_every_page(client, state) -> None:
    service = state.fanout
    page = state.settings.fanout_batch_size
    token, author, fans = await _fans(client, state, 2 * page + 2)  # three calls: 4, 4, 2
    await counts.mark_online(state.redis, [fans[1], fans[-1]], state.settings)
    service.notifier.online = batch_counts.OnlineUsers()  # a fresh copy: both guessed
    post_id = await post(client, token, "in pages")  # (no workers here: nothing fans it out)
    entries = [(post_id, created_ms(post_id))]
    job = "fb:test:grouped"
    await tracking.owe(state.redis, post_id, [job, "fb:test:other"], ttl=60)

    # A timeline in the second page the insert cannot handle: that call fails, so the job
    # fails as one call would, and the last call (with the tracking step) is never sent.
    await state.redis.set(timeline_key(fans[page]), b"\x01abc")
    tail = tracking.settle_tail(post_id, job, tracking.Progress(written=len(fans)), ttl=60)
    with pytest.raises(ResponseError):
        await service.deliver(author, entries, fans, tail)
    assert tail.reply is None
    owed = await state.redis.smembers(tracking.pending_key(post_id))
    assert sorted(owed) == [b"fb:test:grouped", b"fb:test:other"]
    assert await timeline_ids(state, fans[-1]) == []  # the last page waited

    # The retry writes every page, counts the online followers of the first and last page
    # and settles the job in the last call.
    await state.timelines.rebuild(fans[page], [])
    tail = tracking.settle_tail(post_id, job, tracking.Progress(written=len(fans)), ttl=60)
    # (The first page's call ran beside the failed one, or was cancelled with it.)
    assert len(fans) - page <= await service.deliver(author, entries, fans, tail) <= len(fans)
    assert tail.reply is not None and tracking.settled(post_id, tail, "default") is False
    assert await state.redis.smembers(tracking.pending_key(post_id)) == {b"fb:test:other"}
    assert await state.redis.hget(tracking.state_key(post_id), "written") == str(len(fans)).encode()
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]
    assert await _counted(state, fans[1]) == [post_id]
    assert await _counted(state, fans[-1]) == [post_id]
    assert await _counted(state, fans[0]) == []


async def test_the_write_path_groups_pages_into_few_jobs(client, state, pipeline) -> None:
    page = state.settings.fanout_batch_size
    # More than two jobs' worth (1 + JOB_PAGES pages): the split writes them all.
    n = page * (1 + JOB_PAGES) + 1
    token, author, fans = await _fans(client, state, n)
    # Pinned to PUSH: the tests' thresholds would pull an author with this many followers.
    await sql("UPDATE users SET fanout_pin = 'push' WHERE id = $1", author)
    await counts.mark_online(state.redis, [fans[-1]], state.settings)
    post_id = await post(client, token, "grouped")
    await pipeline.settle()

    async def done() -> bool:
        return await state.redis.hget(tracking.state_key(post_id), "done") is not None

    await eventually(done)
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]
    state_ = await state.redis.hgetall(tracking.state_key(post_id))
    assert int(state_[b"planned"]) == int(state_[b"written"]) == n
    # No batch job: every page was written by the split itself (decision 0064).
    batches = [k for k in await state.redis.keys("arq:result:fb:*") if b":from:" not in k]
    assert batches == []

    async def counted() -> bool:
        return await _counted(state, fans[-1]) == [post_id]

    await eventually(counted)


async def test_a_post_of_two_jobs_or_fewer_keeps_its_jobs(client, state, pipeline) -> None:
    """Followers in the first page and one group at most (the author's count): the split
    keeps no page, both jobs run as before (decisions 0060, 0064 are for long fan-outs)."""
    page = state.settings.fanout_batch_size
    n = page * (1 + JOB_PAGES)
    token, author, fans = await _fans(client, state, n)
    await sql("UPDATE users SET fanout_pin = 'push' WHERE id = $1", author)
    post_id = await post(client, token, "two jobs")
    await pipeline.settle()
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]
    batches = sorted(await state.redis.keys(f"arq:result:fb:{post_id}:*"))
    assert batches == sorted(f"arq:result:fb:{post_id}:{fans[i]}".encode() for i in (0, page))
    state_ = await state.redis.hgetall(tracking.state_key(post_id))
    assert int(state_[b"planned"]) == int(state_[b"written"]) == n


async def test_a_split_whose_own_page_fails_is_retried_and_counted_once(
    client, state, pipeline
) -> None:
    """The split's own write fails (a timeline the insert cannot handle): the split job
    fails and stays owed; its retry writes the page again, and the post's progress counts
    every follower once (the split's pages only in its own, final tracking step)."""
    page = state.settings.fanout_batch_size
    n = page * (1 + 2 * JOB_PAGES) + 1  # all kept by the split
    token, author, fans = await _fans(client, state, n)
    await sql("UPDATE users SET fanout_pin = 'push' WHERE id = $1", author)
    await state.redis.set(timeline_key(fans[0]), b"\x01abc")  # in the split's first page
    post_id = await post(client, token, "retried")
    ctx = {"redis": pipeline.arq, "job_id": "evt:split", "fanout": state.fanout, "state": state}
    with pytest.raises(Exception) as failed:
        await tasks.fanout_post(ctx, post_id)
    assert failed.group_contains(ResponseError)
    assert await state.redis.smembers(tracking.pending_key(post_id)) >= {b"evt:split"}
    assert await state.redis.hget(tracking.state_key(post_id), "planned") is None

    await state.timelines.rebuild(fans[0], [])
    assert await tasks.fanout_post(ctx, post_id) == 4  # the retry: 4 groups, written by it
    assert await pipeline.run_lane(lanes.BIG) == 0  # no group job was queued
    for fan in fans:
        assert await timeline_ids(state, fan) == [post_id]
    state_ = await state.redis.hgetall(tracking.state_key(post_id))
    assert b"done" in state_
    assert int(state_[b"planned"]) == int(state_[b"written"]) == n


async def test_a_kept_first_page_marks_the_post_first_visible_once(state) -> None:
    """A split writing its own pages marks the post first visible after its first page
    (decision 0064), not at its settle; the mark is set once and the settle keeps it."""
    post_id, ttl = 987_654_321, 60
    assert await tracking.first_visible(state.redis, post_id, "default", ttl=ttl) is True
    first = await state.redis.hget(tracking.state_key(post_id), "first")
    assert first is not None
    assert await tracking.first_visible(state.redis, post_id, "default", ttl=ttl) is False
    await tracking.owe(state.redis, post_id, ["evt:split"], ttl=ttl)
    progress = tracking.Progress(planned=5, written=5, chunk=0)
    assert await tracking.settle(state.redis, post_id, "evt:split", progress, ttl=ttl) is True
    assert await state.redis.hget(tracking.state_key(post_id), "first") == first


async def test_95_percent_is_never_recorded_before_first(state) -> None:
    """Each job takes its `now` before its progress call; two calls may land in the reverse
    order (the later stamp first). The 95% mark is then the first's, not earlier."""
    post_id, ttl = 987_654_322, 60
    await tracking.owe(state.redis, post_id, ["evt:split", "evt:a", "evt:b"], ttl=ttl)
    plan = tracking.Progress(planned=5, chunk=0)
    assert await tracking.settle(state.redis, post_id, "evt:split", plan, ttl=ttl) is False
    later = tracking._progress_args("evt:b", 2_000, ttl, tracking.Progress(written=1))
    earlier = tracking._progress_args("evt:a", 1_000, ttl, tracking.Progress(written=4))
    keys = [tracking.pending_key(post_id), tracking.state_key(post_id)]
    assert await run_script(state.redis, tracking._PROGRESS, keys, later) == [1, 0, 1, 0]
    assert await run_script(state.redis, tracking._PROGRESS, keys, earlier) == [1, 1, 0, 2_000]
    marks = await state.redis.hmget(tracking.state_key(post_id), "first", "p95")
    assert marks == [b"2000", b"2000"]
