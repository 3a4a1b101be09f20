"""Fault injection on the write and read paths (issue 11), each against the real servers:
duplicate and out-of-order events, a PULL author posting through a mode switch, concurrent
follows/unfollows/posts, a post widened from PRIVATE, Redis emptied, Redis unreachable for a
while (its own redis-server, stopped and started), PostgreSQL restarted under load (its own
postmaster: the shared one is never touched). Each asserts no unauthorized content, that the
feeds converge, that the degradation is visible, and that recovery writes nothing twice.

conftest shrinks capacities: pull at 10 followers, push below 8, batches of 4, big lane at 6.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections import Counter
from typing import Any

import asyncpg
import httpx
import redis.exceptions

from app.config import PROJECT_ROOT
from app.fanout import lanes
from app.operation_documents import operations
from app.posts.ids import created_ms
from tests.helpers import (
    Result,
    author_with_fans,
    eventually,
    fanout_mode,
    feed_ids,
    follow,
    full_scroll,
    gql,
    ids,
    make_user,
    metric_value,
    post,
    quick_users,
    sql,
    timeline_ids,
)
from tests.reliability.private_postgres import private_postgres
from tests.servers import ApiServer, free_port, redis_answers, redis_server, stop_process


async def metric(client: httpx.AsyncClient, sample: str) -> float:
    return metric_value((await client.get("/metrics")).text, sample, default=0.0)


async def age_follows(state: Any) -> None:
    """Follows and mode switches an hour old: past the read path's recent-follow pull, so
    only the timelines (or a PULL author's index) can supply a followee's posts. The
    process's caches of authors' modes would have expired within that hour too."""
    await sql("UPDATE follows SET created_at = created_at - interval '1 hour'")
    await sql(
        "UPDATE users SET fanout_mode_changed_at = fanout_mode_changed_at - interval '1 hour'"
    )
    state.forget_local()


async def assert_exact_feed(client: httpx.AsyncClient, token: str, expected: list[int]) -> None:
    """Both modes: exactly `expected`, once each (CHRONOLOGICAL newest first)."""
    chrono = await full_scroll(client, token, mode="CHRONOLOGICAL")
    assert chrono == sorted(expected, reverse=True)
    ranked = await full_scroll(client, token, mode="RANKED")
    assert len(ranked) == len(set(ranked)), "a post shown twice"
    assert set(ranked) == set(expected)


# -- the completeness gap: a post widened from PRIVATE -----------------------------------------


async def test_a_post_widened_from_private_reaches_existing_followers(
    client, state, pipeline
) -> None:
    author, _, fans = await author_with_fans(client, 3)
    stranger, _ = await make_user(client, "stranger")
    await pipeline.settle()
    for token, _ in fans:
        await feed_ids(client, token)  # timelines exist (fan-out skips missing ones)
    widened = await post(client, author, "was private", visibility="PRIVATE")
    await pipeline.settle()  # its fan-out ran while PRIVATE: no follower got it
    early = await post(client, author, "changed before its fan-out", visibility="PRIVATE")
    narrowed = await post(client, author, "public, then private")
    (
        await gql(
            client, "SetPostVisibility", {"id": str(early), "visibility": "FOLLOWERS"}, token=author
        )
    ).ok()
    (
        await gql(
            client, "SetPostVisibility", {"id": str(widened), "visibility": "PUBLIC"}, token=author
        )
    ).ok()
    await pipeline.settle()
    (
        await gql(
            client,
            "SetPostVisibility",
            {"id": str(narrowed), "visibility": "PRIVATE"},
            token=author,
        )
    ).ok()
    inserts = await metric(client, "feed_timeline_inserts_total")
    await pipeline.settle()
    assert await metric(client, "feed_timeline_inserts_total") == inserts  # narrowing: none
    await age_follows(state)
    for token, uid in fans:
        assert {widened, early} <= set(await timeline_ids(state, uid))
        await assert_exact_feed(client, token, [widened, early])
    assert not {widened, early, narrowed} & set(await feed_ids(client, stranger))

    # Widening again and replaying every event writes nothing more.
    await sql("UPDATE outbox SET published_at = NULL")
    await pipeline.settle()
    assert await metric(client, "feed_timeline_inserts_total") == inserts
    for token, _ in fans:
        await assert_exact_feed(client, token, [widened, early])


# -- duplicate and out-of-order events ----------------------------------------------------------


async def test_duplicate_and_out_of_order_events_keep_each_post_once_in_order(
    client, state, pipeline
) -> None:
    author, author_id, fans = await author_with_fans(client, 7)  # big lane, still PUSH
    await pipeline.settle()
    for token, _ in fans:
        await feed_ids(client, token)
    made = [await post(client, author, f"p{i}") for i in range(4)]
    inserts = await metric(client, "feed_timeline_inserts_total")
    await pipeline.relay.drain()
    await pipeline.run_lane(lanes.DEFAULT)  # the splits ran; their batches wait on the big lane
    assert await state.redis.zcard(lanes.BIG) > 0
    # Newest first, each twice, under fresh job ids (a relay that lost its marks, a retry):
    # they run before the original batches.
    users = [uid for _, uid in reversed(fans)]
    for copy in range(2):
        for post_id in reversed(made):
            entries = [[post_id, created_ms(post_id)]]
            await pipeline.enqueue(
                lanes.FANOUT_BATCH,
                author_id,
                entries,
                users,
                job_id=f"dup{copy}:{post_id}",
                lane=lanes.DEFAULT,
            )
        await pipeline.run_lane(lanes.DEFAULT)
    # Every event relayed again, and the splits re-run under new ids.
    await sql("UPDATE outbox SET published_at = NULL")
    for post_id in made:
        await pipeline.enqueue(
            lanes.FANOUT_POST, post_id, job_id=f"again:{post_id}", lane=lanes.DEFAULT
        )
    await pipeline.settle()
    assert await metric(client, "feed_timeline_inserts_total") - inserts == len(made) * len(fans)
    await age_follows(state)
    for token, uid in fans:
        assert await timeline_ids(state, uid) == list(reversed(made))
        await assert_exact_feed(client, token, made)


# -- PULL authors and a push->pull switch mid fan-out -------------------------------------------


async def test_pull_author_posting_and_a_switch_mid_fan_out_show_every_post_once(
    client, state, pipeline
) -> None:
    author, _, fans = await author_with_fans(client, 12, following=9)
    await pipeline.settle()
    for token, _ in fans:
        await feed_ids(client, token)
    first = await post(client, author, "split in PUSH")
    await pipeline.relay.drain()
    await pipeline.run_lane(lanes.DEFAULT)  # split: batches queued for 9 followers
    assert await state.redis.zcard(lanes.BIG) > 0
    for token, _ in fans[9:]:  # 12 followers now: the next split switches to PULL
        await follow(client, token, "author")
    pulled = [await post(client, author, f"pull {i}") for i in range(5)]
    inserts = await metric(client, "feed_timeline_inserts_total")
    await pipeline.settle()  # the first post's batches run after the switch
    assert await fanout_mode(client, "author") == "PULL"
    # PULL posts are written once (the author's index), not per follower: only the old
    # batches (9 followers) and the 3 new follows' backfills wrote timelines.
    assert await metric(client, "feed_timeline_inserts_total") - inserts <= 9 + 3
    await age_follows(state)
    for token, _ in fans:
        await assert_exact_feed(client, token, [first, *pulled])
    more = [await post(client, author, f"pull again {i}") for i in range(3)]
    await pipeline.settle()
    expected = sorted([first, *pulled, *more], reverse=True)

    async def caught_up() -> bool:  # the process caches an author's index for 2 s
        return await full_scroll(client, fans[0][0], mode="CHRONOLOGICAL") == expected

    await eventually(caught_up, within=5, interval=0.2, what="new PULL posts shown")
    for token, _ in fans:
        await assert_exact_feed(client, token, expected)


# -- concurrent follow/unfollow/post ------------------------------------------------------------


async def test_concurrent_follows_unfollows_and_posts_converge_to_the_final_graph(
    client, state, pipeline
) -> None:
    authors = await quick_users(state, [f"author{i}" for i in range(4)])
    viewers = await quick_users(state, [f"viewer{i}" for i in range(4)])
    await pipeline.settle()
    for token, _ in viewers:
        await feed_ids(client, token)

    async def admitted(op: str, variables: dict[str, Any], token: str) -> Result:
        """~44 requests at once against 16 slots: on a loaded machine some wait past
        ADMISSION_WAIT_MS and are refused OVERLOADED, "did not run, retry": as a client does."""
        for _ in range(100):
            result = await gql(client, op, variables, token=token)
            if result.codes != ["OVERLOADED"]:
                return result
            await asyncio.sleep(0.05)
        raise AssertionError(f"{op} refused OVERLOADED 100 times")

    async def toggles(viewer: str, handle: str, times: int) -> None:
        for i in range(times):
            op = "Follow" if i % 2 == 0 else "Unfollow"
            result = await admitted(op, {"handle": handle}, viewer)
            assert not result.errors or set(result.codes) <= {"CONFLICT", "BAD_USER_INPUT"}

    async def posts(token: str, handle: str) -> list[int]:
        made = [await admitted("CreatePost", {"body": f"{handle} {i}"}, token) for i in range(4)]
        return [int(result.ok()["createPost"]["id"]) for result in made]

    chains = [
        toggles(v, f"author{a}", 1 + (vi + a) % 4)
        for vi, (v, _) in enumerate(viewers)
        for a in range(len(authors))
    ]
    # The same edge pulled both ways at once, too.
    chains += [admitted(op, {"handle": "author0"}, viewers[0][0]) for op in ("Follow", "Unfollow")]
    made = await asyncio.gather(
        *(posts(t, f"author{i}") for i, (t, _) in enumerate(authors)), *chains
    )
    by_author = {authors[i][1]: made[i] for i in range(len(authors))}
    await pipeline.settle()
    await age_follows(state)
    for token, uid in viewers:
        followees = [
            r[0] for r in await sql("SELECT followee_id FROM follows WHERE follower_id = $1", uid)
        ]
        expected = [p for a in followees for p in by_author[a]]
        await assert_exact_feed(client, token, expected)


# -- Redis restarted empty ----------------------------------------------------------------------


async def test_redis_emptied_feeds_rebuild_and_open_cursors_expire(client, state, pipeline) -> None:
    bob, _, [(alice, alice_id)] = await author_with_fans(client, ["alice"], author="bob")
    carol, _ = await make_user(client, "carol")
    await pipeline.settle()
    made = [await post(client, bob, f"b{i}") for i in range(30)]
    secret = await post(client, bob, "private", visibility="PRIVATE")
    stranger = await post(client, carol, "not followed")
    await pipeline.settle()
    await age_follows(state)
    ranked = (await gql(client, "Feed", {"first": 5}, token=alice)).ok()["feed"]
    chrono = (await gql(client, "Feed", {"first": 5, "mode": "CHRONOLOGICAL"}, token=alice)).ok()
    shown_chrono = [int(e["node"]["id"]) for e in chrono["feed"]["edges"]]

    await state.redis.flushdb()  # what a Redis restarted without its data leaves
    expired_before = await metric(client, "feed_cursor_expired_total")
    missing_before = await metric(client, 'feed_degraded_total{reason="timeline_missing"}')

    variables = {"first": 5, "after": ranked["pageInfo"]["endCursor"]}
    assert (await gql(client, "Feed", variables, token=alice)).codes == ["CURSOR_EXPIRED"]
    assert await metric(client, "feed_cursor_expired_total") == expired_before + 1
    # A CHRONOLOGICAL cursor is a keyset position, not a session: it goes on from Postgres.
    variables = {
        "first": 100,
        "mode": "CHRONOLOGICAL",
        "after": chrono["feed"]["pageInfo"]["endCursor"],
    }
    rest = (await gql(client, "Feed", variables, token=alice)).ok()["feed"]
    assert shown_chrono + [int(e["node"]["id"]) for e in rest["edges"]] == list(reversed(made))

    first = (await gql(client, "Feed", {"first": 100, "mode": "CHRONOLOGICAL"}, token=alice)).ok()
    if first["feed"]["degraded"]:  # the rebuild may already have run for the cursor's page
        assert (
            await metric(client, 'feed_degraded_total{reason="timeline_missing"}') > missing_before
        )
    assert [int(e["node"]["id"]) for e in first["feed"]["edges"]] == list(reversed(made))
    await eventually(lambda: state.timelines.exists(alice_id), what="the timeline rebuilt")
    assert await metric(client, 'feed_degraded_total{reason="timeline_missing"}') > missing_before
    assert await timeline_ids(state, alice_id) == list(reversed(made))
    again = (await gql(client, "Feed", {"first": 100}, token=alice)).ok()["feed"]
    assert again["degraded"] is False
    assert sorted(int(e["node"]["id"]) for e in again["edges"]) == sorted(made)
    for page in (rest, first["feed"], again):
        assert not {secret, stranger} & {int(e["node"]["id"]) for e in page["edges"]}
    # The write path works again on the empty Redis (its queue was lost with it).
    fresh = await post(client, bob, "after the restart")
    await pipeline.settle()
    assert (await timeline_ids(state, alice_id))[0] == fresh
    await assert_exact_feed(client, alice, [*made, fresh])


# -- Redis unreachable for a while (real processes) ---------------------------------------------

OUTAGE_SECONDS = 10.0  # stands for the minute: long enough for every part to notice


def spawn(env: dict[str, str], *argv: str) -> subprocess.Popen[bytes]:
    log = open(tempfile.mkstemp(prefix=f"{argv[-1]}-", suffix=".log")[1], "ab")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


async def feed_of(http: httpx.AsyncClient, token: str) -> dict[str, Any]:
    variables = {"first": 50, "mode": "CHRONOLOGICAL"}
    return (await gql(http, "Feed", variables, token=token)).ok()["feed"]


async def test_redis_unreachable_for_a_while_degrades_then_delivers_once(state, tmp_path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": f"redis://127.0.0.1:{port}/0",
        "REDIS_SOCKET_TIMEOUT_SECONDS": "0.5",
        "REDIS_CONNECT_TIMEOUT_SECONDS": "0.5",
    }
    from app.state import create_state

    side = create_state(state.settings.model_copy(update={"redis_url": env["REDIS_URL"]}))
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with redis_server(port, tmp_path) as server:
            await eventually(lambda: redis_answers(port), within=15, what="redis-server")
            async with ApiServer(env=env) as api, api.http() as http:
                processes += [
                    spawn(env, "jobs.relay"),
                    spawn(env, "arq", "jobs.worker.WorkerSettings"),
                    spawn(env, "arq", "jobs.worker.BigLaneWorkerSettings"),
                ]
                bob, _ = await make_user(http, "bob")
                alice, alice_id = await make_user(http, "alice")
                carol, _ = await make_user(http, "carol")
                await follow(http, alice, "bob")
                await feed_of(http, alice)  # her timeline exists (fan-out skips missing ones)
                await eventually(lambda: side.timelines.exists(alice_id), what="timeline")
                warm = await post(http, bob, "before")
                await post(http, carol, "not followed")

                async def delivered() -> bool:  # relay and workers are up and working
                    return await timeline_ids(side, alice_id) == [warm]

                await eventually(delivered, within=30, interval=0.2, what="warm-up delivered")
                await age_follows(state)

                stop_process(server)  # Redis gone: the API, relay and workers all notice
                loop = asyncio.get_running_loop()
                outage_ends = loop.time() + OUTAGE_SECONDS
                written: list[int] = []
                while loop.time() < outage_ends:
                    written.append(await post(http, bob, f"during {len(written)}"))
                    feed = await feed_of(http, alice)
                    assert feed["degraded"] is True
                    assert ids(feed) == [*reversed(written), warm]  # from PostgreSQL
                    await asyncio.sleep(0.5)
                unpublished = await sql("SELECT count(*) FROM outbox WHERE published_at IS NULL")
                assert unpublished[0][0] >= len(written)  # accepted, waiting in the outbox
                text = (await http.get("/metrics")).text
                assert (
                    metric_value(text, 'feed_degraded_total{reason="redis_down"}', 0.0)
                    + (metric_value(text, 'feed_degraded_total{reason="redis_timeout"}', 0.0))
                    > 0
                )

                with redis_server(port, tmp_path):  # back, with its data (append-only file)
                    await eventually(lambda: redis_answers(port), within=15, what="redis back")
                    # The relay survives; ARQ workers exit when their Redis connection
                    # fails (arq's poll loop): started again here as a supervisor would.
                    assert processes[0].poll() is None, "the relay died while Redis was away"
                    for i, proc in enumerate(processes):
                        if proc.poll() is not None:
                            processes[i] = spawn(env, *proc.args[2:])  # type: ignore[index]

                    async def caught_up() -> bool:
                        try:  # the side client's pooled connections died with the server
                            found = await timeline_ids(side, alice_id)
                        except redis.exceptions.RedisError:
                            return False
                        return Counter(found) == Counter([warm, *written])

                    await eventually(caught_up, within=30, interval=0.2, what="delivered")
                    feed = await feed_of(http, alice)
                    assert not feed["degraded"]
                    assert ids(feed) == [*reversed(written), warm]
                    assert await timeline_ids(side, alice_id) == [*reversed(written), warm]
                    left = await sql("SELECT count(*) FROM outbox WHERE published_at IS NULL")
                    assert left[0][0] == 0
    finally:
        for proc in processes:
            stop_process(proc)
        await side.close()


# -- PostgreSQL restarted under load (a private postmaster) -------------------------------------


async def test_postgres_restarted_under_load_fails_cleanly_and_loses_nothing() -> None:
    with private_postgres() as pg:
        url = pg.url
        env = {
            "DATABASE_URL": url,
            "RATE_LIMIT_READS_PER_MINUTE": "100000",
            "RATE_LIMIT_WRITES_PER_MINUTE": "100000",
        }
        async with ApiServer(env=env) as api, api.http() as http:
            writer, _ = await make_user(http, "writer")
            reader, _ = await make_user(http, "reader")
            await follow(http, reader, "writer")
            # Before the reader's first read: the timeline and author index it rebuilds (no
            # fan-out workers here) hold a post, so the feed read after the restart shows one.
            first = await post(http, writer, "before the loops")
            acknowledged: list[int] = [first]
            failures: Counter[str] = Counter()
            answers: Counter[str] = Counter()
            stop = asyncio.Event()

            async def call(operation: str, variables: dict[str, Any], token: str) -> Any:
                payload = {
                    "query": operations()[operation],
                    "operationName": operation,
                    "variables": variables,
                }
                headers = {"Authorization": f"Bearer {token}"}
                response = await http.post("/graphql", json=payload, headers=headers)
                assert "Traceback" not in response.text
                body = response.json()  # always JSON, whatever the status
                errors = body.get("errors") or []
                for error in errors:
                    code = error.get("extensions", {}).get("code")
                    # PostgreSQL away is the typed UNAVAILABLE with a wait, never INTERNAL.
                    assert code in {"UNAVAILABLE", "OVERLOADED"}, (response.status_code, error)
                    if code == "UNAVAILABLE":
                        assert error["extensions"]["retryAfter"] > 0, error
                    failures[code] += 1
                answers["error" if errors else "ok"] += 1
                return None if errors else body["data"]

            async def write_loop() -> None:
                i = 0
                while not stop.is_set():
                    data = await call("CreatePost", {"body": f"w{i}"}, writer)
                    if data is not None:
                        acknowledged.append(int(data["createPost"]["id"]))
                    i += 1
                    await asyncio.sleep(0.02)

            async def read_loop() -> None:
                while not stop.is_set():
                    await call("Feed", {"first": 10, "mode": "CHRONOLOGICAL"}, reader)
                    await asyncio.sleep(0.02)

            loops = [asyncio.create_task(f()) for f in (write_loop, write_loop, read_loop)]
            await eventually(lambda: len(acknowledged) >= 5, within=20, what="writes before")
            before = len(acknowledged)
            await asyncio.to_thread(pg.restart)  # the API is not restarted
            await eventually(
                lambda: len(acknowledged) >= before + 10,
                within=30,
                what="writes acknowledged again after the restart",
            )
            stop.set()
            await asyncio.gather(*loops)
            rows = await asyncpg.connect(url)
            try:
                stored = {r[0] for r in await rows.fetch("SELECT id FROM posts")}
            finally:
                await rows.close()
            assert set(acknowledged) <= stored, "an acknowledged post was lost"
            assert answers["ok"] > 0
            feed = (
                await gql(http, "Feed", {"first": 5, "mode": "CHRONOLOGICAL"}, token=reader)
            ).ok()
            assert feed["feed"]["edges"]
            print(f"answers {dict(answers)}, failures {dict(failures)}, posts {len(acknowledged)}")
