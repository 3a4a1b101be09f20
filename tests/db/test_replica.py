"""DATABASE_REPLICA_URL against a real streaming standby (devtools/replica.py), through
GraphQL: feed pages filtered and hydrated on the replica, the author's own writes and every
authorization decision on fresh data while the replica lags (replay paused: the watermarks
send those pages to the primary), fan-out's follower paging on the replica only once it has
the post, and the replica stopped and restarted under reads (the primary answers meanwhile,
no errors). Decisions 0043 and 0086 (tests/db/test_replica_watermarks.py: every narrowing,
two replicas)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from app.config import Settings
from app.fanout import lanes
from app.state import AppState, create_state
from app.web import create_app
from devtools.replica import ReplicaPair, replica_pair
from tests.conftest import TABLES
from tests.db.test_replica_watermarks import routers_past_now
from tests.helpers import (
    author_with_fans,
    block,
    eventually,
    gql,
    make_user,
    post,
    run_module,
)

DB = "replicated"


# "feed": every feed read routed to the replicas (pages' rows, RANKED first pages' filter).
USES = {"feed": ("feed_page", "feed_rank")}


def reads(use: str, served: str) -> float:
    """feed_db_replica_reads_total of `use` and `served`, over every replica label."""
    uses = USES.get(use, (use,))
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "feed_db_replica_reads":
            for s in metric.samples:
                if s.name.endswith("_total") and s.labels["use"] in uses:
                    total += s.value if s.labels["served"] == served else 0.0
    return total


@pytest.fixture(scope="module")
async def replicated() -> AsyncIterator[tuple[AppState, httpx.AsyncClient, ReplicaPair]]:
    """The app on a fresh primary (migrated) with its standby as DATABASE_REPLICA_URL."""
    async with replica_pair() as pair:
        await pair.create_database(DB)
        code, _, err = await run_module(
            "alembic", "upgrade", "head", env={"DATABASE_URL": pair.url("primary", DB)}
        )
        assert code == 0, err
        settings = Settings(
            database_url=pair.url("primary", DB),
            database_replica_url=pair.url("standby", DB),
            database_replica_max_lag_seconds=0.5,
            database_replica_check_seconds=0.05,
        )
        state = create_state(settings, pool_size=4)
        app = create_app(state)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            try:
                yield state, client, pair
            finally:
                await state.close()


@pytest.fixture
async def rep(
    replicated: tuple[AppState, httpx.AsyncClient, ReplicaPair],
) -> AsyncIterator[tuple[AppState, httpx.AsyncClient, ReplicaPair]]:
    """Empty tables on the primary, the replica caught up and replaying, default lag bound."""
    state, _, pair = replicated
    conn = await asyncpg.connect(pair.url("primary", DB))
    try:
        await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    finally:
        await conn.close()
    state.forget_local()
    assert state.replica is not None
    state.replica.max_lag = 0.5
    assert state.watermarks is not None
    await state.watermarks.clear()
    await eventually(pair.caught_up, what="standby caught up")
    yield replicated
    await pair.resume_replay()


async def routed(state: AppState, where: str) -> bool:
    """Whether the replica router, checking now if due, sends reads `where`."""
    assert state.replica is not None
    return await state.replica.route() == where


async def fan_out(state: AppState, post_id: int) -> None:
    """The post's split and batches run inline (the write path's own service calls)."""

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        if function == lanes.FANOUT_BATCH:
            await state.fanout.deliver(*args)
        elif function == lanes.FANOUT_PAGES:
            await state.fanout.enqueue_pages(*args, enqueue)

    await state.fanout.split_post(post_id, enqueue)


async def scroll(client: httpx.AsyncClient, token: str, first: int = 5) -> list[dict[str, Any]]:
    """Every post of a RANKED home feed, page by page (session pages after the first)."""
    shown: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(50):
        variables = {"first": first, "after": after}
        feed = (await gql(client, "Feed", variables, token=token)).ok()["feed"]
        shown += [edge["node"] for edge in feed["edges"]]
        if not feed["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["pageInfo"]["endCursor"]
    raise AssertionError("the feed did not end")


async def test_feed_pages_are_hydrated_from_the_replica(rep: Any) -> None:
    state, client, pair = rep
    author, _, fans = await author_with_fans(client, 2)
    made = [await post(client, author, f"post {i}") for i in range(12)]
    await eventually(pair.caught_up)
    # The router's own view too: its lag check may still hold a reading taken while the
    # posts were replaying (or while other WAL, autovacuum's, was), i.e. LAG for a moment;
    # and a write of the fan-outs' own, still in flight at a check, reads as the time since
    # the last replayed commit (seconds, in a test): the bound is lifted while they run.
    assert state.replica is not None
    state.replica.max_lag = 3600
    await eventually(lambda: routed(state, "replica"), what="the router sends reads there")
    for post_id in made:
        await fan_out(state, post_id)
    await routers_past_now(state, pair, DB)  # the fans' follow marks are behind its LSN
    served = reads("feed", "replica")
    shown = await scroll(client, fans[0][0])
    assert sorted(int(p["id"]) for p in shown) == sorted(made)
    assert {p["body"] for p in shown} == {f"post {i}" for i in range(12)}
    assert all(p["author"]["handle"] == "author" for p in shown)
    assert reads("feed", "replica") >= served + 3  # 12 posts, 5 a page
    assert reads("fanout_followers", "replica") >= 1


async def test_own_writes_at_once_and_followers_after_catch_up(rep: Any) -> None:
    state, client, pair = rep
    author, _, fans = await author_with_fans(client, 1)
    fan = fans[0][0]
    first = await post(client, author, "before the pause")
    await eventually(pair.caught_up)
    await fan_out(state, first)
    await pair.pause_replay()
    # The replica stays "usable" though behind: pages still try it, and the marks refuse it.
    state.replica.max_lag = 3600
    fresh = await post(client, author, "written while the replica lags")
    edited = await gql(client, "EditPost", {"id": str(first), "body": "edited"}, token=author)
    edited.ok()
    assert await pair.standby_sql(f"SELECT count(*) FROM posts WHERE id = {fresh}", DB) == 0
    own = {int(p["id"]): p["body"] for p in await scroll(client, author)}
    assert own == {fresh: "written while the replica lags", first: "edited"}
    # Fan-out does not page followers on a replica that lacks the post.
    fanout_behind = reads("fanout_followers", "behind")
    await fan_out(state, fresh)
    assert reads("fanout_followers", "behind") == fanout_behind + 1
    feed_behind = reads("feed", "behind")
    seen = {int(p["id"]): p["body"] for p in await scroll(client, fan)}
    assert seen[first] == "edited"  # the author's mark (the edit) sent the page to the primary
    assert reads("feed", "behind") > feed_behind
    # Lag past the bound: the primary serves those reads, counted as such.
    state.replica.max_lag = 0.5
    lagging = reads("feed", "lag")
    await eventually(partial(routed, state, "lag"))
    await scroll(client, fan)
    assert reads("feed", "lag") > lagging
    await pair.resume_replay()
    await eventually(pair.caught_up)
    await routers_past_now(state, pair, DB)
    on_replica = reads("feed", "replica")
    seen = {int(p["id"]): p["body"] for p in await scroll(client, fan)}
    assert seen == {fresh: "written while the replica lags", first: "edited"}
    assert reads("feed", "replica") > on_replica


async def test_a_block_applies_at_once_while_the_replica_lags(rep: Any) -> None:
    state, client, pair = rep
    author, _, fans = await author_with_fans(client, 1)
    other, _ = await make_user(client, "other")
    viewer = fans[0][0]
    await gql(client, "Follow", {"handle": "other"}, token=viewer)
    made = []
    for i in range(6):
        made += [await post(client, author, f"a{i}"), await post(client, other, f"o{i}")]
    # Into the viewer's timeline (no worker runs here): else only the queue-lag source, by
    # the process's cached lag flag, brought them to the first page, and not always.
    for post_id in made:
        await fan_out(state, post_id)
    await eventually(pair.caught_up)
    page = (await gql(client, "Feed", {"first": 3}, token=viewer)).ok()["feed"]
    assert len(page["edges"]) == 3 and page["pageInfo"]["hasNextPage"], page
    await pair.pause_replay()
    state.replica.max_lag = 3600  # the lagging replica is still in use
    await block(client, viewer, "author")
    assert await pair.standby_sql("SELECT count(*) FROM blocks", DB) == 0  # the lag is real
    behind = reads("feed", "behind")
    after: str | None = page["pageInfo"]["endCursor"]
    rest: list[dict[str, Any]] = []
    while after is not None:
        feed = (await gql(client, "Feed", {"first": 3, "after": after}, token=viewer)).ok()
        rest += [e["node"] for e in feed["feed"]["edges"]]
        info = feed["feed"]["pageInfo"]
        after = info["endCursor"] if info["hasNextPage"] else None
    assert rest, "the other author's posts still come"
    assert {p["author"]["handle"] for p in rest} == {"other"}
    assert reads("feed", "behind") > behind  # the viewer's mark: the primary answered


async def test_a_post_the_replica_has_not_replayed_is_read_on_the_primary(rep: Any) -> None:
    """A timeline may name a post a replica within its lag bound lacks (fan-out delivered it
    from the primary): no mark concerns it, yet the page holds it, asked of the primary; the
    next page, of a post the replica has, is the replica's again."""
    state, client, pair = rep
    author, _, fans = await author_with_fans(client, 1)
    fan = fans[0][0]
    older = await post(client, author, "replayed")
    await fan_out(state, older)
    await eventually(pair.caught_up)
    await routers_past_now(state, pair, DB)
    await pair.pause_replay()
    assert state.replica is not None
    state.replica.max_lag = 3600  # the paused replica is still in use
    newer = await post(client, author, "not replayed")
    await fan_out(state, newer)
    assert await pair.standby_sql(f"SELECT count(*) FROM posts WHERE id = {newer}", DB) == 0
    behind, on_replica = reads("feed", "behind"), reads("feed", "replica")
    page = (await gql(client, "Feed", {"first": 1}, token=fan)).ok()["feed"]
    assert [e["node"]["body"] for e in page["edges"]] == ["not replayed"]
    assert reads("feed", "behind") > behind
    after = page["pageInfo"]["endCursor"]
    page = (await gql(client, "Feed", {"first": 1, "after": after}, token=fan)).ok()["feed"]
    assert [e["node"]["body"] for e in page["edges"]] == ["replayed"]
    assert reads("feed", "replica") > on_replica


