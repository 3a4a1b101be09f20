"""The write path end to end: GraphQL mutation -> outbox -> relay -> real ARQ workers ->
Redis timelines. Thresholds are shrunk in conftest (pull at 10, push below 8, batch 4)."""

from __future__ import annotations

from collections import Counter

from app.fanout import lanes
from app.posts.ids import created_ms
from app.timelines.store import timeline_key
from tests.helpers import (
    PASSWORD,
    author_with_fans,
    block,
    feed_ids,
    follow,
    gql,
    make_user,
    metric_value,
    post,
    sql,
    timeline_ids,
    unfollow,
)


async def test_post_reaches_exactly_the_active_followers_once(client, state, pipeline) -> None:
    author, author_id, fans = await author_with_fans(client, 7)
    idle = fans[5:]
    await sql(
        "UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = ANY($1)",
        [uid for _, uid in idle],
    )
    _, stranger = await make_user(client, "stranger")
    await pipeline.settle()

    post_id = await post(client, author, "hello followers")
    await pipeline.settle()

    for _, uid in fans[:5]:
        assert (await timeline_ids(state, uid)).count(post_id) == 1
    for _, uid in idle:
        assert post_id not in await timeline_ids(state, uid)
    assert post_id not in await timeline_ids(state, stranger)
    # The author's own index holds it (read-your-writes and pulls read it from there).
    assert post_id in [p for p, _ in await state.timelines.author_latest(author_id, 10)]


async def test_timelines_stay_bounded_and_keep_the_newest(client, state, pipeline) -> None:
    author, _, fans = await author_with_fans(client, 2)
    limit = state.settings.timeline_max
    made = [await post(client, author, f"post {i}") for i in range(limit + 7)]
    await pipeline.settle()
    for _, uid in fans:
        ids = await timeline_ids(state, uid)
        assert len(ids) == limit
        assert ids == list(reversed(made))[:limit]


async def test_private_posts_are_not_fanned_out(client, state, pipeline) -> None:
    author, _, fans = await author_with_fans(client, 2)
    secret = await post(client, author, "only me", visibility="PRIVATE")
    await pipeline.settle()
    for _, uid in fans:
        assert secret not in await timeline_ids(state, uid)


async def test_replayed_events_and_retried_batches_change_nothing(client, state, pipeline) -> None:
    author, author_id, fans = await author_with_fans(client, 6)
    post_id = await post(client, author, "once")
    await pipeline.settle()
    before = {uid: await state.timelines.latest(uid, 100) for _, uid in fans}

    # The relay crashed after enqueueing but before marking: every event goes out again.
    await sql("UPDATE outbox SET published_at = NULL")
    await pipeline.settle()
    # A FanoutBatch retried under a new job id, and out of order with the original.
    await pipeline.enqueue(
        lanes.FANOUT_BATCH,
        author_id,
        [[post_id, created_ms(post_id)]],
        [uid for _, uid in reversed(fans)],
        job_id="retry-1",
        lane=lanes.DEFAULT,
    )
    await pipeline.settle()
    after = {uid: await state.timelines.latest(uid, 100) for _, uid in fans}
    assert after == before
    for _, uid in fans:
        assert Counter(await timeline_ids(state, uid))[post_id] == 1


async def test_big_authors_use_their_own_lane(client, state, pipeline) -> None:
    author, _, fans = await author_with_fans(client, 7)  # >= BIG_AUTHOR_FOLLOWERS (6), < pull (10)
    post_id = await post(client, author, "big news")
    await pipeline.relay.drain()
    await pipeline.run_lane(lanes.DEFAULT)  # the splitter runs here...
    assert await state.redis.zcard(lanes.BIG) == 2  # ...and its 7 followers wait in BIG
    assert await state.redis.zcard(lanes.DEFAULT) == 0
    await pipeline.run_lane(lanes.BIG)
    for _, uid in fans:
        assert post_id in await timeline_ids(state, uid)


async def test_follow_backfills_and_unfollow_block_clean_up(client, state, pipeline) -> None:
    author, _ = await make_user(client, "author")
    reader, reader_id = await make_user(client, "reader")
    made = [await post(client, author, f"old {i}") for i in range(25)]
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == []

    await follow(client, reader, "author")
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == list(reversed(made))[:20]

    await unfollow(client, reader, "author")
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == []

    await follow(client, reader, "author")
    await pipeline.settle()
    assert len(await timeline_ids(state, reader_id)) == 20
    await block(client, author, "reader")
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == []


async def test_cold_start_rebuilds_on_log_in(client, state, pipeline) -> None:
    author, _, [(_, reader_id)] = await author_with_fans(client, ["reader"])
    made = [await post(client, author, f"p{i}") for i in range(5)]
    await pipeline.settle()
    await state.redis.delete(timeline_key(reader_id))  # Redis lost the timeline
    assert not await state.timelines.exists(reader_id)
    (await gql(client, "LogIn", {"handle": "reader", "password": PASSWORD})).ok()
    assert await timeline_ids(state, reader_id) == list(reversed(made))


async def _age_queued_jobs(state, lane: str, seconds: float) -> None:
    """Make the jobs waiting in `lane` look `seconds` older: ARQ scores a queued job by the
    millisecond it may run, and the lag gauge is the age of the lowest score."""
    for job, score in await state.redis.zrange(lane, 0, -1, withscores=True):
        await state.redis.zadd(lane, {job: score - seconds * 1000}, xx=True)


async def test_metrics_report_outbox_age_and_lane_lag_in_seconds(client, state, pipeline) -> None:
    author, _, _ = await author_with_fans(client, 2)
    await pipeline.settle()
    await post(client, author, "waiting")
    # Five seconds of waiting, without the wait: the unpublished event is made older.
    await sql(
        "UPDATE outbox SET created_at = created_at - interval '5 s' WHERE published_at IS NULL"
    )
    text = (await client.get("/metrics")).text
    assert 5.0 <= metric_value(text, "feed_outbox_oldest_unpublished_seconds") < 60
    await pipeline.relay.drain()  # relayed, not yet worked on
    await _age_queued_jobs(state, lanes.DEFAULT, 5)
    text = (await client.get("/metrics")).text
    assert metric_value(text, "feed_outbox_oldest_unpublished_seconds") == 0
    assert 5.0 <= metric_value(text, 'feed_fanout_oldest_job_age_seconds{lane="default"}') < 60
    assert metric_value(text, 'feed_fanout_queued_jobs{lane="default"}') == 1
    await pipeline.settle()
    text = (await client.get("/metrics")).text
    assert metric_value(text, 'feed_fanout_oldest_job_age_seconds{lane="default"}') == 0
    assert metric_value(text, "feed_timeline_inserts_total") >= 2
    assert "feed_post_to_timeline_seconds_bucket" in text


async def test_a_user_back_from_inactivity_gets_a_fresh_timeline(client, state, pipeline) -> None:
    author, _, [(reader, reader_id)] = await author_with_fans(client, ["reader"])
    await pipeline.settle()
    await sql(
        "UPDATE users SET last_active_at = now() - interval '40 days' WHERE id = $1", reader_id
    )
    missed = await post(client, author, "while you were away")
    await pipeline.settle()
    assert missed not in await timeline_ids(state, reader_id)  # inactive: not pushed
    assert await feed_ids(client, reader, first=10) == [missed]
    assert await timeline_ids(state, reader_id) == [missed]  # rebuilt on return
    newer = await post(client, author, "now you are back")
    await pipeline.settle()
    assert await timeline_ids(state, reader_id) == [newer, missed]  # active again: pushed
