"""Two regions through GraphQL over HTTP (issue 37, decision 0087): global ids and home
regions, writes routed to the home region, a post made in a visible in a follower's feed in
b (freshness measured), a delete in a effective in b on the priority path (bound measured),
and the faults: replication paused, a region's Redis lost, the link down and back."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import httpx

from app.db import regions as regions_cli
from app.db.regions import KINDS
from tests.helpers import (
    add_comment,
    eventually,
    feed_ids,
    follow,
    gql,
    make_user,
    post,
    run_module,
)
from tests.regions.topology import Region

WAIT = 30.0
POSTS = 50


def handle(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


async def replicated_user(region: Region, user_id: int) -> None:
    async def there() -> bool:
        return bool(await region.sql("SELECT 1 FROM users WHERE id = $1", user_id))

    try:
        await eventually(there, WAIT, 0.02, f"user {user_id} in region {region.name}")
    except AssertionError:
        print(region.logs())
        raise


async def author_and_reader(a: Region, b: Region) -> tuple[str, str, str, int]:
    """An author homed in a, and a reader homed in b who follows them and has read the feed
    in b once (fan-out writes only existing timelines): (author handle, author token,
    reader token, reader id)."""
    author = handle("au")
    async with a.http() as ha, b.http() as hb:
        author_token, author_id = await make_user(ha, author)
        await replicated_user(b, author_id)
        reader_token, reader_id = await make_user(hb, handle("rd"))
        await follow(hb, reader_token, author)
        await feed_ids(hb, reader_token, mode="CHRONOLOGICAL")
    return author, author_token, reader_token, reader_id


async def chronological(http: httpx.AsyncClient, token: str) -> list[int]:
    return await feed_ids(http, token, first=100, mode="CHRONOLOGICAL")


async def visible_by_id(http: httpx.AsyncClient, token: str, post_id: int) -> bool:
    query = "query($id: ID!) { post(id: $id) { id } }"
    result = await gql(http, "", {"id": str(post_id)}, token=token, query=query)
    return bool(result.data and result.data.get("post"))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def test_ids_and_home_regions(regions: tuple[Region, Region]) -> None:
    a, b = regions
    async with a.http() as ha, b.http() as hb:
        handle_a = handle("ia")
        token_a, id_a = await make_user(ha, handle_a)
        token_b, id_b = await make_user(hb, handle("ib"))
        assert (id_a & 15, id_b & 15) == (1, 2)
        post_a = await post(ha, token_a, "from a")
        post_b = await post(hb, token_b, "from b")
    assert (post_a >> 22) and (post_a & 15, post_b & 15) == (1, 2)
    await replicated_user(b, id_a)
    await replicated_user(a, id_b)
    for region in (a, b):
        rows = await region.sql(
            "SELECT id, home_region FROM users WHERE id = ANY($1::bigint[]) ORDER BY id",
            [id_a, id_b],
        )
        assert {r["id"]: r["home_region"] for r in rows} == {id_a: "a", id_b: "b"}
    # Cross-region graph and engagement: each written in the actor's home region; the
    # counters (region-local columns) agree in both regions once replicated.
    async with a.http() as ha, b.http() as hb:
        await eventually(lambda: visible_by_id(hb, token_b, post_a), WAIT, 0.02, "a's post in b")
        (await gql(hb, "Follow", {"handle": handle_a}, token=token_b)).ok()
        (await gql(hb, "LikePost", {"id": str(post_a)}, token=token_b)).ok()
        comment_b = int(await add_comment(hb, token_b, post_a, "from b"))
        comment_a = int(await add_comment(ha, token_a, post_a, "from a"))
    assert (comment_a & 15, comment_b & 15) == (1, 2)

    async def counted(region: Region) -> bool:
        users = await region.sql("SELECT follower_count FROM users WHERE id = $1", id_a)
        posts = await region.sql(
            "SELECT like_count, comment_count FROM posts WHERE id = $1", post_a
        )
        return bool(users and posts) and (
            users[0]["follower_count"],
            posts[0]["like_count"],
            posts[0]["comment_count"],
        ) == (1, 1, 2)

    for region in (a, b):
        await eventually(lambda r=region: counted(r), WAIT, 0.02, f"counts in {region.name}")


async def test_writes_from_the_other_region_are_routed_home(
    regions: tuple[Region, Region],
) -> None:
    a, b = regions
    async with a.http() as ha, b.http() as hb:
        token, user_id = await make_user(ha, handle("wr"))
        await replicated_user(b, user_id)
        refused = await gql(hb, "CreatePost", {"body": "written in b"}, token=token)
        assert refused.codes == ["WRONG_REGION"], refused.errors
        extensions = refused.errors[0]["extensions"]
        assert extensions["homeRegion"] == "a"
        assert extensions["homeUrl"] == f"{a.api.url}/graphql"
        # Reads are served where the reader is; the write goes home and is read back there.
        post_id = await post(ha, token, "written in a")
        assert await visible_by_id(ha, token, post_id)  # read-your-writes in the home region
    assert not await b.sql("SELECT 1 FROM posts WHERE body = 'written in b'")
    assert not await a.sql("SELECT 1 FROM posts WHERE body = 'written in b'")


async def test_post_in_a_reaches_a_follower_in_b(regions: tuple[Region, Region]) -> None:
    """Freshness: each of POSTS posts' time from its createPost answer in a to its first
    sight in the reader's chronological feed in b (polled back to back)."""
    a, b = regions
    _, author_token, reader_token, _ = await author_and_reader(a, b)
    sent: dict[int, float] = {}
    seen: dict[int, float] = {}
    done = asyncio.Event()

    async def watch() -> None:
        async with b.http() as hb:
            while not done.is_set() or len(seen) < len(sent):
                shown = await chronological(hb, reader_token)
                now = time.monotonic()
                for post_id in shown:
                    seen.setdefault(post_id, now)
                if done.is_set() and time.monotonic() - last[0] > WAIT:
                    return

    last = [time.monotonic()]
    watcher = asyncio.create_task(watch())
    async with a.http() as ha:
        for i in range(POSTS):
            post_id = await post(ha, author_token, f"fresh {i}")
            sent[post_id] = last[0] = time.monotonic()
            await asyncio.sleep(0.02)
    done.set()
    await asyncio.wait_for(watcher, WAIT + 5)
    assert set(sent) <= set(seen), f"never seen in b: {set(sent) - set(seen)}\n{b.logs()}"
    lags = [seen[p] - sent[p] for p in sent]
    p50, p99 = percentile(lags, 0.5), percentile(lags, 0.99)
    print(f"\nfreshness a->b over {POSTS} posts: p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms")
    print("lags ms in order:", [round(x * 1000) for x in lags])
    assert p99 < 5.0, (p50, p99)


