"""Feed pages filtered on replicas behind narrowing watermarks (decision 0086), through GraphQL,
against a real primary and two streaming standbys (devtools.replica): with replay paused on
both (and the routers told the lag is fine, the worst case), a block, an unfollow, a hide, a
mute, a delete and a visibility narrowing committed on the primary never show on a page;
the concerned viewers' pages go to the primary while an unconcerned viewer's page is still
answered by a replica (counted in feed_db_replica_reads_total). Marks lost: the primary
answers until the warm-up passes. Two replicas share the reads; a lagging one is skipped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from prometheus_client import REGISTRY

from app.config import Settings
from app.db.watermarks import EPOCH_KEY, WARM_KEY
from app.fanout import lanes
from app.state import AppState, create_state
from app.web import create_app
from devtools.replica import ReplicaPair, replica_pair
from tests.conftest import TABLES
from tests.helpers import block, eventually, follow, gql, make_user, post, run_module, unfollow

DB = "watermarked"
TTL = 2.0  # the marks' TTL here: the warm-up after a loss lasts this long


def served(how: str, replica: str | None = None) -> float:
    """feed_db_replica_reads_total of the feed's uses (pages and RANKED filters), by where."""
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name != "feed_db_replica_reads":
            continue
        for s in metric.samples:
            if (
                s.name.endswith("_total")
                and s.labels["use"] in ("feed_page", "feed_rank")
                and s.labels["served"] == how
                and (replica is None or s.labels["replica"] == replica)
            ):
                total += s.value
    return total


@pytest.fixture(scope="module")
async def replicated() -> AsyncIterator[tuple[AppState, httpx.AsyncClient, ReplicaPair]]:
    """The app on a fresh primary (migrated) with both standbys as DATABASE_REPLICA_URLS."""
    async with replica_pair(standbys=2) as pair:
        await pair.create_database(DB)
        code, _, err = await run_module(
            "alembic", "upgrade", "head", env={"DATABASE_URL": pair.url("primary", DB)}
        )
        assert code == 0, err
        settings = Settings(
            database_url=pair.url("primary", DB),
            database_replica_urls=",".join(pair.url(s, DB) for s in pair.standbys),
            database_replica_max_lag_seconds=0.5,
            database_replica_check_seconds=0.05,
            database_replica_watermark_ttl_seconds=TTL,
        )
        assert settings.database_replica_feed_pages  # on by default with replicas
        state = create_state(settings, pool_size=4)
        app = create_app(state)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            try:
                yield state, client, pair
            finally:
                await state.close()


def lag_bound(state: AppState, seconds: float) -> None:
    assert state.replicas is not None
    for router in state.replicas.routers:
        router.max_lag = seconds


async def all_on_replicas(state: AppState) -> bool:
    """Every router checked (if due) and sending reads to its replica, its LSN known."""
    assert state.replicas is not None
    for router in state.replicas.routers:
        if await router.route() != "replica" or router.known_lsn()[0] is None:
            return False
    return True


async def routers_past_now(state: AppState, pair: ReplicaPair, db: str = DB) -> None:
    """Wait until every router's own LSN (what it compares marks with) has passed the
    primary's WAL position now: every mark recorded so far is then behind it."""
    conn = await asyncpg.connect(pair.url("primary", db))
    try:
        now = await conn.fetchval("SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint")
    finally:
        await conn.close()
    assert state.replicas is not None

    async def past() -> bool:
        for router in state.replicas.routers:  # type: ignore[union-attr]
            await router.route()
            lsn = router.known_lsn()[0]
            if router.state != "replica" or lsn is None or lsn < now:
                return False
        return True

    await eventually(past, what="every router past the primary's position")


@pytest.fixture
async def rep(
    replicated: tuple[AppState, httpx.AsyncClient, ReplicaPair],
) -> AsyncIterator[tuple[AppState, httpx.AsyncClient, ReplicaPair]]:
    """Empty tables, no marks, both standbys caught up and replaying, the 0.5 s bound."""
    state, _, pair = replicated
    conn = await asyncpg.connect(pair.url("primary", DB))
    try:
        await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
    finally:
        await conn.close()
    state.forget_local()
    assert state.watermarks is not None
    await state.watermarks.clear()
    lag_bound(state, 0.5)
    await eventually(pair.caught_up, what="standbys caught up")
    await eventually(lambda: all_on_replicas(state), what="routers on the replicas")
    yield replicated
    for which in pair.standbys:
        await pair.resume_replay(which)


