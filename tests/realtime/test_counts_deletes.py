"""Live counts follow deletes and narrowed visibility: a post that stops reaching a follower
leaves the count it raised, the socket is told the lower count and the newest remaining
post's time, and nothing is lowered twice (job replays) or raised again (queue lag).

Real uvicorn, real websocket, GraphQL over HTTP; the write path runs as real ARQ jobs, step by
step where the order matters. "Nothing arrived" is proven by a later sentinel frame (frames
of one socket arrive in order), never by waiting.
"""

from __future__ import annotations

import pytest

from app.fanout import lanes
from app.posts.ids import created_ms
from tests.helpers import gql, post
from tests.realtime.live import LiveClient, pull_mode_fan, sentinel, shown, subscribed_fan
from tests.servers import ApiServer

NONE_NEW = {"newPostCount": 0, "latestPostAt": None}


async def _delete(http, token: str, post_id: int) -> None:
    assert (await gql(http, "DeletePost", {"id": str(post_id)}, token=token)).ok()["deletePost"]


async def _set_visibility(http, token: str, post_id: int, visibility: str) -> None:
    variables = {"id": str(post_id), "visibility": visibility}
    (await gql(http, "SetPostVisibility", variables, token=token)).ok()


async def test_a_deleted_post_leaves_the_count(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        post_id = await post(http, fan.author, "soon gone")
        await pipeline.settle()
        frame = (await fan.live.until_count(1))[-1]
        assert shown(frame) == (1, created_ms(post_id))

        await _delete(http, fan.author, post_id)
        await pipeline.settle()
        assert await fan.live.next_update(seconds=2) == NONE_NEW
        await fan.live.close()


async def test_a_post_made_private_leaves_the_count_and_followers_only_does_not(
    server: ApiServer, pipeline
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        older = await post(http, fan.author, "stays: followers still see it")
        newer = await post(http, fan.author, "goes private")
        await pipeline.settle()
        assert shown((await fan.live.until_count(2))[-1]) == (2, created_ms(newer))

        await _set_visibility(http, fan.author, older, "FOLLOWERS")  # hides nothing from fans
        await pipeline.settle()
        await _set_visibility(http, fan.author, newer, "PRIVATE")
        await pipeline.settle()
        # The first frame since: one post left, the newest remaining one's time.
        assert shown(await fan.live.next_update(seconds=2)) == (1, created_ms(older))
        await fan.live.close()


async def test_a_replayed_delete_lowers_nothing_more(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        kept = await post(http, fan.author, "kept")
        gone = await post(http, fan.author, "deleted")
        await pipeline.settle()
        await fan.live.until_count(2)

        await _delete(http, fan.author, gone)
        await pipeline.settle()
        assert shown(await fan.live.next_update(seconds=2)) == (1, created_ms(kept))

        # The post-change job again (a retry or a replayed outbox event: a fresh job id).
        await pipeline.enqueue(lanes.POST_CHANGED, gone, job_id="replay", lane=lanes.DEFAULT)
        assert await pipeline.run_lane(lanes.DEFAULT) == 1
        await sentinel(http, pipeline, fan.live, fan.author, 2)
        await fan.live.close()


@pytest.mark.parametrize("change", ["delete", "private"])
async def test_a_batch_queued_before_the_post_was_hidden_counts_nothing(
    server: ApiServer, pipeline, state, change: str
) -> None:
    """Queue lag: the post's batch (with the fan in it) waits in ARQ while the author deletes
    the post or makes it PRIVATE; when the batch runs it does not raise the count for it."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        post_id = await post(http, fan.author, "hidden before its batch ran")
        split = await state.fanout.split_post(post_id, pipeline.enqueue)  # the real split
        assert split is not None and split.batches == 1  # its FanoutBatch waits in ARQ
        if change == "delete":
            await _delete(http, fan.author, post_id)
        else:
            await _set_visibility(http, fan.author, post_id, "PRIVATE")
        assert await pipeline.run_lane(lanes.DEFAULT) == 1  # the lagging batch, nothing else

        await sentinel(http, pipeline, fan.live, fan.author, 1)
        await fan.live.close()


async def test_a_pull_mode_authors_deleted_post_leaves_the_count(
    server: ApiServer, pipeline
) -> None:
    """Pull-mode posts are counted by the API hub, not by a fan-out batch: a delete lowers
    those counts too."""
    async with server.http() as http:
        celeb, _, live, post_id = await pull_mode_fan(
            server, http, pipeline, "pulled, then deleted"
        )
        await _delete(http, celeb, post_id)
        await pipeline.settle()
        assert await live.next_update(seconds=2) == NONE_NEW
        await live.close()


async def test_a_follower_away_during_the_delete_reconnects_to_a_lower_count(
    server: ApiServer, pipeline
) -> None:
    """The count outlives the socket (a reconnect keeps it): a post deleted while the
    follower was away is not in it when they come back."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline)
        kept = await post(http, fan.author, "kept")
        gone = await post(http, fan.author, "deleted while away")
        await pipeline.settle()
        await fan.live.until_count(2)
        await fan.live.close()

        await _delete(http, fan.author, gone)
        await pipeline.settle()
        again = await LiveClient.open(server, fan.token)
        assert shown(await again.next_update()) == (1, created_ms(kept))
        await again.close()