async def test_delete_in_a_effective_in_b(regions: tuple[Region, Region]) -> None:
    """The priority path's bound: a delete's answer in a to the post gone in b, measured
    with the bulk stream paused (the tombstone travels alone) and running."""
    a, b = regions
    _, author_token, reader_token, _ = await author_and_reader(a, b)
    took: list[float] = []
    async with a.http() as ha, b.http() as hb:
        for round_ in range(6):
            post_id = await post(ha, author_token, f"to delete {round_}")
            await eventually(
                lambda p=post_id: visible_by_id(hb, reader_token, p), WAIT, 0.02, "post in b"
            )
            paused = round_ % 2 == 0
            if paused:
                await pause(b, a, "bulk")
            try:
                deleted = await gql(ha, "DeletePost", {"id": str(post_id)}, token=author_token)
                assert deleted.ok()["deletePost"] is True
                started = time.monotonic()

                async def gone(post_id: int = post_id) -> bool:
                    return not await visible_by_id(hb, reader_token, post_id)

                await eventually(gone, WAIT, 0.005, "deleted in b")
                took.append(time.monotonic() - started)
                assert post_id not in await chronological(hb, reader_token)
            finally:
                if paused:
                    await resume(b, a, "bulk")
    print(f"\ndelete a->b: {[round(t * 1000) for t in took]} ms, max {max(took) * 1000:.0f} ms")
    assert max(took) < 5.0, took


