"""First pages as cheap as next pages (issue 24): the viewer's context kept between first
pages (app.feed.context_cache), the session written while the page is read, the count reset
started with it, the filter's block check as hashed subplans and its one sort. Through
GraphQL over HTTP, against the real PostgreSQL and Redis; a second app state on the same
stores stands for a second API process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from app.feed import rows
from app.feed.constants import EPOCH_SECONDS
from app.feed.context_cache import version_key
from app.feed.rows import PageExtras
from app.feed.sessions import _key
from app.realtime.keys import reset_key
from app.state import AppState, create_state
from app.web import create_app
from tests.helpers import (
    author_with_fans,
    block,
    fanout_mode,
    follow,
    gql,
    ids,
    make_user,
    metric_value,
    post,
    sql,
    unfollow,
)


@pytest.fixture
async def other(state) -> AsyncIterator[tuple[AppState, httpx.AsyncClient]]:
    """A second API process: its own in-process caches, the same PostgreSQL and Redis."""
    second = create_state(state.settings)
    transport = httpx.ASGITransport(app=create_app(second))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield second, c
    await second.close()


async def first_page(client, token, first=20, mode="RANKED") -> dict:
    variables = {"first": first, "mode": mode}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


async def context_lookups(client, result: str) -> float:
    text = (await client.get("/metrics")).text
    sample = f'feed_cache_lookups_total{{cache="viewer_context",result="{result}"}}'
    return metric_value(text, sample, 0.0)


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_the_context_is_reused_until_the_viewer_changes_it_in_any_process(
    client, state, pipeline, other, mode
) -> None:
    """Cached in process B; the follow, the post, the unfollow and the block are made
    through process A: B's next first page shows each at once."""
    second, b = other
    viewer, viewer_id = await make_user(client, "viewer")
    ann, _ = await make_user(client, "ann")
    cat, _ = await make_user(client, "cat")
    await follow(client, viewer, "ann")
    await pipeline.settle()
    anns = [await post(client, ann, f"ann {i}") for i in range(3)]
    cats = [await post(client, cat, f"cat {i}") for i in range(3)]
    await pipeline.settle()

    hits = await context_lookups(b, "hit")
    assert set(ids(await first_page(b, viewer, mode=mode))) == set(anns)
    assert set(ids(await first_page(b, viewer, mode=mode))) == set(anns)
    assert await context_lookups(b, "hit") == hits + 1, "the second first page read it again"
    assert len(second.feed.context_cache) == 1 and len(state.feed.context_cache) == 0
    assert await state.redis.exists(version_key(viewer_id))  # written by the follow

    await follow(client, viewer, "cat")  # through A; no worker runs: pulled at once
    assert set(ids(await first_page(b, viewer, mode=mode))) == set(anns + cats)

    mine = await post(client, viewer, "my own")  # read-your-writes, through A
    assert set(ids(await first_page(b, viewer, mode=mode))) == {*anns, *cats, mine}

    await unfollow(client, viewer, "cat")
    await block(client, ann, "viewer")
    assert ids(await first_page(b, viewer, mode=mode)) == [mine]
    (await gql(client, "DeletePost", {"id": str(mine)}, token=viewer)).ok()
    assert ids(await first_page(b, viewer, mode=mode)) == []


async def test_a_switch_to_pull_reaches_cached_contexts_within_the_epoch(
    client, state, pipeline
) -> None:
    """A followee switched to PULL after the viewer's context was cached: their posts,
    now only in posts:{author}, are pulled within EPOCH_SECONDS."""
    viewer, _ = await make_user(client, "viewer")
    star, star_id = await make_user(client, "star")
    await follow(client, viewer, "star")
    await pipeline.settle()
    # An old follow: a recent one is a pull source by itself (RECENT_WINDOW).
    await sql("UPDATE follows SET created_at = now() - interval '1 hour'")
    assert ids(await first_page(client, viewer, mode="CHRONOLOGICAL")) == []
    [entry] = state.feed.context_cache._entries.values()
    assert entry.context.pull_authors == []
    hits = await context_lookups(client, "hit")
    assert ids(await first_page(client, viewer, mode="CHRONOLOGICAL")) == []
    assert await context_lookups(client, "hit") == hits + 1

    # PULL since an hour ago (so only the mode, not the recent switch, makes it a source);
    # the post goes to the author index only, as a pull-mode post does (no worker runs).
    await sql(
        "UPDATE users SET fanout_mode = 1, fanout_mode_version = fanout_mode_version + 1,"
        " fanout_mode_changed_at = now() - interval '1 hour' WHERE id = $1",
        star_id,
    )
    pulled = await post(client, star, "only pulled")
    [row] = await sql(
        "SELECT (extract(epoch FROM created_at) * 1000)::bigint AS ms FROM posts WHERE id = $1",
        pulled,
    )
    await state.timelines.push_author_post(star_id, pulled, int(row["ms"]))
    await asyncio.sleep(EPOCH_SECONDS + 0.1)
    assert ids(await first_page(client, viewer, mode="CHRONOLOGICAL")) == [pulled]
    assert ids(await first_page(client, viewer)) == [pulled]


