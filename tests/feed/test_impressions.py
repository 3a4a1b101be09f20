"""Impressions (app/feed/impressions.py), through GraphQL over HTTP: every feed page's posts
are recorded as served, `reportImpressions` adds posts the client showed, both are written
to Redis in batches off the request path, and the next RANKED ranking puts every post the
viewer has not seen before the ones they have. Storage stays bounded per viewer.

The batches are awaited with `eventually` on the viewer's impressions zset (its key from the
owner module), never with a sleep.
"""

from __future__ import annotations

from app.feed.constants import MAX_REPORTED
from app.feed.impressions import impressions_key
from tests.helpers import eventually, followed_pair, gql, ids, make_user, post


async def feed(client, token, first: int, after: str | None = None) -> dict:
    variables = {"first": first, "mode": "RANKED", "after": after}
    return (await gql(client, "Feed", variables, token=token)).ok()["feed"]


async def recorded(state, viewer_id: int) -> set[int]:
    return {int(m) for m in await state.redis.zrange(impressions_key(viewer_id), 0, -1)}


async def report(client, token, post_ids) -> object:
    variables = {"postIds": [str(p) for p in post_ids]}
    return await gql(client, "ReportImpressions", variables, token=token)


async def test_a_refreshed_first_page_puts_unseen_posts_before_seen_ones(
    client, state, pipeline
) -> None:
    viewer, viewer_id, authors, made = await followed_pair(client, pipeline)
    posts = [p for made_by in made.values() for p in made_by]
    served = ids(await feed(client, viewer, first=4))
    assert set(served) <= set(posts) and len(served) == 4
    # The client also reports three posts it showed (say, in a post's thread view).
    reported = [p for p in posts if p not in served][:3]
    assert (await report(client, viewer, reported)).ok() == {"reportImpressions": True}
    seen = set(served) | set(reported)
    await eventually(lambda: _equals(recorded(state, viewer_id), seen), what="impressions written")

    # Something new ends the open session: the refresh is a new RANKED ranking.
    newest = await post(client, authors["ann"], "ann, later")
    await pipeline.settle()
    refreshed = ids(await feed(client, viewer, first=len(posts) + 1))
    assert sorted(refreshed) == sorted([*posts, newest])
    unseen = len(refreshed) - len(seen)
    assert set(refreshed[:unseen]).isdisjoint(seen), refreshed
    assert set(refreshed[unseen:]) == seen, refreshed
    assert refreshed[0] == newest  # unseen posts keep the ranking's order: freshest first


async def _equals(found, expected: set[int]) -> bool:
    return await found == expected


async def test_impressions_stay_bounded_per_viewer(client, state, pipeline, monkeypatch) -> None:
    """Newest impressions win past the cap; the key expires (TTL) when the viewer is gone."""
    monkeypatch.setattr(state.feed.impressions, "max_per_viewer", 6)
    viewer, viewer_id, _, made = await followed_pair(client, pipeline)
    posts = [p for made_by in made.values() for p in made_by]
    page = await feed(client, viewer, first=5)
    pages = [ids(page)]
    while page["pageInfo"]["hasNextPage"]:
        # Each page is its own batch, so the newest page's impressions are the newest.
        await eventually(lambda: _contains(recorded(state, viewer_id), pages[-1]), what="batch")
        page = await feed(client, viewer, first=5, after=page["pageInfo"]["endCursor"])
        pages.append(ids(page))
    assert sorted(p for shown in pages for p in shown) == sorted(posts)
    last = set(pages[-1])
    await eventually(lambda: _contains(recorded(state, viewer_id), last), what="last batch")
    kept = await recorded(state, viewer_id)
    assert len(kept) == 6, kept
    assert last <= kept  # the oldest impressions were trimmed, not the newest
    ttl = await state.redis.ttl(impressions_key(viewer_id))
    assert 0 < ttl <= state.settings.impressions_ttl_seconds

    # A report never grows it past the cap either.
    assert (await report(client, viewer, posts[:5])).ok() == {"reportImpressions": True}
    await eventually(lambda: _contains(recorded(state, viewer_id), posts[:5]), what="report")
    assert len(await recorded(state, viewer_id)) == 6


async def _contains(found, expected) -> bool:
    return set(expected) <= await found


async def test_report_impressions_checks_its_input(client, state) -> None:
    token, _ = await make_user(client, "viewer")
    assert (await report(client, None, [1])).codes == ["UNAUTHENTICATED"]
    assert (await report(client, token, ["not-an-id"])).codes == ["BAD_USER_INPUT"]
    too_many = [10**18 + i for i in range(MAX_REPORTED + 1)]
    assert (await report(client, token, too_many)).codes == ["BAD_USER_INPUT"]
    assert (await report(client, token, [])).ok() == {"reportImpressions": True}
