"""Live counts honour negative feedback (decision 0076) as they honour the graph
(test_counts_graph.py): a mute drops the author's posts from the muter's count in the
mutation's own request, a fan-out batch queued before it and a pull-mode post through the hub
count nothing for the muter, and an unmute resumes counting from then on, like a follow; a
hidden post that was counted leaves the count at once and a batch of it that lagged behind
counts nothing. The mute outlives the stop marks' Redis key: a hub plants it again when the
user connects.

Real uvicorn, real websocket, GraphQL over HTTP, the write path as real ARQ jobs. "Nothing
arrived" is proven by a sentinel frame (frames of one socket arrive in order), not by waiting.
"""

from __future__ import annotations

from app.fanout import lanes
from app.posts.ids import created_ms, encode_post_id
from app.realtime.keys import stops_key
from tests.helpers import follow, gql, make_user, post, timeline_ids, unfollow
from tests.realtime.live import LiveClient, pull_mode_fan, sentinel, shown, subscribed_fan
from tests.servers import ApiServer


async def _mute(http, token: str, handle: str, op: str = "MuteAuthor") -> None:
    (await gql(http, op, {"handle": handle}, token=token)).ok()


async def _hide(http, token: str, post_id: int) -> None:
    (await gql(http, "HidePost", {"id": encode_post_id(post_id)}, token=token)).ok()


async def test_mute_drops_the_count_at_once_and_unmute_resumes(server: ApiServer, pipeline) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("muted", "friend"))
        muted, friend, live = fan.authors["muted"], fan.authors["friend"], fan.live
        kept = await post(http, friend, "stays counted")
        await post(http, muted, "about to be muted")
        await pipeline.settle()
        await live.until_count(2)

        await _mute(http, fan.token, "muted")  # the count drops in the mutation's request
        assert shown(await live.next_update(seconds=1)) == (1, created_ms(kept))
        await post(http, muted, "while muted")  # fanned out to the fan (a follower still)
        await sentinel(http, pipeline, live, friend, 2)

        # Unmute: from now on only; the posts made while muted do not come back as new.
        await _mute(http, fan.token, "muted", "UnmuteAuthor")
        await sentinel(http, pipeline, live, muted, 3)
        await live.close()


async def test_a_fan_out_queued_before_the_mute_counts_nothing(
    server: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live

        post_id = await post(http, author, "queued before the mute")
        split = await state.fanout.split_post(post_id, pipeline.enqueue)
        assert split is not None and split.batches == 1  # its FanoutBatch waits in ARQ
        await _mute(http, fan.token, "author")
        assert await pipeline.run_lane(lanes.DEFAULT) == 1  # the lagging batch
        assert post_id in await timeline_ids(state, fan.id)  # a mute keeps the timeline
        await sentinel(http, pipeline, live, friend, 1)
        await live.close()


async def test_a_pull_mode_author_muted_counts_nothing(server: ApiServer, pipeline) -> None:
    """Pull-mode posts are counted by the API hub: the mute drops the counted one at once,
    and the hub's check leaves the next one out for the muter."""
    async with server.http() as http:
        celeb, fan, live, _ = await pull_mode_fan(server, http, pipeline, "pulled")
        friend, _ = await make_user(http, "friend")
        await follow(http, fan, "friend")
        await pipeline.settle()

        await _mute(http, fan, "celeb")
        assert await live.next_update(seconds=1) == {"newPostCount": 0, "latestPostAt": None}
        await post(http, celeb, "pulled while muted")
        await sentinel(http, pipeline, live, friend, 1)
        # Unmuted: the celeb's next post counts again, through the hub.
        await _mute(http, fan, "celeb", "UnmuteAuthor")
        await sentinel(http, pipeline, live, celeb, 2)
        await live.close()


async def test_a_hidden_post_leaves_the_count_and_a_lagging_batch_counts_nothing(
    server: ApiServer, pipeline, state
) -> None:
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("author", "friend"))
        author, friend, live = fan.authors["author"], fan.authors["friend"], fan.live
        older = await post(http, author, "stays")
        counted = await post(http, author, "hidden once counted")
        await pipeline.settle()
        await live.until_count(2)
        await _hide(http, fan.token, counted)
        assert shown(await live.next_update(seconds=1)) == (1, created_ms(older))

        lagging = await post(http, author, "hidden before its batch ran")
        split = await state.fanout.split_post(lagging, pipeline.enqueue)
        assert split is not None and split.batches == 1
        await _hide(http, fan.token, lagging)
        assert await pipeline.run_lane(lanes.DEFAULT) == 1
        await sentinel(http, pipeline, live, friend, 2)
        await live.close()


async def test_a_mute_outlives_its_redis_marks_and_a_refollow(
    server: ApiServer, pipeline, state
) -> None:
    """The stop marks' key expires (or Redis loses it) while the mute holds in PostgreSQL:
    the hub plants the mute again when the user connects, before the user counts as online.
    And a follow while muted (unfollow, follow again) does not resume the count."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("muted", "friend"))
        muted, friend = fan.authors["muted"], fan.authors["friend"]
        await _mute(http, fan.token, "muted")
        await fan.live.close()
        await state.roles.pubsub.delete(stops_key(fan.id))  # the marks are gone

        live = await LiveClient.open(server, fan.token)
        assert (await live.next_update())["newPostCount"] == 0
        await post(http, muted, "after the marks were lost")
        await sentinel(http, pipeline, live, friend, 1)

        await unfollow(http, fan.token, "muted")
        await follow(http, fan.token, "muted")
        await pipeline.settle()
        await post(http, muted, "refollowed, still muted")
        await sentinel(http, pipeline, live, friend, 2)
        await live.close()


async def test_reconnect_counts_no_hidden_or_muted_post(server: ApiServer, pipeline) -> None:
    """A connect's catch-up counts what arrived while away from the timeline: not a hidden
    post, nor a muted author's (read in SQL then)."""
    async with server.http() as http:
        fan = await subscribed_fan(server, http, pipeline, follows=("muted", "friend"))
        muted, friend = fan.authors["muted"], fan.authors["friend"]
        await fan.live.close()
        await pipeline.settle()
        await post(http, muted, "while away")
        hidden = await post(http, friend, "hidden while away")
        kept = await post(http, friend, "counted")
        await pipeline.settle()
        await _mute(http, fan.token, "muted")
        await _hide(http, fan.token, hidden)

        live = await LiveClient.open(server, fan.token)
        assert shown(await live.next_update()) == (1, created_ms(kept))
        await live.close()
