"""A cluster master killed (SIGKILL) while posts, feed reads and a subscription go on, on the
scale-out topology (tests/cluster/conftest.py); its replica is promoted by the cluster.

What must hold: no request fails with a 500 (a typed GraphQL error at most); writes go on
once the cluster has reconfigured; every createPost that answered OK reaches every
follower's feed (timelines may be rebuilt from PostgreSQL); live updates resume on the
socket opened before the kill; every process of the topology is still running; the killed
node, started again right after the promotion (the promoted master's fan-out batches wait
for a replica: TIMELINE_WAIT_REPLICAS), rejoins as a replica.

Then the PostgreSQL side on the same topology: the standby (DATABASE_REPLICA_URL) stopped
while posts and feed reads go on, and started again. Reads meant for it are answered by the
primary meanwhile, no request fails, every acknowledged post reaches every follower's feed,
and the standby serves again once back.

Collected after test_e2e.py (the cluster keeps its promoted replica afterwards).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import asyncpg
import httpx

from app.posts.ids import created_ms
from app.realtime.keys import Channels
from app.timelines.store import timeline_key
from tests.cluster.scaled import WAIT, Scaled, active_follower, replica_reads, scroll
from tests.conftest import TEST_DB
from tests.helpers import eventually, follow, gql, make_user, post
from tests.realtime.live import LiveClient, shown

TAKEOVER_AFTER_SECONDS = 8.0  # automatic failover takes ~2 s at a 1 s node timeout
# What a client may be told while the cluster reconfigures (retry later), never INTERNAL.
TRANSIENT = {"UNAVAILABLE", "OVERLOADED", "RATE_LIMITED"}
# The reads that go to the replica on this topology: the workers' follower paging, the first
# API process's session pages (tests/cluster/scaled.py).
REPLICA_USES = ("fanout_followers", "feed_page")
# The standby stays stopped at least this long: two replica checks (1 s each), so the routers'
# checks find it gone, not only the reads it failed.
STANDBY_DOWN_SECONDS = 2.0


@dataclass
class Load:
    """What the clients saw while the master died: acknowledged posts (id, monotonic time of
    the answer), the error codes of refused requests, HTTP statuses, degraded reads."""

    acked: list[tuple[int, float]] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    reads: int = 0
    degraded_reads: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def write_loop(load: Load, clients: list[httpx.AsyncClient], token: str) -> None:
    n = 0
    while not load.stop.is_set():
        http = clients[n % len(clients)]
        result = await gql(http, "CreatePost", {"body": f"under failover {n}"}, token=token)
        load.statuses[result.status] += 1
        if result.status == 200 and not result.errors and result.data:
            load.acked.append((int(result.data["createPost"]["id"]), time.monotonic()))
        else:
            load.codes.update(f"post {c}" for c in result.codes or [f"http {result.status}"])
        n += 1
        await asyncio.sleep(0.05)


async def read_loop(load: Load, clients: list[httpx.AsyncClient], tokens: list[str]) -> None:
    n = 0
    while not load.stop.is_set():
        http, token = clients[n % len(clients)], tokens[n % len(tokens)]
        result = await gql(http, "Feed", {"first": 10}, token=token)
        load.statuses[result.status] += 1
        if result.errors or not result.data:
            load.codes.update(f"feed {c}" for c in result.codes or [f"http {result.status}"])
        else:
            load.reads += 1
            load.degraded_reads += bool(result.data["feed"]["degraded"])
        n += 1
        await asyncio.sleep(0.02)


async def test_a_master_killed_under_load_loses_nothing_acknowledged(scaled: Scaled) -> None:
    api1, api2 = scaled.apis
    cluster = scaled.cluster
    async with api1.http() as h1, api2.http() as h2:
        author, _ = await make_user(h1, "author")
        # The victim: the cluster URL's seed node, and the master of fan0's timeline, live
        # count, sessions and live channel (a shard channel in the user's slot, decision
        # 0090); three more fans wherever their slots fall.
        victim = cluster.masters[0]

        def on_victim(fan: tuple[str, int]) -> bool:
            return cluster.master_for(timeline_key(fan[1])) is victim

        made: list[tuple[str, int]] = []
        while not any(on_victim(f) for f in made) or len(made) < 4:
            assert len(made) < 30, "no user id hashed to the victim's slots"
            made.append(await active_follower((h1, h2)[len(made) % 2], scaled, f"fan{len(made)}"))
        hit = next(f for f in made if on_victim(f))
        fans = [hit, *[f for f in made if f is not hit][:3]]
        for token, _ in fans:
            await follow(h2, token, "author")
        warm = await post(h1, author, "before the failover")

        async def warm_everywhere() -> bool:
            feeds = [await scroll([h1], token, "CHRONOLOGICAL", 20) for token, _ in fans]
            return all(warm in feed for feed in feeds)

        await eventually(warm_everywhere, WAIT, 0.2, "the warm-up post in every feed")
        live = await LiveClient.open(api1, fans[0][0])
        try:
            assert (await live.next_update(5))["newPostCount"] >= 0
            # The socket's channel is SSUBSCRIBEd on the victim (its shard), not on any node.
            channel = Channels(TEST_DB, sharded=True).user(fans[0][1])
            reply = await victim.client.execute_command("PUBSUB", "SHARDNUMSUB", channel)
            assert int(reply[1]) == 1, reply

            load = Load()
            tasks = [
                asyncio.create_task(write_loop(load, [h1, h2], author)),
                asyncio.create_task(read_loop(load, [h2, h1], [t for t, _ in fans])),
            ]
            await eventually(lambda: len(load.acked) >= 3, WAIT, 0.05, "posts before the kill")
            killed_at = time.monotonic()
            cluster.kill(victim)
            failover = await cluster.await_failover(victim, 30, TAKEOVER_AFTER_SECONDS)
            promoted_at = time.monotonic()
            # Started again at once, as a supervisor would: the promoted master's batches
            # wait for a replica to hold their writes (TIMELINE_WAIT_REPLICAS, decision 0068).
            await cluster.restart(victim)

            def written_after() -> list[int]:
                return [pid for pid, at in load.acked if at > promoted_at]

            # Writes go on once the cluster has reconfigured (the loop keeps posting).
            await eventually(lambda: len(written_after()) >= 3, WAIT, 0.05, "posts after")
            load.stop.set()
            await asyncio.gather(*tasks)

            acked = [pid for pid, _ in load.acked]
            after = written_after()
            report = (
                f"failover {failover:.2f} s; acked {len(acked)} ({len(after)} after the "
                f"promotion); refused {dict(load.codes)}; statuses {dict(load.statuses)}; "
                f"reads {load.reads} ({load.degraded_reads} degraded)"
            )
            print(report)
            assert set(load.statuses) == {200}, report  # never a 500
            codes = {code.split()[1] for code in load.codes}
            assert codes <= TRANSIENT, report  # typed, nothing INTERNAL

            # Nothing acknowledged is lost: every follower's feed, through both processes.
            everything = {warm, *acked}

            async def converged() -> bool:
                for i, (token, _) in enumerate(fans):
                    feed = await scroll([(h1, h2)[i % 2]], token, "CHRONOLOGICAL", 100)
                    if not everything <= set(feed):
                        return False
                return True

            started = time.monotonic()
            await eventually(
                converged, WAIT, 0.5, f"every acknowledged post in every feed; {report}"
            )
            print(f"converged {time.monotonic() - started:.2f} s after the load stopped; "
                  f"{time.monotonic() - killed_at:.2f} s after the kill")  # fmt: skip

            # Live updates resume on the socket opened before the kill.
            fresh = await post(h2, author, "after the failover")

            async def announced() -> bool:
                try:
                    frame = await live.next_update(WAIT)
                except TimeoutError:
                    raise AssertionError(
                        f"no live update on the socket opened before the kill in {WAIT} s "
                        "(its channel's shard master was the one killed)"
                    ) from None
                return shown(frame)[1] == created_ms(fresh)

            await eventually(announced, WAIT, 0, "the fresh post announced on the old socket")
        finally:
            await live.close()

        assert not scaled.dead(), scaled.logs()

        async def rejoined() -> bool:
            return await victim.role() == "slave" and await victim.cluster_ok()

        await eventually(rejoined, WAIT, 0.1, "the killed master back as a replica")


async def test_the_standby_stopped_and_restarted_under_posts_and_reads(scaled: Scaled) -> None:
    """`pg_ctl stop -m fast` on the standby (its sessions cut mid-read) under load through
    both API processes; each process's replica router sends those reads to the primary once
    a read fails or its next check (1 s) finds the standby gone, and back once a check finds
    it streaming again."""
    api1, api2 = scaled.apis
    pair = scaled.database
    async with api1.http() as h1, api2.http() as h2:
        author, _ = await make_user(h1, "author")
        fans = [await active_follower((h1, h2)[i % 2], scaled, f"fan{i}") for i in range(3)]
        for token, _ in fans:
            await follow(h2, token, "author")

        async def served(*where: str) -> dict[str, float]:
            """Replica-bound reads per use, summed over `where` (every process's)."""
            reads = await replica_reads(api2)
            return {use: sum(reads.get((use, w), 0.0) for w in where) for use in REPLICA_USES}

        async def grew(since: dict[str, float], *where: str) -> bool:
            now = await served(*where)
            return all(now[use] > since[use] for use in REPLICA_USES)

        load = Load()
        tasks = [
            asyncio.create_task(write_loop(load, [h1, h2], author)),
            asyncio.create_task(read_loop(load, [h1, h2], [t for t, _ in fans])),
        ]
        try:
            start = await served("replica")
            await eventually(lambda: grew(start, "replica"), WAIT, 0.1, "reads on the standby")
            fallback = await served("down", "error")
            acked_before_stop = len(load.acked)
            stopped_at = time.monotonic()
            await asyncio.to_thread(pair.stop, "standby", "fast")
            assert not await pair_reachable(scaled)
            await eventually(
                lambda: grew(fallback, "down", "error"), WAIT, 0.1, "reads moved to the primary"
            )
            await eventually(
                lambda: len(load.acked) >= acked_before_stop + 5, WAIT, 0.05, "posts meanwhile"
            )
            await asyncio.sleep(max(0.0, STANDBY_DOWN_SECONDS - (time.monotonic() - stopped_at)))
            down_for = time.monotonic() - stopped_at
            during = {
                use: round(after - fallback[use])
                for use, after in (await served("down", "error")).items()
            }
            await asyncio.to_thread(pair.start, "standby")
            restarted_at = time.monotonic()
            back = await served("replica")
            await eventually(lambda: grew(back, "replica"), WAIT, 0.1, "reads on the standby again")
            back_after = time.monotonic() - restarted_at
        finally:
            load.stop.set()
            await asyncio.gather(*tasks)

        acked = [pid for pid, _ in load.acked]
        report = (
            f"standby down {down_for:.2f} s: {during} reads answered by the primary; used again "
            f"{back_after:.2f} s after its restart; acked {len(acked)}; refused "
            f"{dict(load.codes)}; statuses {dict(load.statuses)}; reads {load.reads} "
            f"({load.degraded_reads} degraded)"
        )
        print(report)
        # The replica's trouble costs the clients nothing: no error, not even a degraded read.
        assert set(load.statuses) == {200}, report
        assert not load.codes, report
        assert load.degraded_reads == 0, report

        async def converged() -> bool:
            for i, (token, _) in enumerate(fans):
                feed = await scroll([(h1, h2)[i % 2]], token, "CHRONOLOGICAL", 100)
                if not set(acked) <= set(feed):
                    return False
            return True

        await eventually(converged, WAIT, 0.5, f"every acknowledged post in every feed; {report}")
    assert not scaled.dead(), scaled.logs()


async def pair_reachable(scaled: Scaled) -> bool:
    """Whether the standby answers (False once stopped)."""
    try:
        await scaled.database.standby_sql("SELECT 1")
    except (OSError, asyncpg.PostgresError):
        return False
    return True
