"""The operator panel reads /metrics: lag per lane, timeline inserts/s, feed p99."""

from __future__ import annotations

import re

from playwright.async_api import expect

from tests.e2e.helpers import log_in, make_user

METRICS = """\
# HELP feed_fanout_oldest_job_age_seconds Age of the oldest pending job per lane
# TYPE feed_fanout_oldest_job_age_seconds gauge
feed_fanout_oldest_job_age_seconds{{lane="default"}} 0.25
feed_fanout_oldest_job_age_seconds{{lane="big"}} 42.0
feed_fanout_queued_jobs{{lane="default"}} 1.0
feed_fanout_queued_jobs{{lane="big"}} 250.0
# TYPE feed_timeline_inserts_total counter
feed_timeline_inserts_total {inserts}
# TYPE feed_graphql_request_seconds histogram
feed_graphql_request_seconds_bucket{{le="0.05"}} {b1}
feed_graphql_request_seconds_bucket{{le="0.1"}} {b2}
feed_graphql_request_seconds_bucket{{le="0.2"}} {b3}
feed_graphql_request_seconds_bucket{{le="0.5"}} {b4}
feed_graphql_request_seconds_bucket{{le="+Inf"}} {b4}
feed_graphql_request_seconds_count {b4}
feed_graphql_request_seconds_sum 5.0
"""


async def test_the_panel_shows_the_real_servers_metrics(page, http) -> None:
    await make_user(http, "alice")
    await log_in(page, "alice")
    panel = page.get_by_test_id("operator")
    await expect(panel).to_be_visible()  # open by default on a wide screen
    await expect(page.get_by_test_id("operator-state")).to_have_text("polling /metrics every 2 s")
    # The API process exports the GraphQL latency histogram: logging in made samples.
    await expect(page.get_by_test_id("operator-p99")).to_contain_text(re.compile(r"\d+ ms"))
    # Whatever the lanes say (or that nobody exports them here), the panel says something.
    await expect(page.get_by_test_id("operator-lanes")).not_to_be_empty()

    await page.get_by_test_id("operator-toggle").click()
    await expect(panel).to_be_hidden()
    await page.reload()
    await expect(page.get_by_test_id("viewer-handle")).to_be_visible()
    await expect(panel).to_be_hidden()  # the choice is remembered


async def test_the_panel_computes_rates_and_p99_and_tolerates_gaps(page, http) -> None:
    await make_user(http, "alice")
    polls = {"n": 0}

    async def metrics(route) -> None:
        polls["n"] += 1
        n = polls["n"]
        if n == 1:  # a process that exports nothing of ours
            await route.fulfill(status=200, content_type="text/plain", body="# nothing\n")
            return
        body = METRICS.format(inserts=1000 * n, b1=50 * n, b2=90 * n, b3=99 * n, b4=100 * n)
        await route.fulfill(status=200, content_type="text/plain; version=0.0.4", body=body)

    await page.route("**/metrics", metrics)
    await log_in(page, "alice")
    lanes = page.get_by_test_id("operator-lanes")
    await expect(lanes).to_contain_text("not exported")
    await expect(page.get_by_test_id("operator-inserts")).to_contain_text("not exported")

    await expect(lanes.locator('[data-lane="big"]')).to_contain_text("42.0 s")
    await expect(lanes.locator('[data-lane="big"]')).to_have_attribute("data-level", "bad")
    await expect(lanes.locator('[data-lane="big"]')).to_contain_text("250 queued")
    await expect(lanes.locator('[data-lane="default"]')).to_contain_text("250 ms")
    await expect(lanes.locator('[data-lane="default"]')).to_have_attribute("data-level", "good")

    # 1,000 inserts per 2 s poll; p99 of the window's buckets interpolates to 200 ms.
    inserts = page.get_by_test_id("operator-inserts")
    await expect(inserts).to_contain_text(re.compile(r"\d+ /s"), timeout=15_000)
    rate = int(re.search(r"(\d+) /s", await inserts.inner_text()).group(1))  # type: ignore[union-attr]
    assert 350 <= rate <= 700, rate
    p99 = page.get_by_test_id("operator-p99")
    await expect(p99).to_contain_text("200 ms")
    await expect(p99).to_contain_text("last 30 s")


async def test_on_a_narrow_screen_the_panel_is_a_drawer(pages, http) -> None:
    await make_user(http, "alice")
    page = await pages.new(width=390, height=844)
    await log_in(page, "alice")
    panel = page.get_by_test_id("operator")
    await expect(panel).to_be_hidden()
    await page.get_by_test_id("operator-toggle").click()
    await expect(panel).to_be_visible()
    await expect(page.get_by_test_id("operator-p99")).to_contain_text("ms")
