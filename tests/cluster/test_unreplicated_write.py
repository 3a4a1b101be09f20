"""A timeline write the master acknowledged but its replica never got, then the master lost
(decision 0042's known gap, closed by decision 0068): the post must still reach the feed.

Made certain, not left to timing: the follower's timeline exists on the master and on its
replica (earlier posts fanned out and replicated; a missing timeline would be rebuilt from
PostgreSQL on read and hide the loss). The replica is stopped (SIGSTOP) and its replication
link cut by the master (CLIENT KILL TYPE replica): SIGSTOP alone is not enough on loopback,
the master's stream lands in the stopped replica's socket buffer and is applied on SIGCONT.
Then a post is acknowledged by createPost and its fan-out writes the master's copy of the
timeline; the master is SIGKILLed, the replica resumed and promoted (CLUSTER FAILOVER
TAKEOVER if the cluster has not promoted it within 8 s), the killed node started again (it
rejoins as the new master's replica). Every acknowledged post must then be in every
follower's feed, read through both API processes.

Before the fix the batch completed at once (its job done: nothing wrote the post again) and
the promoted replica's timeline lacked it for good. With TIMELINE_WAIT_REPLICAS=1 (the
topology's setting, tests/cluster/scaled.py) the batch's WAIT on the master finds no replica
holding its write, fails, and is retried until the new master and its replica both have it.

Collected after test_failover.py: the cluster's roles are read as they are now.
"""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.fanout import lanes
from app.timelines.store import TimelineStore, timeline_key
from jobs import tracking
from tests.cluster.scaled import WAIT, Scaled, active_follower
from tests.cluster_topology import Node
from tests.helpers import eventually, follow, gql, ids, make_user, post
from tests.servers import ApiServer

TAKEOVER_AFTER_SECONDS = 8.0


async def feed_or_none(http: httpx.AsyncClient, token: str) -> set[int] | None:
    """The newest 50 post ids of the viewer's CHRONOLOGICAL feed; None while the API answers
    with an error or degraded (from PostgreSQL, which would hide a lost timeline entry)."""
    result = await gql(http, "Feed", {"first": 50, "mode": "CHRONOLOGICAL"}, token=token)
    if result.errors or not result.data or result.data["feed"]["degraded"]:
        return None
    return set(ids(result.data["feed"]))


async def job_retries(api: ApiServer) -> float:
    """`feed_job_retries_total` of the jobs that write a post's timelines (the split, which
    writes a small author's pages itself, and FanoutBatch), every process summed."""
    async with api.http() as http:
        text = (await http.get("/metrics")).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "feed_job_retries_total"
        and sample.labels.get("function") in (lanes.FANOUT_POST, lanes.FANOUT_BATCH)
    )


async def caught_up(master: Node, replica: Node) -> bool:
    """The replica has applied everything the master has written so far."""
    written = int((await master.info("replication"))["master_repl_offset"])
    info = await replica.info("replication")
    return info.get("master_link_status") == "up" and int(info["slave_repl_offset"]) >= written


