"""The feed, the hybrid feed and a live subscription end to end on the scale-out topology
(tests/cluster/conftest.py): two API processes, two workers per lane, the relay, every Redis
role but the queue on a 3-master cluster with replicas, PostgreSQL as a primary and a
streaming standby (DATABASE_REPLICA_URL).

Nothing runs in the test process but the clients: posts go through one API process, feeds
are read through both, the fan-out is done by the worker processes, which page followers
on the standby; the first API process hydrates session pages there too.
"""

from __future__ import annotations

import os
import signal

from app.feed.sessions import FeedSessionStore
from app.realtime.keys import count_key
from app.timelines.store import author_posts_key
from tests.cluster.scaled import (
    WAIT,
    Scaled,
    active_follower,
    on_cluster,
    replica_reads,
    scroll,
    timeline,
)
from tests.helpers import eventually, fanout_mode, follow, gql, make_user, post
from tests.realtime.live import LiveClient


async def test_a_post_fans_out_into_cluster_timelines_and_pages_on_both_processes(
    scaled: Scaled,
) -> None:
    api1, api2 = scaled.apis
    before = await replica_reads(api2)
    async with api1.http() as h1, api2.http() as h2:
        authors = {h: (await make_user(h1, h))[0] for h in ("ann", "ben")}
        viewer, viewer_id = await active_follower(h2, scaled, "viewer")
        for handle in authors:
            await follow(h2, viewer, handle)
        made: list[int] = []
        # One post's fan-out starts only once the standby has replayed it (the relay held
        # meanwhile): its followers are paged there whatever the workers' pick-up time (5 ms:
        # the others may find the standby behind and read the primary).
        relay = scaled.relay.proc
        assert relay is not None
        os.kill(relay.pid, signal.SIGSTOP)
        try:
            made.append(await post(h1, authors["ann"], "ann, replayed first"))
            await eventually(scaled.database.caught_up, WAIT, 0.05, "the standby replayed it")
        finally:
            os.kill(relay.pid, signal.SIGCONT)
        for i in range(8):  # posts through both processes
            for n, (handle, token) in enumerate(authors.items()):
                made.append(await post((h1, h2)[(i + n) % 2], token, f"{handle} {i}"))

        async def delivered() -> bool:
            return sorted(await timeline(scaled, viewer_id)) == sorted(made)

        await eventually(delivered, WAIT, 0.1, "17 posts fanned out into the cluster timeline")
        newest_first = sorted(made, reverse=True)
        assert await scroll([h1, h2], viewer, "CHRONOLOGICAL") == newest_first
        ranked = await scroll([h2, h1], viewer, "RANKED")
        assert sorted(ranked, reverse=True) == newest_first  # each post once, none missing
        # Both API processes followed the cursors the other made; the session they share
        # is frozen on the cluster.
        first = (await gql(h1, "Feed", {"first": 5}, token=viewer)).ok()["feed"]
        client = scaled.client()
        try:
            frozen = await FeedSessionStore(client, 60).load(viewer_id, first["sessionId"])
        finally:
            await client.aclose()
        assert frozen is not None and sorted(frozen.ids, reverse=True) == newest_first
    # The standby served: the workers paged followers there (once it had replayed the post,
    # else `behind`), the first API process hydrated its session pages there. Nothing failed.
    # A split counts its read after queueing the batches, so the timeline may be complete
    # (another worker wrote it) before the last split's count lands: wait for the counts.
    after: dict[tuple[str, str], float] = {}

    def grew(use: str, served: str) -> float:
        return after.get((use, served), 0.0) - before.get((use, served), 0.0)

    async def every_split_counted() -> bool:
        after.update(await replica_reads(api2))
        return grew("fanout_followers", "replica") + grew("fanout_followers", "behind") >= 17

    await eventually(every_split_counted, WAIT, 0.1, "17 follower reads counted")

    print({key: value - before.get(key, 0.0) for key, value in after.items()})
    assert grew("fanout_followers", "replica") >= 1, after
    assert grew("fanout_followers", "replica") + grew("fanout_followers", "behind") >= 17, after
    assert grew("feed_page", "replica") >= 2, after  # 17 posts, 5 a page, every other
    for use in ("fanout_followers", "feed_page"):
        assert grew(use, "error") == grew(use, "down") == grew(use, "lag") == 0, after
    assert not scaled.dead(), scaled.logs()


async def test_hybrid_feed_merges_a_pull_author_read_from_the_cluster(scaled: Scaled) -> None:
    """`celeb` passes the tests' PULL threshold (10 followers): its posts are indexed once in
    `posts:{celeb}` on the cluster and merged into each follower's feed at read time."""
    api1, api2 = scaled.apis
    async with api1.http() as h1, api2.http() as h2:
        celeb, celeb_id = await make_user(h1, "celeb")
        fans = [await active_follower((h1, h2)[i % 2], scaled, f"fan{i}") for i in range(10)]
        for token, _ in fans:
            await follow(h2, token, "celeb")
        await post(h1, celeb, "now I have 10 followers")  # the split switches to PULL

        async def pulled() -> bool:
            return await fanout_mode(h2, "celeb") == "PULL"

        await eventually(pulled, WAIT, 0.1, "celeb in PULL mode")
        pulled_post = await post(h2, celeb, "read at read time")
        friend, _ = await make_user(h1, "friend")
        await follow(h1, fans[0][0], "friend")
        pushed_post = await post(h1, friend, "pushed")

        async def merged() -> bool:
            return pushed_post in await timeline(scaled, fans[0][1])

        await eventually(merged, WAIT, 0.1, "friend's post pushed into fan0's timeline")
        assert pulled_post not in await timeline(scaled, fans[0][1])  # never pushed
        assert await on_cluster(scaled, author_posts_key(celeb_id))  # the author index
        for token, _ in fans[:3]:
            for http in (h1, h2):
                first = await scroll([http], token, "CHRONOLOGICAL", first=20)
                assert pulled_post in first
        first = await scroll([h2, h1], fans[0][0], "CHRONOLOGICAL", first=1)
        assert first[:2] == [pushed_post, pulled_post]


async def test_a_subscription_on_one_process_hears_a_post_made_through_the_other(
    scaled: Scaled,
) -> None:
    api1, api2 = scaled.apis
    async with api1.http() as h1, api2.http() as h2:
        author, _ = await make_user(h2, "author")
        fan, fan_id = await active_follower(h1, scaled, "fan")
        await follow(h1, fan, "author")
        live = await LiveClient.open(api1, fan)
        try:
            assert (await live.next_update(5))["newPostCount"] == 0
            await post(h2, author, "across processes")
            await live.until_count(1, WAIT)
            await post(h2, author, "again")
            await live.until_count(2, WAIT)
            assert await on_cluster(scaled, count_key(fan_id))  # the live count
        finally:
            await live.close()