async def test_narrowing_and_block_on_the_priority_path(regions: tuple[Region, Region]) -> None:
    """With b's bulk stream from a paused, a narrowing (PUBLIC -> PRIVATE) and a block made
    in a still reach b: the post and then the blocker's posts leave the reader's pages in b,
    and the reader's follow of the blocker is cut there; after, rows and counts converge."""
    a, b = regions
    author, author_token, reader_token, reader_id = await author_and_reader(a, b)
    async with a.http() as ha, b.http() as hb:
        narrowed = await post(ha, author_token, "to narrow")
        other = await post(ha, author_token, "blocked later")
        for post_id in (narrowed, other):
            await eventually(lambda p=post_id: visible_by_id(hb, reader_token, p), WAIT, 0.02)
        reader = (await b.sql("SELECT handle FROM users WHERE id = $1", reader_id))[0]["handle"]
        await pause(b, a, "bulk")
        try:
            variables = {"id": str(narrowed), "visibility": "PRIVATE"}
            (await gql(ha, "SetPostVisibility", variables, token=author_token)).ok()
            await eventually(
                lambda: _not(visible_by_id(hb, reader_token, narrowed)), WAIT, 0.01, "narrowed"
            )
            assert narrowed not in await chronological(hb, reader_token)
            (await gql(ha, "Block", {"handle": reader}, token=author_token)).ok()
            await eventually(
                lambda: _not(visible_by_id(hb, reader_token, other)), WAIT, 0.01, "blocked"
            )
            assert other not in await chronological(hb, reader_token)
            follows = "SELECT 1 FROM follows WHERE follower_id = $1"
            assert not await b.sql(follows, reader_id)  # cut in b by the replicated block
        finally:
            await resume(b, a, "bulk")
        author_id = int((await a.sql("SELECT id FROM users WHERE handle = $1", author))[0]["id"])
        await eventually(lambda: same_rows(a, b, author_id), WAIT, 0.05, "rows converge")
        count = "SELECT follower_count FROM users WHERE id = $1"
        for region in (a, b):
            await eventually(
                lambda r=region: _is_zero(r, count, author_id), WAIT, 0.05, "counts converge"
            )
        assert not await visible_by_id(hb, reader_token, narrowed)


async def _is_zero(region: Region, query: str, *args: object) -> bool:
    rows = await region.sql(query, *args)
    return bool(rows) and rows[0][0] == 0


async def pause(region: Region, peer: Region, kind: str | None = None) -> None:
    """`python -m app.db.regions pause`'s step: region stops applying peer's rows."""
    await _set_enabled(region, peer, False, kind)


async def resume(region: Region, peer: Region, kind: str | None = None) -> None:
    await _set_enabled(region, peer, True, kind)


async def _set_enabled(region: Region, peer: Region, enabled: bool, kind: str | None) -> None:
    conn = await asyncpg.connect(region.dsn)
    try:
        await regions_cli.set_enabled(conn, peer.name, enabled, (kind,) if kind else KINDS)
    finally:
        await conn.close()


async def same_rows(a: Region, b: Region, author_id: int) -> bool:
    query = (
        "SELECT id, body, visibility, version, deleted_at IS NOT NULL AS gone FROM posts "
        "WHERE author_id = $1 ORDER BY id"
    )
    rows_a = [tuple(r) for r in await a.sql(query, author_id)]
    rows_b = [tuple(r) for r in await b.sql(query, author_id)]
    return rows_a == rows_b