async def test_replica_stopped_and_restarted_under_reads(rep: Any) -> None:
    _, client, pair = rep
    author, _, fans = await author_with_fans(client, 1)
    for i in range(10):
        await post(client, author, f"p{i}")
    await eventually(pair.caught_up)
    fan = fans[0][0]
    errors: list[Any] = []
    stop = asyncio.Event()

    async def reader() -> int:
        n = 0
        while not stop.is_set():
            for _ in range(3):
                result = await gql(client, "Feed", {"first": 4}, token=fan)
                errors.extend(result.errors)
                if result.status != 200:
                    errors.append(result.status)
            n += 1
            await scroll(client, fan, first=4)
        return n

    task = asyncio.ensure_future(reader())
    try:
        down = reads("feed", "down") + reads("feed", "error")
        await asyncio.to_thread(pair.stop, "standby", "fast")
        await eventually(
            lambda: reads("feed", "down") + reads("feed", "error") > down + 3,
            what="reads answered by the primary while the replica is down",
        )
        await asyncio.to_thread(pair.start, "standby")
        back = reads("feed", "replica")
        await eventually(
            lambda: reads("feed", "replica") > back + 3,
            within=30,
            what="reads on the replica again",
        )
    finally:
        stop.set()
        rounds = await task
    assert rounds > 0
    assert errors == []
    lag = REGISTRY.get_sample_value("feed_db_replica_lag_seconds")
    assert lag is not None and lag >= 0  # measured again after the restart
