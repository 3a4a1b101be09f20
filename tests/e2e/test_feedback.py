"""Negative feedback on the demo page's home feed (decision 0076): each post of someone else
has "Hide" and "Mute @author"; a hide takes the post away, a mute every post of the author,
at once and after a reload (the server leaves them out); the viewer's own posts have neither;
the author's profile still shows the hidden post."""

from __future__ import annotations

from playwright.async_api import expect

from tests.e2e.ui import feed_post, log_in
from tests.helpers import follow, gql, post, sign_up


async def test_hide_and_mute_from_the_home_feed(page, http, pipeline) -> None:
    reader = await sign_up(http, "reader")
    tokens = {h: await sign_up(http, h) for h in ("ann", "ben")}
    for handle in tokens:
        await follow(http, reader, handle)
    await pipeline.settle()
    await post(http, tokens["ann"], "ann: keep me")
    await post(http, tokens["ann"], "ann: hide me")
    await post(http, tokens["ben"], "ben: first")
    await post(http, tokens["ben"], "ben: second")
    await post(http, reader, "reader: my own")
    await pipeline.settle()

    await log_in(page, "reader")
    for text in ("ann: keep me", "ann: hide me", "ben: first", "ben: second"):
        await expect(feed_post(page, text)).to_be_visible()
    own = feed_post(page, "reader: my own")
    await expect(own.get_by_test_id("post-hide")).to_have_count(0)  # not on one's own posts
    await expect(own.get_by_test_id("post-mute")).to_have_count(0)

    await feed_post(page, "ann: hide me").get_by_test_id("post-hide").click()
    await expect(feed_post(page, "ann: hide me")).to_have_count(0)
    mute = feed_post(page, "ben: first").get_by_test_id("post-mute")
    await expect(mute).to_have_text("Mute @ben")
    await mute.click()
    await expect(feed_post(page, "ben: first")).to_have_count(0)
    await expect(feed_post(page, "ben: second")).to_have_count(0)  # every post of ben's
    await expect(feed_post(page, "ann: keep me")).to_be_visible()

    # The server says the same: after a reload the feed leaves them out.
    await page.reload()
    await expect(feed_post(page, "ann: keep me")).to_be_visible()
    await expect(feed_post(page, "reader: my own")).to_be_visible()
    for gone in ("ann: hide me", "ben: first", "ben: second"):
        await expect(feed_post(page, gone)).to_have_count(0)
    query = '{ user(handle: "ben") { viewerMutes viewerFollows } }'
    state = (await gql(http, "", token=reader, query=query)).ok()["user"]
    assert state == {"viewerMutes": True, "viewerFollows": True}  # a mute is not an unfollow

    # The profile still shows the hidden post.
    await page.goto("/#/u/ann")
    profile_post = page.get_by_test_id("post").filter(has_text="ann: hide me")
    await expect(profile_post).to_be_visible()
    await expect(profile_post.get_by_test_id("post-hide")).to_have_count(0)  # feed only
