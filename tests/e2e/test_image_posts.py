"""Image posts in the page (issue 36): an image picked with the file input or dropped on the
compose box, its alt text, the upload (CreateUpload, the PUT to the local store's signed URL
with its headers), the post; a follower's feed shows the image after the live refresh over
the socket; a click opens it whole; what the server refuses is shown in its words and
nothing is posted."""

from __future__ import annotations

from playwright.async_api import Route, expect

from tests.e2e.ui import (
    ImageFile,
    drop_images,
    feed_post,
    log_in,
    operations_sent,
    pick_images,
    picture,
    shown_image,
)
from tests.helpers import follow, gql, sign_up

ALT = "Boats moored in the harbour at dusk"


async def test_a_picked_image_reaches_a_followers_feed_over_the_live_refresh(
    pages, http, pipeline
) -> None:
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob")
    await follow(http, bob, "alice")
    reader = await pages.new()
    await log_in(reader, "bob")
    await expect(reader.get_by_test_id("live-status")).to_have_attribute("data-state", "live")

    author = await pages.new()
    await log_in(author, "alice")
    image = picture("harbour.png", 120, 80)
    await pick_images(author, image)
    attachment = author.get_by_test_id("compose-attachment")
    await expect(attachment).to_have_attribute("data-state", "ready")  # created and PUT
    warning = attachment.get_by_test_id("compose-alt-warning")
    await expect(warning).to_be_visible()  # no alt text yet: said, not refused
    await attachment.get_by_test_id("compose-alt").fill(ALT)
    await expect(warning).to_be_hidden()
    await author.get_by_test_id("compose-body").fill("Evening walk")
    await author.get_by_test_id("compose-submit").click()
    await expect(author.get_by_test_id("toast").filter(has_text="Posted")).to_be_visible()
    await expect(author.get_by_test_id("compose-attachment")).to_have_count(0)
    own = feed_post(author, "Evening walk").get_by_test_id("post-image")
    assert (await shown_image(own))["naturalWidth"] == 120

    await pipeline.settle()  # the fan-out; the reader's socket announces the post
    await expect(reader.get_by_test_id("new-posts-banner")).to_contain_text("1 new post")
    await reader.get_by_test_id("new-posts-banner").click()
    card = feed_post(reader, "Evening walk")
    await expect(card).to_be_visible()
    img = card.get_by_test_id("post-image")
    shown = await shown_image(img)
    assert shown["naturalWidth"] == 120 and shown["naturalHeight"] == 80
    # Sized by the server's width and height before it loads (no layout shift), lazy.
    assert (shown["width"], shown["height"], shown["loading"]) == ("120", "80", "lazy")
    assert shown["alt"] == ALT
    assert shown["src"].startswith("/media/")  # the local store, served by the service

    await img.click()  # the full image, over the page
    lightbox = reader.get_by_test_id("lightbox")
    await expect(lightbox).to_be_visible()
    await expect(lightbox).to_contain_text(ALT)
    assert (await shown_image(lightbox.get_by_test_id("lightbox-image")))["naturalWidth"] == 120
    await reader.keyboard.press("Escape")
    await expect(lightbox).to_have_count(0)


async def test_dropped_images_post_as_a_grid_without_text(page, http) -> None:
    await sign_up(http, "alice")
    await log_in(page, "alice")
    first, second = picture("left.png", 64, 48), picture("right.jpg", 48, 64, hue=(4, 120, 87))
    await drop_images(page, first, second)
    attachments = page.get_by_test_id("compose-attachment")
    await expect(attachments).to_have_count(2)
    for i in range(2):
        await expect(attachments.nth(i)).to_have_attribute("data-state", "ready")
    await attachments.nth(0).get_by_test_id("compose-alt").fill("The left one")
    # The second keeps no alt text: the page warns, and posts it anyway.
    await expect(attachments.nth(1).get_by_test_id("compose-alt-warning")).to_be_visible()
    await expect(page.get_by_test_id("compose-submit")).to_be_enabled()  # images, no text
    await page.get_by_test_id("compose-submit").click()
    await expect(page.get_by_test_id("toast").filter(has_text="Posted")).to_be_visible()

    await page.get_by_test_id("nav-profile").click()
    card = page.get_by_test_id("user-posts").get_by_test_id("post")
    await expect(card).to_have_count(1)
    await expect(card.get_by_test_id("post-media")).to_have_attribute("data-count", "2")
    await expect(card.get_by_test_id("post-body")).to_have_count(0)  # no empty paragraph
    images = card.get_by_test_id("post-image")
    left, right = await shown_image(images.nth(0)), await shown_image(images.nth(1))
    assert (left["naturalWidth"], left["alt"]) == (64, "The left one")
    assert (right["naturalWidth"], right["alt"]) == (48, "")


