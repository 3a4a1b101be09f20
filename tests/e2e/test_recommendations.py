"""Recommendations on the demo page's home feed (issue 35, decision 0079): in RANKED mode a
PUBLIC post of someone the viewer does not follow, liked by someone they follow, shows
"Recommended · Liked by @…" (the liker's handle a link to their page) and "Show fewer like
this", which takes it out at once; the "Show recommendations" box is the viewer's setting
(recommendationsEnabled), and turning it off reloads a feed without any recommendation.
CHRONOLOGICAL never has one.

Recommendations are cached per viewer in the API process (FEED_RECOMMENDED_CACHE_SECONDS):
this test runs its own server with the cache off, so each first page reads them afresh."""

from __future__ import annotations

from playwright.async_api import Locator, Page, expect

from tests.e2e.conftest import Pages
from tests.e2e.ui import feed_post, log_in
from tests.helpers import follow, gql, post, sign_up
from tests.servers import ApiServer


def in_feed(page: Page, post_id: int) -> Locator:
    return page.get_by_test_id("feed").locator(f'article.post[data-post-id="{post_id}"]')


async def test_recommended_post_why_show_fewer_and_the_setting(
    pages: Pages, http, pipeline
) -> None:
    viewer = await sign_up(http, "viewer")
    ann = await sign_up(http, "ann")  # followed by the viewer
    bob = await sign_up(http, "bob")  # not followed
    await follow(http, viewer, "ann")
    await pipeline.settle()
    await post(http, ann, "ann: followed post")
    liked = await post(http, bob, "bob: liked by ann")
    other = await post(http, bob, "bob: liked by ann too")
    for post_id in (liked, other):
        (await gql(http, "LikePost", {"id": str(post_id)}, token=ann)).ok()
    await pipeline.settle()

    async with ApiServer(env={"FEED_RECOMMENDED_CACHE_SECONDS": "0"}) as server:
        page = await pages.new(server=server)
        await page.add_init_script("localStorage.setItem('hybridfeed.mode', 'RANKED')")
        await log_in(page, "viewer")

        followed = feed_post(page, "ann: followed post")
        await expect(followed).to_be_visible()
        await expect(followed.get_by_test_id("post-recommendation")).to_have_count(0)
        await expect(followed.get_by_test_id("post-show-fewer")).to_have_count(0)

        card = in_feed(page, liked)
        await expect(card).to_be_visible()
        await expect(card).to_have_attribute("data-reason", "RECOMMENDED")
        why = card.get_by_test_id("post-recommendation")
        await expect(why).to_contain_text("Recommended")
        await expect(why).to_contain_text("Liked by @ann")
        link = why.get_by_role("link", name="@ann")
        await expect(link).to_have_attribute("href", "#/u/ann")
        await expect(card.get_by_test_id("post-hide")).to_be_visible()  # Hide and Mute stay

        box = page.get_by_test_id("recommendations-toggle")
        await expect(box).to_be_enabled()
        await expect(box).to_be_checked()

        # Show fewer like this: the post leaves the list at once, and a reload keeps it out.
        await card.get_by_test_id("post-show-fewer").click()
        await expect(card).to_have_count(0)
        await page.reload()
        await expect(followed).to_be_visible()
        await expect(card).to_have_count(0)
        await expect(in_feed(page, other)).to_be_visible()
        await expect(page.locator('[data-reason="RECOMMENDED"]')).not_to_have_count(0)

        # The setting off: the feed reloads its first page with no recommendation.
        await expect(box).to_be_enabled()
        await box.uncheck()
        await expect(box).not_to_be_checked()
        await expect(in_feed(page, other)).to_have_count(0)
        await expect(followed).to_be_visible()
        await expect(page.locator('[data-reason="RECOMMENDED"]')).to_have_count(0)
        query = "{ viewer { recommendationsEnabled } }"
        state = (await gql(http, "", token=viewer, query=query)).ok()["viewer"]
        assert state == {"recommendationsEnabled": False}

        # It is the viewer's setting: a reload reads it back, still off.
        await page.reload()
        await expect(followed).to_be_visible()
        await expect(page.get_by_test_id("recommendations-toggle")).not_to_be_checked()
        await expect(page.locator('[data-reason="RECOMMENDED"]')).to_have_count(0)

        # On again: the recommendation comes back; CHRONOLOGICAL never has one.
        await page.get_by_test_id("recommendations-toggle").check()
        await expect(in_feed(page, other)).to_be_visible()
        await page.get_by_test_id("mode-CHRONOLOGICAL").click()
        await expect(followed).to_be_visible()
        await expect(in_feed(page, other)).to_have_count(0)