async def fan_out(state: AppState, post_id: int) -> None:
    """The post's split and batches inline: its followers' timelines hold it, so a page's
    candidates include it whatever the graph says now (only the filter decides)."""

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        if function == lanes.FANOUT_BATCH:
            await state.fanout.deliver(*args)
        elif function == lanes.FANOUT_PAGES:
            await state.fanout.enqueue_pages(*args, enqueue)

    await state.fanout.split_post(post_id, enqueue)


async def scroll(client: httpx.AsyncClient, token: str, first: int = 4) -> list[dict[str, Any]]:
    """A fresh RANKED home feed, every page of it."""
    shown: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(30):
        feed = (await gql(client, "Feed", {"first": first, "after": after}, token=token)).ok()
        shown += [e["node"] for e in feed["feed"]["edges"]]
        if not feed["feed"]["pageInfo"]["hasNextPage"]:
            return shown
        after = feed["feed"]["pageInfo"]["endCursor"]
    raise AssertionError("the feed did not end")


async def test_no_narrowing_shows_while_replay_is_paused(rep: Any) -> None:
    state, client, pair = rep
    users = {}
    for handle in (
        "viewer",
        "watcher",
        "bystander",
        "ann",
        "bob",
        "cat",
        "dan",
        "eve",
        "fay",
        "gus",
    ):
        users[handle] = (await make_user(client, handle))[0]
    viewer, watcher, bystander = users["viewer"], users["watcher"], users["bystander"]
    for handle in ("ann", "bob", "eve", "fay"):  # the viewer's own narrowings
        await follow(client, viewer, handle)
    for handle in ("cat", "dan"):  # the authors' narrowings, seen by the watcher
        await follow(client, watcher, handle)
    await follow(client, bystander, "gus")  # concerned by none of it
    made: dict[str, list[int]] = {}
    for handle in ("ann", "bob", "cat", "dan", "eve", "fay", "gus"):
        made[handle] = [await post(client, users[handle], f"{handle}{i}") for i in range(3)]
    await eventually(pair.caught_up)
    for post_id in [p for ids in made.values() for p in ids]:
        await fan_out(state, post_id)
    # Follows an hour old: candidates come from the timelines, not the recent-follow pull.
    conn = await asyncpg.connect(pair.url("primary", DB))
    try:
        await conn.execute("UPDATE follows SET created_at = created_at - interval '1 hour'")
    finally:
        await conn.close()
    await eventually(pair.caught_up)
    await routers_past_now(state, pair)

    def authors(shown: list[dict[str, Any]]) -> set[str]:
        return {p["author"]["handle"] for p in shown}

    assert authors(await scroll(client, viewer)) == {"ann", "bob", "eve", "fay"}
    on_replica = served("replica")
    assert on_replica > 0  # caught up: the replicas answered those pages
    for which in pair.standbys:
        await pair.pause_replay(which)
    lag_bound(state, 3600)  # the worst case: the routers keep using the paused replicas

    async def narrowed(token: str, hidden: set[str], gone: set[int]) -> None:
        """The token's feed shows none of `hidden`'s posts nor `gone`, answered by the
        primary; the bystander's is still answered by a replica."""
        behind = served("behind")
        shown = await scroll(client, token)
        assert not authors(shown) & hidden
        assert not {int(p["id"]) for p in shown} & gone
        assert served("behind") > behind
        replica = served("replica")
        assert authors(await scroll(client, bystander)) == {"gus"}
        assert served("replica") > replica

    await block(client, viewer, "ann")
    assert await pair.standby_sql("SELECT count(*) FROM blocks", DB) == 0  # the lag is real
    await narrowed(viewer, {"ann"}, set())
    await narrowed(users["ann"], {"viewer"}, set())  # both ways: a's own view narrowed too
    await unfollow(client, viewer, "bob")
    await narrowed(viewer, {"ann", "bob"}, set())
    hidden = made["eve"][0]
    assert (await gql(client, "HidePost", {"id": str(hidden)}, token=viewer)).ok()
    await narrowed(viewer, {"ann", "bob"}, {hidden})
    assert (await gql(client, "MuteAuthor", {"handle": "fay"}, token=viewer)).ok()
    await narrowed(viewer, {"ann", "bob", "fay"}, {hidden})
    # The authors' narrowings: a delete and PUBLIC -> PRIVATE, for every viewer.
    assert {int(p["id"]) for p in await scroll(client, watcher)} == set(made["cat"] + made["dan"])
    deleted, private = made["cat"][1], made["dan"][2]
    assert (await gql(client, "DeletePost", {"id": str(deleted)}, token=users["cat"])).ok()
    variables = {"id": str(private), "visibility": "PRIVATE"}
    assert (await gql(client, "SetPostVisibility", variables, token=users["dan"])).ok()
    alive = await pair.standby_sql(
        f"SELECT count(*) FROM posts WHERE id = {deleted} AND deleted_at IS NULL", DB
    )
    assert alive == 1  # the replicas still have it
    await narrowed(watcher, set(), {deleted, private})
    # Read-your-writes the same way: the viewer's new post and an edit, at once.
    fresh = await post(client, viewer, "written while the replicas lag")
    shown = {int(p["id"]): p["body"] for p in await scroll(client, viewer)}
    assert shown[fresh] == "written while the replicas lag"
    first = made["gus"][0]
    edit = {"id": str(first), "body": "edited"}
    assert (await gql(client, "EditPost", edit, token=users["gus"])).ok()
    behind = served("behind")
    shown = {int(p["id"]): p["body"] for p in await scroll(client, bystander)}
    assert shown[first] == "edited"  # the author's mark sent the page to the primary
    assert served("behind") > behind
    # Replay resumed: every page on the replicas again, and still nothing narrowed.
    for which in pair.standbys:
        await pair.resume_replay(which)
    lag_bound(state, 0.5)
    await eventually(pair.caught_up)
    await routers_past_now(state, pair)
    on_replica = served("replica")
    assert authors(await scroll(client, viewer)) == {"eve", "viewer"}
    assert served("replica") > on_replica