async def test_a_refused_image_shows_the_servers_message_and_posts_nothing(page, http) -> None:
    alice = await sign_up(http, "alice")
    await log_in(page, "alice")
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    await pick_images(page, ImageFile("kitten.png", "image/png", svg))  # an SVG renamed
    attachment = page.get_by_test_id("compose-attachment")
    # The declared type and size are fine, so the bytes go up; what they are is checked when
    # they are attached.
    await expect(attachment).to_have_attribute("data-state", "ready")
    await page.get_by_test_id("compose-body").fill("not a kitten")
    await page.get_by_test_id("compose-submit").click()
    error = page.get_by_test_id("compose-error")
    await expect(error).to_contain_text("The bytes are not image/png")
    toast = page.get_by_test_id("toast").filter(has_text="The bytes are not image/png")
    await expect(toast).to_have_attribute("data-code", "BAD_USER_INPUT")
    await expect(page.get_by_test_id("compose-body")).to_have_value("not a kitten")  # kept
    await expect(page.get_by_test_id("feed")).not_to_contain_text("not a kitten")

    # A type refused at once: CreateUpload's own message, on the image; Post does nothing.
    await attachment.get_by_test_id("compose-remove").click()
    await pick_images(page, ImageFile("drawing.svg", "image/svg+xml", svg))
    await expect(attachment).to_have_attribute("data-state", "failed")
    await expect(attachment.get_by_test_id("compose-attachment-error")).to_contain_text(
        "image/svg+xml"
    )
    await page.get_by_test_id("compose-submit").click()
    await expect(error).to_contain_text("could not be uploaded")

    data = (await gql(http, "UserProfile", {"handle": "alice", "first": 5}, token=alice)).ok()
    assert data["user"]["posts"]["edges"] == []


async def test_an_image_whose_url_fails_is_shown_again_with_a_fresh_url(
    pages, http, pipeline
) -> None:
    """An image that does not load (its URL expired: FOLLOWERS posts' live minutes) makes the
    card ask for the post again, once, and show the image from the new answer's URL."""
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob")
    await follow(http, bob, "alice")
    author = await pages.new()
    await log_in(author, "alice")
    await pick_images(author, picture("quay.png", 80, 60))
    await expect(author.get_by_test_id("compose-attachment")).to_have_attribute(
        "data-state", "ready"
    )
    await author.get_by_test_id("compose-visibility").select_option("FOLLOWERS")
    await author.get_by_test_id("compose-body").fill("Quay at night")
    await author.get_by_test_id("compose-submit").click()
    await expect(author.get_by_test_id("compose-attachment")).to_have_count(0)
    await pipeline.settle()

    reader = await pages.new()
    refused: list[str] = []

    async def expired_once(route: Route) -> None:
        if refused:
            await route.continue_()
        else:  # what the store answers an expired URL
            refused.append(route.request.url)
            await route.fulfill(status=403, body="expired", content_type="text/plain")

    await reader.route("**/media/**", expired_once)
    posts_read = operations_sent(reader, "Post")
    await log_in(reader, "bob")
    img = feed_post(reader, "Quay at night").get_by_test_id("post-image")
    # The locator finds the card's new <img> once it replaces the broken one.
    await expect(img).to_have_js_property("naturalWidth", 80)
    assert len(refused) == 1 and len(posts_read) == 1  # one refusal, one read of the post
    assert (await shown_image(img))["alt"] == ""
