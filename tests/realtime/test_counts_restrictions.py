"""Live counts and regional restrictions (decision 0088): a count does not know its user's
region, so a post restricted in any region leaves its followers' counts (the restriction's
outbox event runs the post's `post_changed` job, as a narrowing to PRIVATE does: decision
0022), and a fan-out of it that lagged behind the restriction announces nothing.

Real uvicorn, real websocket, the write path as real ARQ jobs; "nothing arrived" is proven by
a sentinel frame (frames of one socket arrive in order)."""

from __future__ import annotations

from app.fanout import lanes
from app.posts.ids import created_ms
from app.posts.restrictions import change_restriction
from tests.helpers import post, timeline_ids
from tests.realtime.live import sentinel, shown, subscribed_fan
from tests.servers import ApiServer


async def test_a_restricted_post_leaves_the_count(server: ApiServer, pipeline, state) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live
        kept = await post(http, friend, "stays counted")
        restricted = await post(http, author, "to be restricted")
        await pipeline.settle()
        await live.until_count(2)

        await change_restriction(state.sessions, restricted, ["eu"], "law", "ops")
        await pipeline.settle()  # the relay and the post_changed job
        assert shown(await live.next_update(seconds=2)) == (1, created_ms(kept))
        await live.close()


async def test_a_fan_out_queued_before_the_restriction_counts_nothing(
    server: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live
        post_id = await post(http, author, "queued before the restriction")
        split = await state.fanout.split_post(post_id, pipeline.enqueue)
        assert split is not None and split.batches == 1  # its FanoutBatch waits in ARQ
        await change_restriction(state.sessions, post_id, ["eu"], "law", "ops")
        assert await pipeline.run_lane(lanes.DEFAULT) == 1  # the lagging batch
        assert post_id in await timeline_ids(state, fan.id)  # readers elsewhere still get it
        await pipeline.settle()
        await sentinel(http, pipeline, live, friend, 1)
        await live.close()
