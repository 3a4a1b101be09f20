"""Compose (with visibility), edit, change visibility, like, comment and delete a post."""

from __future__ import annotations

from playwright.async_api import expect

from tests.e2e.ui import log_in
from tests.helpers import create_post, follow, gql, sign_up


async def test_compose_edit_and_delete_your_own_post(page, http) -> None:
    await sign_up(http, "alice", name="Alice Nguyen")
    await log_in(page, "alice")

    await page.get_by_test_id("compose-body").fill("first light at the crag")
    await page.get_by_test_id("compose-visibility").select_option("FOLLOWERS")
    await page.get_by_test_id("compose-submit").click()
    await expect(page.get_by_test_id("toast").filter(has_text="Posted")).to_be_visible()
    await expect(page.get_by_test_id("compose-body")).to_have_value("")

    await page.get_by_test_id("nav-profile").click()
    found = (
        page.get_by_test_id("user-posts")
        .get_by_test_id("post")
        .filter(has_text="first light at the crag")
    )
    await expect(found).to_have_count(1)
    # Edit mode replaces the text with a textarea: hold the card by its post id.
    card = page.locator(f'[data-post-id="{await found.get_attribute("data-post-id")}"]')
    await expect(card.get_by_test_id("post-visibility")).to_have_text("Followers")

    await card.get_by_test_id("post-menu").click()
    await card.get_by_test_id("post-edit").click()
    await card.locator("textarea").fill("first light at the crag (edited)")
    await card.get_by_test_id("post-save").click()
    await expect(card.get_by_test_id("post-body")).to_have_text("first light at the crag (edited)")
    await expect(card).to_contain_text("edited")

    await card.get_by_test_id("post-menu").click()
    await card.get_by_test_id("post-visibility-private").click()
    await expect(card.get_by_test_id("post-visibility")).to_have_text("Only me")

    await card.get_by_test_id("post-menu").click()
    await card.get_by_test_id("post-delete").click()
    await card.get_by_test_id("post-delete-confirm").click()
    await expect(card).to_have_count(0)
    await page.reload()
    await expect(page.get_by_test_id("user-posts-footer")).to_have_attribute("data-state", "end")
    await expect(page.get_by_test_id("user-posts")).not_to_contain_text("first light")


async def test_like_unlike_and_comment_counts(page, http) -> None:
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob")
    made = await create_post(http, bob, "crumb shot incoming")
    await log_in(page, "alice")
    await page.goto("/#/u/bob")
    card = page.get_by_test_id("post").filter(has_text="crumb shot incoming")

    like = card.get_by_test_id("like")
    await like.click()
    await expect(like).to_have_attribute("aria-pressed", "true")
    await expect(card.get_by_test_id("like-count")).to_have_text("1")
    await like.click()
    await expect(like).to_have_attribute("aria-pressed", "false")
    await expect(card.get_by_test_id("like-count")).to_have_text("0")
    await like.click()
    await expect(card.get_by_test_id("like-count")).to_have_text("1")

    await card.get_by_test_id("comment").click()
    await card.get_by_test_id("comment-input").fill("looks great")
    await card.get_by_test_id("comment-send").click()
    await expect(card.get_by_test_id("comment-count")).to_have_text("1")
    await expect(card).to_contain_text("looks great")

    # The server agrees.
    data = (await gql(http, "Post", {"id": made["id"]}, token=bob)).ok()
    assert (data["post"]["likeCount"], data["post"]["commentCount"]) == (1, 1)


async def test_others_cannot_see_a_post_made_private(page, http) -> None:
    await sign_up(http, "alice")
    bob = await sign_up(http, "bob")
    alice = (await gql(http, "LogIn", {"handle": "alice", "password": "password123"})).ok()
    await follow(http, alice["logIn"]["token"], "bob")
    made = await create_post(http, bob, "soon to be private")
    await log_in(page, "alice")
    await page.goto("/#/u/bob")
    card = page.get_by_test_id("post").filter(has_text="soon to be private")
    await expect(card).to_be_visible()

    variables = {"id": made["id"], "visibility": "PRIVATE"}
    (await gql(http, "SetPostVisibility", variables, token=bob)).ok()
    # Acting on it now gives NOT_FOUND, exactly like a deleted post: the card goes away.
    await card.get_by_test_id("like").click()
    toast = page.get_by_test_id("toast").filter(has_text="no longer visible")
    await expect(toast).to_have_attribute("data-code", "NOT_FOUND")
    await expect(card).to_have_count(0)
