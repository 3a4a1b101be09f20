"""A cluster master killed (SIGKILL) while posts, feed reads and a subscription go on, on the
scale-out topology (tests/cluster/conftest.py); its replica is promoted by the cluster.

What must hold: no request fails with a 500 (a typed GraphQL error at most); writes go on
once the cluster has reconfigured; every createPost that answered OK reaches every
follower's feed (timelines may be rebuilt from PostgreSQL); live updates resume on the
socket opened before the kill; every process of the topology is still running; the killed
node, started again, rejoins as a replica.

Collected after test_e2e.py (the cluster keeps its promoted replica afterwards).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from app.posts.ids import created_ms
from app.timelines.store import timeline_key
from tests.cluster.scaled import WAIT, Scaled, active_follower, scroll
from tests.helpers import eventually, follow, gql, make_user, post
from tests.realtime.live import LiveClient, shown

TAKEOVER_AFTER_SECONDS = 8.0  # automatic failover takes ~2 s at a 1 s node timeout
# What a client may be told while the cluster reconfigures (retry later), never INTERNAL.
TRANSIENT = {"UNAVAILABLE", "OVERLOADED", "RATE_LIMITED"}


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
        # The victim: the cluster URL's seed node, where every hub starts listening
        # (app/realtime/hub.py), and the master of fan0's timeline, live count and sessions;
        # three more fans wherever their slots fall.
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
                        "(the hubs' pub/sub node was the one killed)"
                    ) from None
                return shown(frame)[1] == created_ms(fresh)

            await eventually(announced, WAIT, 0, "the fresh post announced on the old socket")
        finally:
            await live.close()

        assert not scaled.dead(), scaled.logs()
        await cluster.restart(victim)

        async def rejoined() -> bool:
            return await victim.role() == "slave" and await victim.cluster_ok()

        await eventually(rejoined, WAIT, 0.1, "the killed master back as a replica")