# Alone (decision 0074): its retry must land within the wait after a failover, which the
# parallel phase's load stretched past it in 3 runs of 3; alone it takes ~15 s.
@pytest.mark.alone
async def test_a_write_its_replica_never_got_survives_the_masters_death(scaled: Scaled) -> None:
    api1, api2 = scaled.apis
    cluster = scaled.cluster
    async with api1.http() as h1, api2.http() as h2:
        author, _ = await make_user(h1, "author")
        fans = [await active_follower((h1, h2)[i], scaled, f"fan{i}") for i in range(2)]
        for token, _ in fans:
            await follow(h2, token, "author")
        hit_id = fans[0][1]
        master, replicas = await cluster.shard_of(timeline_key(hit_id))
        assert replicas, f"{master.address} has no replica"
        replica = replicas[0]

        warm = await post(h1, author, "before")

        async def warm_everywhere() -> bool:
            for i, (token, _) in enumerate(fans):
                feed = await feed_or_none((h1, h2)[i], token)
                if feed is None or warm not in feed:
                    return False
            return await caught_up(master, replica)

        await eventually(warm_everywhere, WAIT, 0.1, "the warm-up post in every feed, replicated")

        # The replica stops, and the master cuts its replication link: nothing written from
        # now on reaches it.
        assert replica.proc.pid
        os.kill(replica.proc.pid, signal.SIGSTOP)
        resumed = False
        try:
            cut = await master.client.execute_command("CLIENT", "KILL", "TYPE", "replica")
            assert int(cut) == 1, cut
            retried_before = await job_retries(api2)
            lost = await post(h2, author, "acknowledged, then its master dies")
            on_master = TimelineStore(master.client, 1000, 100)  # the master's own copy

            async def written_on_master() -> bool:
                return lost in [pid for pid, _ in await on_master.latest(hit_id, 50)]

            await eventually(written_on_master, WAIT, 0.02, "the post in the master's timeline")

            async def settled_or_refused() -> str | None:
                """Its fan-out marked complete (the batch's job done: nothing will write the
                post again), or a try of it failed since the post (a retry is scheduled)."""
                if await scaled.queue.hget(tracking.state_key(lost), "done") is not None:
                    return "done"
                return "retried" if await job_retries(api2) > retried_before else None

            fanout = await eventually(settled_or_refused, WAIT, 0.02, "the fan-out done or retried")
            killed_at = time.monotonic()
            cluster.kill(master)
            os.kill(replica.proc.pid, signal.SIGCONT)
            resumed = True
        finally:
            if not resumed:
                os.kill(replica.proc.pid, signal.SIGCONT)
        failover = await cluster.await_failover(master, 30, TAKEOVER_AFTER_SECONDS, replica)
        # As a supervisor would: the killed node back, as the promoted node's replica.
        await cluster.restart(master)

        seen: dict[str, object] = {}  # what each feed read last showed (quoted on failure)

        async def delivered() -> bool:
            for i, (token, _) in enumerate(fans):
                for j, http in enumerate((h1, h2)):
                    feed = await feed_or_none(http, token)
                    seen[f"fan{i} via api{j + 1}"] = (
                        "error or degraded" if feed is None else sorted(feed & {warm, lost})
                    )
                    if feed is None or not {warm, lost} <= feed:
                        return False
            return True

        try:
            await eventually(delivered, WAIT, 0.2, "the acknowledged post in every feed")
        except AssertionError as failed:
            raise AssertionError(
                f"{failed} (fan-out {fanout} before the kill, failover {failover:.2f} s; "
                f"warm {warm}, lost {lost}; last seen {seen}; retries "
                f"{await job_retries(api2) - retried_before:.0f})\n{scaled.logs()}"
            ) from None
        print(
            f"fan-out {fanout} before the kill; failover {failover:.2f} s; every feed has the "
            f"post {time.monotonic() - killed_at:.2f} s after the kill"
        )

        async def rejoined() -> bool:
            return await master.role() == "slave" and await master.cluster_ok()

        await eventually(rejoined, WAIT, 0.1, "the killed master back as a replica")
        # The promoted replica holds the post itself, not only the feed (which merges the
        # followed authors' newest posts while fan-out lags: the feed can show it first).
        promoted, _ = await cluster.shard_of(timeline_key(hit_id))
        assert promoted is replica

        async def held() -> bool:
            entries = await TimelineStore(replica.client, 1000, 100).latest(hit_id, 50)
            return lost in [p for p, _ in entries]

        try:
            await eventually(held, WAIT, 0.1, "the post in the promoted node's timeline")
        except AssertionError as failed:
            raise AssertionError(f"{failed} (lost {lost})\n{scaled.logs()}") from None
    assert not scaled.dead(), scaled.logs()
