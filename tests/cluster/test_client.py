"""The cluster client the app builds (app.redis_client.make_cluster) across a failover's
transient states, on the topology's cluster."""

from __future__ import annotations

from typing import Any

from redis.asyncio.cluster import RedisCluster

from app.posts.ids import created_ms
from app.redis_client import make_cluster
from app.timelines.store import TimelineStore, author_posts_key
from tests.cluster.scaled import Scaled


async def test_a_pipeline_with_an_error_reply_survives_a_dropped_default_node(
    scaled: Scaled, state: Any
) -> None:
    """A command that loses its node closes the client's nodes, and with them its default
    node; a pipeline running at that moment with an error reply among its results (here a
    key of another type, which the store reads as "missing") read `get_default_node().name`
    and failed with an AttributeError (redis-py 5.3.1), an INTERNAL error on a feed page
    mid-failover; the app's client kept a default node (`SteadyCluster`). redis-py 8 keeps
    one itself (decision 0090): both clients answer now, and the patch is gone."""
    client = make_cluster(state.settings, scaled.cluster.url)
    plain = RedisCluster.from_url(scaled.cluster.url.replace("redis+cluster", "redis"))
    try:
        await client.initialize()
        await plain.initialize()
        store = TimelineStore(client, 10, 10)
        post_id = 1577426204112191489
        await store.rebuild_author(1, [(post_id, created_ms(post_id))])
        await client.sadd(author_posts_key(2), "not a timeline")  # WRONGTYPE for GETRANGE
        for c in (client, plain):
            c.nodes_manager.default_node = None  # what a concurrent aclose() leaves
        found = await store.author_latest_many_or_none([1, 2], 5)
        assert found[1] is not None and found[2] is None
        client.nodes_manager.default_node = None
        assert await store.author_latest_many_or_none([1], 5)
        # redis-py's own client answers the same call (5.3.1 raised an AttributeError).
        plain.nodes_manager.default_node = None
        assert (await TimelineStore(plain, 10, 10).author_latest_many_or_none([1, 2], 5))[1]
    finally:
        await client.aclose()
        await plain.aclose()
