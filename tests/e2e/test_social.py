"""The demo's views of issue 14: comments under a post, follower lists, the people search and
the display-name edit, each checked against what the server says afterwards."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.e2e.ui import (
    log_in,
    more_comments,
    open_comments,
    operations_sent,
    scroll_to_end,
    search_people,
)
from tests.helpers import add_comment, connection_page, follow, gql, post, sign_up


async def _server_comments(http, post_id: int, token: str) -> tuple[int, list[str]]:
    data = (await gql(http, "PostComments", {"id": str(post_id), "first": 100}, token=token)).ok()
    bodies = [edge["node"]["body"] for edge in data["post"]["comments"]["edges"]]
    return data["post"]["commentCount"], bodies


async def test_comments_page_add_and_delete_keep_the_count(pages, http) -> None:
    alice = await sign_up(http, "alice", name="Alice Nguyen")
    bob = await sign_up(http, "bob", name="Bob Tan")
    carol = await sign_up(http, "carol", name="Carol Lim")
    post_id = await post(http, alice, "new bouldering gym opens friday")
    bob_ids = [await add_comment(http, bob, post_id, f"bob says #{i:02d}") for i in range(11)]
    await add_comment(http, carol, post_id, "carol was here")

    page = await pages.new()
    await log_in(page, "bob")
    await page.goto("/#/u/alice")
    card = page.get_by_test_id("post").filter(has_text="new bouldering gym")
    toggle = card.get_by_test_id("comment")
    await expect(toggle).to_have_text(re.compile(r"12\s*comments"))

    thread = await open_comments(card)
    items = thread.get_by_test_id("comment-item")
    await expect(items).to_have_count(10)  # one page, oldest first
    await expect(items.first).to_contain_text("bob says #00")
    await expect(items.first).to_contain_text("Bob Tan")
    await expect(items.first.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
    await more_comments(thread)
    await expect(items).to_have_count(12)
    await expect(items.last).to_contain_text("carol was here")
    await expect(thread.get_by_test_id("comments-more")).to_have_count(0)
    # Bob may delete his own comments, not Carol's (he does not own the post).
    delete = "comment-delete"
    await expect(items.filter(has_text="bob says #03").get_by_test_id(delete)).to_have_count(1)
    await expect(items.filter(has_text="carol was here").get_by_test_id(delete)).to_have_count(0)

    await thread.get_by_test_id("comment-input").fill("see you there")
    await thread.get_by_test_id("comment-send").click()
    await expect(items).to_have_count(13)
    await expect(items.last).to_contain_text("see you there")
    await expect(card.get_by_test_id("comment-count")).to_have_text("13")

    await items.filter(has_text="bob says #00").get_by_test_id("comment-delete").click()
    await expect(items.filter(has_text="bob says #00")).to_have_count(0)
    await expect(card.get_by_test_id("comment-count")).to_have_text("12")
    count, bodies = await _server_comments(http, post_id, bob)
    assert count == 12 and "bob says #00" not in bodies and bodies[-1] == "see you there"

    # The post's author may delete anyone's comment on it.
    mine = await pages.new()
    await log_in(mine, "alice")
    await mine.get_by_test_id("nav-profile").click()
    own = mine.get_by_test_id("post").filter(has_text="new bouldering gym")
    own_thread = await open_comments(own)
    await more_comments(own_thread)
    own_items = own_thread.get_by_test_id("comment-item")
    await expect(own_items).to_have_count(12)
    await own_items.filter(has_text="carol was here").get_by_test_id("comment-delete").click()
    await expect(own_items.filter(has_text="carol was here")).to_have_count(0)
    await expect(own.get_by_test_id("comment-count")).to_have_text("11")

    # A comment deleted elsewhere meanwhile: NOT_FOUND, it goes, and the count is the server's.
    (await gql(http, "DeleteComment", {"id": bob_ids[1]}, token=bob)).ok()
    await own_items.filter(has_text="bob says #01").get_by_test_id("comment-delete").click()
    toast = mine.get_by_test_id("toast").filter(has_text="gone already")
    await expect(toast).to_have_attribute("data-code", "NOT_FOUND")
    await expect(own_items.filter(has_text="bob says #01")).to_have_count(0)
    await expect(own.get_by_test_id("comment-count")).to_have_text("10")
    count, bodies = await _server_comments(http, post_id, alice)
    assert count == 10 and "carol was here" not in bodies and "bob says #01" not in bodies


async def test_followers_and_following_lists_page_and_link(pages, http) -> None:
    await sign_up(http, "star", name="Star Power")
    alice = await sign_up(http, "alice", name="Alice Nguyen")
    for i in range(23):
        await follow(http, await sign_up(http, f"fan{i:02d}", name=f"Fan {i}"), "star")
    await follow(http, alice, "fan05")

    page = await pages.new()
    await log_in(page, "alice")
    await page.goto("/?first=10#/u/star")  # three pages of followers
    await expect(page.get_by_test_id("follower-count")).to_contain_text("23 followers")
    await page.get_by_test_id("follower-count").click()
    await expect(page).to_have_url(re.compile(r"#/u/star/followers$"))
    await expect(page.get_by_test_id("tab-followers")).to_have_attribute("aria-current", "page")
    await scroll_to_end(page, "followers")
    await expect(page.get_by_test_id("followers-footer")).to_have_attribute("data-pages", "3")
    people = page.get_by_test_id("followers").get_by_test_id("person")
    await expect(people).to_have_count(23)
    shown = [await p.get_attribute("data-handle") for p in await people.all()]
    assert shown == [f"fan{i:02d}" for i in reversed(range(23))]  # newest first, each once
    await expect(people.filter(has_text="@fan05")).to_contain_text("Following")

    # Following from this tab puts the viewer on top of the list.
    await page.get_by_test_id("follow").click()
    await expect(page.get_by_test_id("follower-count")).to_contain_text("24 followers")
    await expect(people.first).to_have_attribute("data-handle", "alice")

    await people.filter(has_text="@fan07").get_by_test_id("person-link").click()
    await expect(page).to_have_url(re.compile(r"#/u/fan07$"))
    await expect(page.get_by_test_id("profile")).to_contain_text("Fan 7")
    await page.get_by_test_id("tab-following").click()
    following = page.get_by_test_id("following").get_by_test_id("person")
    await expect(following).to_have_count(1)
    await following.get_by_test_id("person-link").click()
    await expect(page).to_have_url(re.compile(r"#/u/star$"))
    await expect(page.get_by_test_id("profile")).to_contain_text("Star Power")
    await expect(page.get_by_test_id("tab-posts")).to_have_attribute("aria-current", "page")

    # The lists show what the server's connection shows.
    nodes, _ = await connection_page(
        http, "Following", {"handle": "alice", "first": 10}, ["user", "following"], token=alice
    )
    await page.goto("/#/u/alice/following")
    mine = page.get_by_test_id("following").get_by_test_id("person")
    await expect(mine).to_have_count(len(nodes))
    assert [await p.get_attribute("data-handle") for p in await mine.all()] == [
        n["handle"] for n in nodes
    ]


async def test_search_box_finds_people_by_prefix(pages, http) -> None:
    await sign_up(http, "alice")
    await sign_up(http, "photog", name="Carol Lim")
    for i in range(12):
        await sign_up(http, f"zed{i:02d}")

    page = await pages.new()
    await log_in(page, "alice")
    sent = operations_sent(page, "SearchUsers")
    results = await search_people(page, "zed")
    # Debounced: not one request per key (20 ms apart; a loaded machine may stall past the
    # 250 ms pause once and split the word), and the last one is for the whole word.
    prefixes = [v["prefix"] for v in sent]
    assert prefixes[-1] == "zed" and len(prefixes) < len("zed"), prefixes
    await expect(results.get_by_test_id("search-result")).to_have_count(10)  # at most ten

    results = await search_people(page, "carol l")  # display names too, any case
    hits = results.get_by_test_id("search-result")
    await expect(hits).to_have_count(1)
    await expect(hits).to_contain_text("Carol Lim")
    await hits.click()
    await expect(page).to_have_url(re.compile(r"#/u/photog$"))
    await expect(page.get_by_test_id("profile")).to_contain_text("Carol Lim")
    await expect(page.get_by_test_id("search-results")).to_be_hidden()

    results = await search_people(page, "qqq")
    await expect(results.get_by_test_id("search-empty")).to_contain_text("No one matches")

    # Too long for any handle or name: the server's BAD_USER_INPUT, shown as a toast.
    await page.get_by_test_id("search-input").fill("q" * 81)
    toast = page.get_by_test_id("toast").filter(has_text="Check your input")
    await expect(toast).to_have_attribute("data-code", "BAD_USER_INPUT")


async def test_edit_your_display_name(pages, http) -> None:
    alice = await sign_up(http, "alice", name="Alice Nguyen")
    await sign_up(http, "bob")
    await post(http, alice, "chalk, tape, new shoes")

    page = await pages.new()
    await log_in(page, "alice")
    await page.get_by_test_id("nav-profile").click()
    await expect(page.get_by_test_id("profile-name")).to_have_text("Alice Nguyen")

    await page.get_by_test_id("edit-name").click()
    await page.get_by_test_id("display-name-input").fill("   ")
    await page.get_by_test_id("display-name-save").click()
    toast = page.get_by_test_id("toast").filter(has_text="Check your input")
    await expect(toast).to_have_attribute("data-code", "BAD_USER_INPUT")
    await expect(page.get_by_test_id("display-name-input")).to_have_value("   ")  # still editing

    await page.get_by_test_id("display-name-input").fill("Alice N.")
    await page.get_by_test_id("display-name-save").click()
    await expect(page.get_by_test_id("profile-name")).to_have_text("Alice N.")
    card = page.get_by_test_id("user-posts").get_by_test_id("post").filter(has_text="chalk")
    await expect(card).to_contain_text("Alice N.")
    data = (await gql(http, "Viewer", token=alice)).ok()
    assert data["viewer"]["displayName"] == "Alice N."

    await page.goto("/#/u/bob")
    await expect(page.get_by_test_id("profile")).to_be_visible()
    await expect(page.get_by_test_id("edit-name")).to_have_count(0)


async def test_search_on_a_phone_opens_from_its_button(pages, http) -> None:
    await sign_up(http, "alice")
    await sign_up(http, "carol", name="Carol Lim")
    phone = await pages.new(width=390, height=844, is_mobile=True)
    await log_in(phone, "alice")
    await expect(phone.get_by_test_id("search-input")).to_be_hidden()
    await phone.get_by_test_id("search-toggle").click()
    results = await search_people(phone, "car")
    await expect(results.get_by_test_id("search-result")).to_have_count(1)
    await results.get_by_test_id("search-result").click()
    await expect(phone).to_have_url(re.compile(r"#/u/carol$"))
    await expect(phone.get_by_test_id("search-input")).to_be_hidden()
    # The header still fits the screen with the search button in it.
    width = await phone.evaluate("document.querySelector('.topbar-inner').scrollWidth")
    assert width <= 390