async def test_marks_lost_send_pages_to_the_primary(rep: Any) -> None:
    state, client, pair = rep
    author, _ = await make_user(client, "author")
    reader, _ = await make_user(client, "reader")
    await follow(client, reader, "author")
    for i in range(4):
        await post(client, author, f"p{i}")
    await eventually(pair.caught_up)
    await routers_past_now(state, pair)
    on_replica = served("replica")
    await scroll(client, reader)
    assert served("replica") > on_replica
    # The sessions role flushed (its marks with it): unknown until a mark TTL has passed.
    await state.roles.sessions.flushdb()
    unknown = served("marks_unknown")
    assert len(await scroll(client, reader)) == 4
    assert served("marks_unknown") > unknown
    assert await state.roles.sessions.exists(EPOCH_KEY, WARM_KEY) == 2  # armed, warming up
    on_replica = served("replica")
    await asyncio.sleep(TTL + 0.2)
    await routers_past_now(state, pair)
    await scroll(client, reader)
    assert served("replica") > on_replica


async def test_two_replicas_share_the_reads(rep: Any) -> None:
    state, client, pair = rep
    author, _ = await make_user(client, "author")
    readers = [(await make_user(client, f"reader{i}"))[0] for i in range(4)]
    for token in readers:
        await follow(client, token, "author")
    for i in range(8):
        await post(client, author, f"p{i}")
    await eventually(pair.caught_up)
    await routers_past_now(state, pair)
    before = {name: served("replica", name) for name in ("0", "1")}
    # Ties go at random: enough reads (about 60) that an even share cannot look uneven (a
    # third of them, at 11 reads, fell to 2 of 11 about once in 15 runs).
    await asyncio.gather(*(scroll(client, token) for token in readers * 8))
    shares = {name: served("replica", name) - before[name] for name in ("0", "1")}
    assert shares["0"] > 0 and shares["1"] > 0, shares
    assert min(shares.values()) / max(shares.values()) > 0.25, shares
    # One paused past the bound: the other takes every read.
    await pair.pause_replay("standby2")
    await post(client, author, "the second standby has not replayed this")
    assert state.replicas is not None
    second = state.replicas.routers[1]

    async def lagging() -> bool:
        return await second.route() == "lag"

    await eventually(lagging, what="the paused one lagging")
    before = {name: served("replica", name) for name in ("0", "1")}
    await asyncio.gather(*(scroll(client, token) for token in readers))
    assert served("replica", "1") == before["1"]
    assert served("replica", "0") > before["0"]