async def test_without_redis_tokens_the_context_is_read_every_time(client, state) -> None:
    """FEED_CONTEXT_TTL_SECONDS=0: every first page reads it, and mutations write no token."""
    viewer, viewer_id = await make_user(client, "viewer")
    off = create_state(state.settings.model_copy(update={"feed_context_ttl_seconds": 0}))
    try:
        transport = httpx.ASGITransport(app=create_app(off))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            misses, hits = await context_lookups(c, "miss"), await context_lookups(c, "hit")
            for _ in range(2):
                await first_page(c, viewer, mode="CHRONOLOGICAL")
            await post(c, viewer, "mine")
            assert await context_lookups(c, "hit") == hits
            assert await context_lookups(c, "miss") == misses
            assert len(off.feed.context_cache) == 0
            assert not await state.redis.exists(version_key(viewer_id))
    finally:
        await off.close()


async def test_a_first_pages_cursor_finds_its_session_and_the_count_is_reset(
    client, state, pipeline
) -> None:
    """The session is written while the page is read, the reset runs with it: both are done
    when the answer leaves, and the very next request scrolls on."""
    viewer, viewer_id = await make_user(client, "viewer")
    ann, _ = await make_user(client, "ann")
    await follow(client, viewer, "ann")
    await pipeline.settle()
    made = [await post(client, ann, f"ann {i}") for i in range(30)]
    await pipeline.settle()
    await state.redis.delete(reset_key(viewer_id))
    page = await first_page(client, viewer, first=10)
    assert await state.redis.exists(_key(viewer_id, page["sessionId"]))
    assert await state.redis.exists(reset_key(viewer_id))
    after = page["pageInfo"]["endCursor"]
    nxt = (await gql(client, "Feed", {"first": 25, "after": after}, token=viewer)).ok()["feed"]
    assert nxt["sessionId"] == page["sessionId"]
    assert sorted(ids(page) + ids(nxt)) == sorted(made)


async def test_the_rank_filter_returns_newest_first_and_applies_the_rule(
    client, state, pipeline
) -> None:
    """rank_rows' arrays come from one sorted subquery: newest first, aligned column by
    column, whatever order the candidates are given in; blocked (either way), unfollowed,
    private and deleted posts are left out, the viewer's own private post is not."""
    viewer, viewer_id = await make_user(client, "viewer")
    authors = {}
    for handle in ("ann", "ben", "cat", "dan"):
        authors[handle] = (await make_user(client, handle))[0]
        await follow(client, viewer, handle)
    await pipeline.settle()
    by = {h: [await post(client, t, f"{h} {i}") for i in range(4)] for h, t in authors.items()}
    private = await post(client, authors["ann"], "private", visibility="PRIVATE")
    own = await post(client, viewer, "own private", visibility="PRIVATE")
    stranger, _ = await make_user(client, "eve")
    unfollowed = await post(client, stranger, "not followed")
    await block(client, viewer, "ben")  # the viewer blocks ben
    await block(client, authors["cat"], "viewer")  # cat blocks the viewer
    (await gql(client, "DeletePost", {"id": str(by["dan"][0])}, token=authors["dan"])).ok()

    candidates = [p for made in by.values() for p in made] + [private, own, unfollowed]
    shuffled = candidates[1::2] + candidates[::2]
    found = await rows.rank_rows(state.feed.reads, viewer_id, shuffled)
    expected = sorted([*by["ann"], *by["dan"][1:], own], reverse=True)
    assert found.post_ids == expected
    authors_of = {r["id"]: r["author_id"] for r in await sql("SELECT id, author_id FROM posts")}
    assert found.author_ids == [authors_of[p] for p in expected]
    # The page query applies the same rule (the shared fragment).
    page = await rows.page_rows(state.feed.reads, viewer_id, shuffled, PageExtras())
    assert sorted(page, reverse=True) == expected


@pytest.mark.parametrize("mode", ["RANKED", "CHRONOLOGICAL"])
async def test_a_remembered_merge_gives_way_to_a_pulled_authors_new_post(
    client, state, pipeline, mode
) -> None:
    """A first page's candidate merge is kept while its sources are the very same (decision
    0053): refreshes with nothing new are answered alike, and a new post of a pulled author
    is on the first page read after the author cache reloads (its 2 s expiry, here forced)."""
    celeb, _, fans = await author_with_fans(client, 10, author="celeb")
    await pipeline.settle()
    older = await post(client, celeb, "pulled one")
    await pipeline.settle()
    assert await fanout_mode(client, "celeb") == "PULL"
    token, _ = fans[0]
    pages = [await first_page(client, token, mode=mode) for _ in range(3)]
    assert all(ids(p) == ids(pages[0]) for p in pages) and older in ids(pages[0])
    if mode == "RANKED":
        assert {p["sessionId"] for p in pages} == {pages[0]["sessionId"]}  # reused
    state.feed.author_cache.clear()  # reloaded: the same ids, nothing new
    assert ids(await first_page(client, token, mode=mode)) == ids(pages[0])
    newer = await post(client, celeb, "pulled two")
    await pipeline.settle()
    state.feed.author_cache.clear()
    page = await first_page(client, token, mode=mode)
    assert ids(page).count(newer) == 1 and older in ids(page)
    if mode == "RANKED":
        assert page["sessionId"] != pages[0]["sessionId"]  # ranked afresh
