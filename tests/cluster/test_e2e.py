"""The feed, the hybrid feed and a live subscription end to end on the scale-out topology
(tests/cluster/conftest.py): two API processes, two workers per lane, the relay, every Redis
role but the queue on a 3-master cluster with replicas.

Nothing runs in the test process but the clients: posts go through one API process, feeds
are read through both, the fan-out is done by the worker processes.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.timelines.store import TimelineStore, timeline_key
from tests.cluster.conftest import Scaled
from tests.helpers import eventually, fanout_mode, follow, gql, ids, make_user, post
from tests.realtime.live import LiveClient

WAIT = 30.0  # seconds for work done by other processes on a loaded 2-core machine


async def scroll(
    clients: list[httpx.AsyncClient], token: str, mode: str, first: int = 5
) -> list[int]:
    """Every post id of the viewer's feed, page after page, each page through the next
    client in turn (the cursor of one API process followed on the other)."""
    shown: list[int] = []
    after: str | None = None
    for page in range(100):
        variables: dict[str, Any] = {"first": first, "mode": mode, "after": after}
        http = clients[page % len(clients)]
        feed = (await gql(http, "Feed", variables, token=token)).ok()["feed"]
        assert feed["degraded"] is False, feed
        shown += ids(feed)
        if not feed["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError("the feed did not end within 100 pages")


async def cluster_keys(scaled: Scaled, pattern: str) -> list[bytes]:
    """Keys matching `pattern` on every master of the cluster."""
    client = scaled.client()
    try:
        return [key async for key in client.scan_iter(match=pattern)]  # SCAN on each master
    finally:
        await client.aclose()


async def timeline(scaled: Scaled, user_id: int) -> list[int]:
    """The user's home timeline as it sits on the cluster, newest first ([] when missing)."""
    client = scaled.client()
    try:
        return [pid for pid, _ in await TimelineStore(client, 1000, 100).latest(user_id, 1000)]
    finally:
        await client.aclose()


async def active_follower(http: httpx.AsyncClient, scaled: Scaled, handle: str) -> tuple[str, int]:
    """A user who has read the feed once: its timeline exists on the cluster (fan-out writes
    only existing timelines) and it counts as active."""
    token, user_id = await make_user(http, handle)
    (await gql(http, "Feed", {"first": 5}, token=token)).ok()

    async def exists() -> bool:
        client = scaled.client()
        try:
            return bool(await client.exists(timeline_key(user_id)))
        finally:
            await client.aclose()

    await eventually(exists, WAIT, 0.05, f"{handle}'s timeline on the cluster")
    return token, user_id


async def test_a_post_fans_out_into_cluster_timelines_and_pages_on_both_processes(
    scaled: Scaled,
) -> None:
    api1, api2 = scaled.apis
    async with api1.http() as h1, api2.http() as h2:
        authors = {h: (await make_user(h1, h))[0] for h in ("ann", "ben")}
        viewer, viewer_id = await active_follower(h2, scaled, "viewer")
        for handle in authors:
            await follow(h2, viewer, handle)
        made: list[int] = []
        for i in range(8):  # posts through both processes
            for n, (handle, token) in enumerate(authors.items()):
                made.append(await post((h1, h2)[(i + n) % 2], token, f"{handle} {i}"))

        async def delivered() -> bool:
            return sorted(await timeline(scaled, viewer_id)) == sorted(made)

        await eventually(delivered, WAIT, 0.1, "16 posts fanned out into the cluster timeline")
        newest_first = sorted(made, reverse=True)
        assert await scroll([h1, h2], viewer, "CHRONOLOGICAL") == newest_first
        ranked = await scroll([h2, h1], viewer, "RANKED")
        assert sorted(ranked, reverse=True) == newest_first  # each post once, none missing
        # The feed session and the viewer's session index live on the cluster, and both API
        # processes followed the cursors the other made.
        assert await cluster_keys(scaled, f"fs:{{{viewer_id}}}:*")
        assert await cluster_keys(scaled, f"fsi:{{{viewer_id}}}")
    assert not scaled.all_alive(), scaled.logs()


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
        assert await cluster_keys(scaled, f"posts:{{{celeb_id}}}")  # the author index
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
        fan, _ = await active_follower(h1, scaled, "fan")
        await follow(h1, fan, "author")
        live = await LiveClient.open(api1, fan)
        try:
            assert (await live.next_update(5))["newPostCount"] == 0
            await post(h2, author, "across processes")
            await live.until_count(1, WAIT)
            await post(h2, author, "again")
            await live.until_count(2, WAIT)
            assert await cluster_keys(scaled, "fu:*")  # live counts on the cluster
        finally:
            await live.close()