async def test_replication_paused_then_caught_up(regions: tuple[Region, Region]) -> None:
    """b stops applying a's rows for a few seconds: a's new posts are not in b meanwhile (and
    nothing unauthorized is), a delete still is (priority path); after, the rows converge, no
    post twice, and the feed has every live post once."""
    a, b = regions
    author, author_token, reader_token, _ = await author_and_reader(a, b)
    async with a.http() as ha, b.http() as hb:
        before = await post(ha, author_token, "before the pause")
        await eventually(lambda: visible_by_id(hb, reader_token, before), WAIT, 0.02, "in b")
        await pause(b, a, "bulk")
        try:
            during = [await post(ha, author_token, f"during {i}") for i in range(5)]
            (await gql(ha, "DeletePost", {"id": str(before)}, token=author_token)).ok()
            await eventually(
                lambda: _not(visible_by_id(hb, reader_token, before)), WAIT, 0.02, "gone in b"
            )
            await asyncio.sleep(2.0)
            shown = await chronological(hb, reader_token)
            assert before not in shown
            assert not set(during) & set(shown)  # not replicated yet: not served
        finally:
            await resume(b, a, "bulk")
        author_id = int((await a.sql("SELECT id FROM users WHERE handle = $1", author))[0]["id"])
        await eventually(lambda: same_rows(a, b, author_id), WAIT, 0.05, "rows converge")

        async def all_shown() -> list[int] | None:
            shown = await chronological(hb, reader_token)
            return shown if set(during) <= set(shown) else None

        shown = await eventually(all_shown, WAIT, 0.05, "the feed in b catches up")
        assert len(shown) == len(set(shown))
        assert before not in shown


async def _not(check: Any) -> bool:
    return not await check


async def test_link_down_and_back(regions: tuple[Region, Region]) -> None:
    """Both ways cut (every subscription disabled): each region keeps taking its own users'
    writes; past CONFIRM_MS a region no longer serves the other's posts (it cannot prove
    they were not deleted), not even one deleted in the meantime; after, both converge,
    serve each other's posts again, and nothing is applied twice."""
    a, b = regions
    author, author_token, reader_token, _ = await author_and_reader(a, b)
    async with a.http() as ha, b.http() as hb:
        token_b, id_b = await make_user(hb, handle("lb"))
        await replicated_user(a, id_b)
        kept = await post(ha, author_token, "kept across the cut")
        doomed = await post(ha, author_token, "deleted during the cut")
        for post_id in (kept, doomed):
            await eventually(lambda p=post_id: visible_by_id(hb, reader_token, p), WAIT, 0.02)
        await pause(b, a)
        await pause(a, b)
        try:
            (await gql(ha, "DeletePost", {"id": str(doomed)}, token=author_token)).ok()
            posts_a = [await post(ha, author_token, f"a during {i}") for i in range(3)]
            posts_b = [await post(hb, token_b, f"b during {i}") for i in range(3)]
            # The deleted post is still a live row in b: b stops serving a's posts instead.
            assert not await _deleted_in(b, doomed)
            await eventually(
                lambda: _not(visible_by_id(hb, reader_token, kept)), WAIT, 0.05, "a unproven"
            )
            assert not await visible_by_id(hb, reader_token, doomed)
            shown = await chronological(hb, reader_token)
            assert kept not in shown and doomed not in shown
            assert await visible_by_id(hb, token_b, posts_b[0])  # b's own posts: served
            assert not await b.sql("SELECT 1 FROM posts WHERE id = ANY($1::bigint[])", posts_a)
            assert not await a.sql("SELECT 1 FROM posts WHERE id = ANY($1::bigint[])", posts_b)
        finally:
            await resume(b, a)
            await resume(a, b)
        author_id = int((await a.sql("SELECT id FROM users WHERE handle = $1", author))[0]["id"])
        await eventually(lambda: same_rows(a, b, author_id), WAIT, 0.05, "a's rows in b")
        await eventually(lambda: same_rows(a, b, id_b), WAIT, 0.05, "b's rows in a")
        await eventually(lambda: visible_by_id(hb, reader_token, kept), WAIT, 0.05, "a proven")
        assert not await visible_by_id(hb, reader_token, doomed)

        async def caught_up() -> list[int] | None:
            shown = await chronological(hb, reader_token)
            return shown if set(posts_a) | {kept} <= set(shown) else None

        shown = await eventually(caught_up, WAIT, 0.05, "b's feed caught up")
        assert doomed not in shown and len(shown) == len(set(shown))
    for region in (a, b):
        stopped = await region.sql("SELECT subname FROM pg_stat_subscription WHERE pid IS NULL")
        assert not stopped


