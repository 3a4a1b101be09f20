"""Redis roles on separate servers (issue 23, decision 0041): the API and real ARQ workers
and relay as `make run` starts them (subprocesses), with the timelines, sessions, pubsub and
limits roles on a real 3-node Redis Cluster started on loopback and the queue role on the
plain test Redis. Driven through the public GraphQL API only; the Redis servers are then
asked where each key family landed. Also: a cluster URL for the queue role is refused at
start-up with a message naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from app.config import PROJECT_ROOT
from app.timelines.packed import entries_of, newest_first
from tests.cluster_topology import cluster_url
from tests.helpers import eventually, feed_ids, follow, gql, make_user, post
from tests.realtime.live import LiveClient
from tests.servers import ApiServer, stop_process
from tests.timelines.local_cluster import local_cluster, redis_server_binary

pytestmark = pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server binary")

PROCESSES = ["jobs.worker.WorkerSettings", "jobs.worker.BigLaneWorkerSettings"]


@pytest.fixture
async def cluster() -> AsyncIterator[str]:
    async with local_cluster() as url:
        yield cluster_url(url)


def split_env(cluster: str, **extra: str) -> dict[str, str]:
    """Every role but the queue on the cluster; REDIS_URL (the queue) the plain test db."""
    return {
        "REDIS_TIMELINES_URL": cluster,
        "REDIS_SESSIONS_URL": cluster,
        "REDIS_PUBSUB_URL": cluster,
        "REDIS_LIMITS_URL": cluster,
        **extra,
    }


@pytest.fixture
def pipeline_processes(cluster: str) -> Iterator[list[subprocess.Popen[bytes]]]:
    """A worker per lane and the outbox relay, real processes on the split roles."""
    env = {**os.environ, **split_env(cluster)}
    argvs = [[sys.executable, "-m", "arq", s] for s in PROCESSES]
    argvs.append([sys.executable, "-m", "jobs.relay"])
    procs = [
        subprocess.Popen(
            argv, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for argv in argvs
    ]
    try:
        yield procs
    finally:
        for proc in procs:
            stop_process(proc)


async def cluster_keys(client: RedisCluster, pattern: str) -> list[bytes]:
    found: list[bytes] = []
    await client.initialize()  # the nodes are known once the client met the cluster
    assert client.get_primaries()
    for node in client.get_primaries():
        found += await client.keys(pattern, target_nodes=node)
    return found


async def test_a_post_fans_out_into_a_timeline_on_the_cluster(
    cluster: str, pipeline_processes: list[subprocess.Popen[bytes]], state
) -> None:
    plain: Redis = state.redis  # the queue role: REDIS_URL's test db
    nodes = RedisCluster.from_url(cluster.replace("redis+cluster://", "redis://"))
    try:
        async with ApiServer(env=split_env(cluster)) as api, api.http() as client:
            author, _ = await make_user(client, "author")
            fans = [await make_user(client, f"fan{i}") for i in range(3)]
            for token, _ in fans:
                await follow(client, token, "author")
            # Rebuilt empty timelines first, so a hit below is the fan-out's doing.
            for token, _ in fans:
                assert await feed_ids(client, token) == []
            # A live socket: its count is raised by the worker's script on the cluster and
            # announced through the hub's pub/sub connection to a cluster node.
            live = await LiveClient.open(api, fans[0][0])
            await live.next_update(10)  # the count at subscribe time
            pid = await post(client, author, "on the cluster")
            assert (await live.until_count(1, 30))[-1]["newPostCount"] == 1
            await live.ws.close()

            async def in_timeline(user_id: int) -> bool:
                raw = await nodes.get(f"tl:{{{user_id}}}")
                return raw is not None and pid in [p for p, _ in newest_first(entries_of(raw))]

            for _, fan_id in fans:
                await eventually(lambda f=fan_id: in_timeline(f), 30, 0.1, "fanned out")
            for token, _ in fans:
                assert await feed_ids(client, token) == [pid]

            # Feed sessions on the cluster: a RANKED scroll over more than one page.
            for i in range(4):
                await post(client, author, f"more {i}")
            token = fans[0][0]
            await eventually(lambda: _feed_len(client, token, 5), 30, 0.1, "every post fanned out")
            first = (await gql(client, "Feed", {"first": 2, "mode": "RANKED"}, token=token)).ok()
            after = first["feed"]["pageInfo"]["endCursor"]
            second = await gql(
                client, "Feed", {"first": 2, "mode": "RANKED", "after": after}, token=token
            )
            assert len(second.ok()["feed"]["edges"]) == 2
            assert await cluster_keys(nodes, "fs:*"), "the feed session lives on the cluster"

            # The queue's keys on the plain server, the others on the cluster only.
            assert await plain.keys("tl:*") == []
            assert await plain.keys("fs:*") == []
            assert await plain.keys("rl:*") == [] and await plain.keys("tv:*") == []
            assert await plain.keys("fo:*"), "fan-out tracking on the queue's server"
            assert await cluster_keys(nodes, "arq:*") == []
            assert await cluster_keys(nodes, "posts:*")
            assert await cluster_keys(nodes, "tv:*"), "token versions on the limits role"
            assert await cluster_keys(nodes, "fu:*"), "live counts on the pubsub role"
            ready = (await client.get("/readyz")).json()
            assert ready["checks"]["redis"] == "ok", ready
            roles = ("timelines", "sessions", "queue", "pubsub", "limits")
            assert all(ready["checks"][f"redis:{r}"] == "ok" for r in roles), ready
    finally:
        await nodes.aclose()


async def _feed_len(client: httpx.AsyncClient, token: str, n: int) -> bool:
    return len(await feed_ids(client, token)) >= n


async def test_a_rate_limit_counts_on_the_cluster(cluster: str) -> None:
    env = split_env(cluster, RATE_LIMIT_WRITES_PER_MINUTE="3")
    nodes = RedisCluster.from_url(cluster.replace("redis+cluster://", "redis://"))
    try:
        async with ApiServer(env=env) as api, api.http() as client:
            token, _ = await make_user(client, "writer")
            results = [
                await gql(client, "CreatePost", {"body": f"p{i}"}, token=token) for i in range(5)
            ]
            codes = [[e["extensions"]["code"] for e in r.errors] for r in results]
            assert ["RATE_LIMITED"] in codes, codes
            assert await cluster_keys(nodes, "rl:*"), "the window's counter is on the cluster"
    finally:
        await nodes.aclose()


@pytest.mark.parametrize("setting", ["REDIS_QUEUE_URL", "REDIS_URL"])
def test_a_cluster_queue_url_is_refused_at_start(setting: str) -> None:
    """The worker and the API both refuse it, naming the setting: ARQ needs a plain Redis.
    (No cluster needs to run: the settings refuse the URL before any connection.)"""
    env = {**os.environ, setting: "redis+cluster://127.0.0.1:7000"}
    for argv in (
        [sys.executable, "-m", "arq", "jobs.worker.WorkerSettings"],
        [sys.executable, "-c", "import app.web"],
    ):
        done = subprocess.run(
            argv, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode != 0
        assert "REDIS_QUEUE_URL" in done.stderr, done.stderr[-2000:]
        assert "plain Redis" in done.stderr, done.stderr[-2000:]
