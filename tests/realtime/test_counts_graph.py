"""Live counts honour the social graph: an unfollow or block silences the other user at once,
in the mutation's own request (the async timeline cleanup is not run here on purpose), and a
fan-out batch queued before the change (queue lag) counts nothing when it runs later.

Real uvicorn, real websocket, GraphQL over HTTP; the write path runs as real ARQ jobs, step by
step where the order matters. No sleeps: "nothing arrived" is proven by a later sentinel
frame (frames of one socket arrive in order) rather than by waiting.
"""

from __future__ import annotations

import pytest

from app.fanout import lanes
from app.posts.ids import created_ms
from tests.helpers import (
    block,
    follow,
    post,
    timeline_ids,
    unblock,
    unfollow,
)
from tests.realtime.live import Fan, LiveClient, pull_mode_fan, sentinel, shown, subscribed_fan
from tests.servers import ApiServer


async def _counted_then_unfollowed(http, pipeline, fan: Fan) -> None:
    """The author posts, the fan's count shows it, the fan unfollows: the count drops to 0
    in the unfollow's own request (the cleanup job has not run)."""
    await post(http, fan.author, "before the unfollow")
    await pipeline.settle()
    await fan.live.until_count(1)
    await unfollow(http, fan.token, "author")
    assert (await fan.live.next_update(seconds=1))["newPostCount"] == 0


async def _cleanup_not_run(state, user_id: int, post_id: int) -> None:
    """The unfollow's async timeline cleanup has not run: the post is still in the timeline."""
    assert post_id in await timeline_ids(state, user_id)


async def test_unfollow_drops_that_authors_posts_from_the_count_at_once(
    server: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("kept", "gone"))
        live = fan.live
        older = await post(http, fan.authors["kept"], "stays counted")
        newer = await post(http, fan.authors["gone"], "about to be unfollowed")
        await pipeline.settle()
        frame = (await live.until_count(2))[-1]
        assert shown(frame)[1] == created_ms(newer)

        await unfollow(http, fan.token, "gone")  # no relay, no worker: the cleanup has not run
        frame = await live.next_update(seconds=1)
        # One post left: its time is the newest remaining one's, not the removed post's.
        assert shown(frame) == (1, created_ms(older))
        await _cleanup_not_run(state, fan.id, newer)

        await unfollow(http, fan.token, "kept")
        assert await live.next_update(seconds=1) == {"newPostCount": 0, "latestPostAt": None}
        await live.close()


@pytest.mark.parametrize("who_blocks", ["viewer", "author"])
async def test_a_block_either_way_drops_the_count_at_once(
    server: ApiServer, pipeline, state, who_blocks: str
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live
        post_id = await post(http, author, "hello")
        await pipeline.settle()
        await live.until_count(1)

        if who_blocks == "viewer":
            await block(http, fan.token, "author")
        else:
            await block(http, author, "fan")
        assert await live.next_update(seconds=1) == {"newPostCount": 0, "latestPostAt": None}
        await _cleanup_not_run(state, fan.id, post_id)

        # Unblocking brings nothing back, and (blocked by the author) no follow is left.
        if who_blocks == "viewer":
            await unblock(http, fan.token, "author")
        else:
            await unblock(http, author, "fan")
        await post(http, author, "after the block, not followed any more")
        await sentinel(http, pipeline, live, friend, 1)
        await live.close()


async def test_unfollowing_a_pull_mode_author_drops_the_count_at_once(
    server: ApiServer, pipeline
) -> None:
    """Pull-mode posts are counted by the API hub, not by a fan-out: they leave the count
    the same way."""
    async with server.http() as http:
        _, fan, live, _ = await pull_mode_fan(server, http, pipeline, "pulled")

        await unfollow(http, fan, "celeb")
        assert await live.next_update(seconds=1) == {"newPostCount": 0, "latestPostAt": None}
        await live.close()


async def test_a_fan_out_queued_before_the_unfollow_counts_nothing(
    server: ApiServer, pipeline, state
) -> None:
    """Queue lag: the post's batch was split (with the fan in it) and queued; the fan
    unfollows; then the batch runs. It still writes the timeline (readers filter that), but
    the count stays 0 and no frame announces the post."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live

        post_id = await post(http, author, "queued before the unfollow")
        split = await state.fanout.split_post(post_id, pipeline.enqueue)  # the real split
        assert split is not None and split.batches == 1  # its FanoutBatch waits in ARQ
        await unfollow(http, fan.token, "author")
        assert await pipeline.run_lane(lanes.DEFAULT) == 1  # the lagging batch, nothing else
        assert post_id in await timeline_ids(state, fan.id)  # it did reach the fan

        # The first frame since is the sentinel's, with the lagged post not counted.
        await sentinel(http, pipeline, live, friend, 1)
        await live.close()


async def test_a_refollow_does_not_bring_old_posts_back(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        await _counted_then_unfollowed(http, pipeline, fan)
        await pipeline.settle()  # cleanup

        await follow(http, fan.token, "author")
        await pipeline.settle()  # backfill copies the old post into the timeline again
        # Only the post made after the refollow is new.
        await sentinel(http, pipeline, fan.live, fan.author, 1)
        await fan.live.close()


async def test_a_reconnect_before_the_cleanup_does_not_count_the_unfollowed(
    server: ApiServer, pipeline
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        await _counted_then_unfollowed(http, pipeline, fan)
        await fan.live.close()

        again = await LiveClient.open(server, fan.token)  # the timeline still holds the post
        frame = await again.next_update()
        await again.close()
        assert frame["newPostCount"] == 0