async def test_redis_lost_in_b(regions: tuple[Region, Region]) -> None:
    """b's Redis emptied: the reader's feed in b is rebuilt from b's database, with a's posts
    and without a's deleted one."""
    a, b = regions
    _, author_token, reader_token, _ = await author_and_reader(a, b)
    async with a.http() as ha, b.http() as hb:
        kept = [await post(ha, author_token, f"kept {i}") for i in range(3)]
        dropped = await post(ha, author_token, "dropped")

        async def all_in() -> bool:
            return set(kept) | {dropped} <= set(await chronological(hb, reader_token))

        await eventually(all_in, WAIT, 0.05, "posts in b")
        (await gql(ha, "DeletePost", {"id": str(dropped)}, token=author_token)).ok()
        await eventually(lambda: _deleted_in(b, dropped), WAIT, 0.01, "the tombstone in b")
        await b.redis.flushall()  # timelines, sessions, queue and limits: all gone

        async def rebuilt() -> list[int] | None:
            result = await gql(
                hb, "Feed", {"first": 100, "mode": "CHRONOLOGICAL"}, token=reader_token
            )
            if result.errors:
                return None
            shown = [int(e["node"]["id"]) for e in result.data["feed"]["edges"]]  # type: ignore[index]
            assert dropped not in shown
            return shown if set(kept) <= set(shown) else None

        shown = await eventually(rebuilt, WAIT, 0.1, "b's feed rebuilt")
        assert dropped not in shown
        assert len(shown) == len(set(shown))


async def _deleted_in(region: Region, post_id: int) -> bool:
    rows = await region.sql(
        "SELECT deleted_at IS NOT NULL AS gone FROM posts WHERE id = $1", post_id
    )
    return bool(rows and rows[0]["gone"])


async def test_status_command(regions: tuple[Region, Region]) -> None:
    """`python -m app.db.regions status` lists a region's two subscriptions, running."""
    a, b = regions
    code, out, err = await run_module("app.db.regions", "status", env={"DATABASE_URL": a.dsn})
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 2 and all("'running': True" in line for line in lines), out
    assert f"from_{b.name}_bulk" in out and f"from_{b.name}_priority" in out, out
    code, out, err = await run_module("app.db.regions", "prune", "7", env={"DATABASE_URL": a.dsn})
    assert code == 0 and out.strip() == "0 tombstones removed", (out, err)


async def _moderation(region: Region, *argv: str) -> tuple[int, str, str]:
    """`python -m app.moderation ...` as an operator of `region` runs it (its environment)."""
    return await run_module("app.moderation", *argv, env=region.api.env)


async def test_regional_restriction_effective_in_both_regions(
    regions: tuple[Region, Region],
) -> None:
    """A post homed in a, read by a follower in each region: restricted in b (the command
    run against a's database, b's bulk stream paused: the priority path carries it), it
    leaves the feed and post(id) in b within the bound and stays in a; restricted in a too,
    it leaves a; unrestricted, it is back in both. Run against b's database the command is
    refused, naming a."""
    a, b = regions
    author, author_token, reader_b, _ = await author_and_reader(a, b)
    async with a.http() as ha, b.http() as hb:
        reader_a, _ = await make_user(ha, handle("ra"))
        await follow(ha, reader_a, author)
        await chronological(ha, reader_a)
        post_id = await post(ha, author_token, "restricted later")
        for http, token in ((ha, reader_a), (hb, reader_b)):
            await eventually(lambda h=http, t=token: visible_by_id(h, t, post_id), WAIT, 0.02)

        async def in_feed(http: httpx.AsyncClient, token: str) -> bool:
            return post_id in await chronological(http, token)

        await eventually(lambda: in_feed(hb, reader_b), WAIT, 0.02, "in b's feed")
        await eventually(lambda: in_feed(ha, reader_a), WAIT, 0.02, "in a's feed")
        args = (str(post_id), "--regions")
        code, _, err = await _moderation(b, "restrict", *args, b.name, "--reason", "x")
        assert code == 2 and "homed in region a" in err, (code, err)
        assert not await b.sql("SELECT 1 FROM post_restrictions WHERE post_id = $1", post_id)

        async def hidden_in_b() -> bool:
            return not await visible_by_id(hb, reader_b, post_id) and not await in_feed(
                hb, reader_b
            )

        await pause(b, a, "bulk")
        try:
            # An edit before the restriction: its bulk row (restricted nowhere) is applied
            # in b after the priority path's restriction, and must not lift it.
            edit = {"id": str(post_id), "body": "edited before"}
            (await gql(ha, "EditPost", edit, token=author_token)).ok()
            code, _, err = await _moderation(a, "restrict", *args, b.name, "--reason", "x")
            assert code == 0, err
            started = time.monotonic()
            await eventually(hidden_in_b, WAIT, 0.005, "restricted in b")
            took_restrict = time.monotonic() - started
        finally:
            await resume(b, a, "bulk")
        assert await visible_by_id(ha, reader_a, post_id) and await in_feed(ha, reader_a)
        # The bulk stream's older copies of the post do not lift it in b.
        await eventually(
            lambda: _audited(b, post_id, 1), WAIT, 0.05, "bulk caught up (audit row in b)"
        )
        assert await hidden_in_b()
        edited = "SELECT body, restricted_regions FROM posts WHERE id = $1"
        assert [tuple(r) for r in await b.sql(edited, post_id)] == [("edited before", ["b"])]
        code, _, err = await _moderation(a, "restrict", *args, a.name, "--reason", "y")
        assert code == 0, err
        assert not await visible_by_id(ha, reader_a, post_id)  # home: from the commit on
        assert not await in_feed(ha, reader_a)
        assert await visible_by_id(ha, author_token, post_id)  # the author still sees it
        both = f"{a.name},{b.name}"
        code, _, err = await _moderation(a, "unrestrict", *args, both, "--reason", "lifted")
        assert code == 0, err
        started = time.monotonic()
        await eventually(lambda: visible_by_id(hb, reader_b, post_id), WAIT, 0.005, "lifted")
        took_lift = time.monotonic() - started
        assert await visible_by_id(ha, reader_a, post_id)
        await eventually(lambda: in_feed(hb, reader_b), WAIT, 0.02, "back in b's feed")
        await eventually(lambda: in_feed(ha, reader_a), WAIT, 0.02, "back in a's feed")
        await eventually(lambda: _audited(b, post_id, 3), WAIT, 0.05, "audit trail in b")
    for region in (a, b):
        rows = await region.sql("SELECT restricted_regions FROM posts WHERE id = $1", post_id)
        assert rows[0][0] is None, (region.name, rows)
    print(
        f"\nrestriction a->b (bulk paused): {took_restrict * 1000:.0f} ms; "
        f"lift a->b: {took_lift * 1000:.0f} ms"
    )
    assert took_restrict < 5.0 and took_lift < 10.0


async def _audited(region: Region, post_id: int, rows: int) -> bool:
    found = await region.sql("SELECT 1 FROM post_restriction_audit WHERE post_id = $1", post_id)
    return len(found) == rows
