"""The operator panel reads /metrics: lag per lane, timeline inserts/s, the feed query's own
p99 (feed_request_seconds) and, labelled apart, the p99 of all GraphQL requests; post-to-
visible p99 per lane, empty and duplicate pages, and the synthetic probe's status (or that
there is no probe)."""

from __future__ import annotations

import re
import time

import httpx
from playwright.async_api import expect

from tests.e2e.ui import log_in
from tests.helpers import gql, sign_up

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
# TYPE feed_request_seconds histogram
feed_request_seconds_bucket{{le="0.005",mode="ranked",page="first"}} 0
feed_request_seconds_bucket{{le="0.01",mode="ranked",page="first"}} {f1}
feed_request_seconds_bucket{{le="0.025",mode="ranked",page="first"}} {f2}
feed_request_seconds_bucket{{le="0.05",mode="ranked",page="first"}} {f3}
feed_request_seconds_bucket{{le="+Inf",mode="ranked",page="first"}} {f3}
feed_request_seconds_bucket{{le="0.005",mode="ranked",page="next"}} {f3}
feed_request_seconds_bucket{{le="0.01",mode="ranked",page="next"}} {f3}
feed_request_seconds_bucket{{le="0.025",mode="ranked",page="next"}} {f3}
feed_request_seconds_bucket{{le="0.05",mode="ranked",page="next"}} {f3}
feed_request_seconds_bucket{{le="+Inf",mode="ranked",page="next"}} {f3}
# TYPE feed_post_visible_95_seconds histogram
feed_post_visible_95_seconds_bucket{{lane="default",le="0.1"}} 0
feed_post_visible_95_seconds_bucket{{lane="default",le="0.5"}} {v}
feed_post_visible_95_seconds_bucket{{lane="default",le="+Inf"}} {v}
# TYPE feed_empty_pages_total counter
feed_empty_pages_total{{mode="ranked",page="next"}} 3
feed_empty_pages_total{{mode="chronological",page="first"}} 1
# TYPE feed_page_duplicates_total counter
feed_page_duplicates_total{{mode="ranked"}} 0
# TYPE feed_probe_leaks_total counter
feed_probe_leaks_total{{kind="deleted"}} 1
feed_probe_leaks_total{{kind="blocked"}} 0
# TYPE feed_probe_lost_posts_total counter
feed_probe_lost_posts_total 0
# TYPE feed_probe_duplicates_total counter
feed_probe_duplicates_total 2
# TYPE feed_probe_last_round_timestamp_seconds gauge
feed_probe_last_round_timestamp_seconds {last}
"""

FEED_P99 = re.compile(r"\d+(\.\d)? ms")


async def test_the_panel_shows_the_real_servers_metrics(page, http) -> None:
    await sign_up(http, "alice")
    await log_in(page, "alice")
    panel = page.get_by_test_id("operator")
    await expect(panel).to_be_visible()  # open by default on a wide screen
    await expect(page.get_by_test_id("operator-state")).to_have_text("polling /metrics every 2 s")
    # Logging in read the home feed: the feed query's own histogram has samples, and so has
    # the histogram of every GraphQL request; each figure says which it is.
    await expect(page.get_by_test_id("feed-footer")).to_have_attribute("data-pages", "1")
    feed_p99 = page.get_by_test_id("operator-p99")
    await expect(feed_p99).to_contain_text(FEED_P99)
    await expect(feed_p99).to_contain_text("feed_request_seconds")
    await expect(panel).to_contain_text("Feed p99")
    await expect(panel).to_contain_text("Query.feed, one page")
    await expect(feed_p99.get_by_test_id("operator-feed-pages")).to_contain_text("first page")
    await page.get_by_test_id("refresh").click()  # more feed reads: still a figure
    await expect(feed_p99).to_contain_text(FEED_P99)
    graphql_p99 = page.get_by_test_id("operator-graphql-p99")
    await expect(graphql_p99).to_contain_text(re.compile(r"\d+(\.\d)? ms"))
    await expect(graphql_p99).to_contain_text("feed_graphql_request_seconds")
    await expect(panel).to_contain_text("all GraphQL requests")
    # Whatever the lanes say (or that nobody exports them here), the panel says something.
    await expect(page.get_by_test_id("operator-lanes")).not_to_be_empty()
    # No probe process runs beside the test server: the panel says so, first, in plain words.
    probe = page.get_by_test_id("operator-probe")
    await expect(probe).to_have_text("no probe: feed_probe_* not exported (app.probe is off)")
    await expect(probe).to_have_attribute("data-level", "none")
    await expect(panel.locator(".op-section").first).to_contain_text("Probe")
    await expect(page.get_by_test_id("operator-visible")).not_to_be_empty()

    await page.get_by_test_id("operator-toggle").click()
    await expect(panel).to_be_hidden()
    await page.reload()
    await expect(page.get_by_test_id("viewer-handle")).to_be_visible()
    await expect(panel).to_be_hidden()  # the choice is remembered


async def test_the_panel_computes_rates_and_p99_and_tolerates_gaps(page, http) -> None:
    await sign_up(http, "alice")
    polls = {"n": 0}

    async def metrics(route) -> None:
        polls["n"] += 1
        n = polls["n"]
        if n == 1:  # a process that exports nothing of ours
            await route.fulfill(status=200, content_type="text/plain", body="# nothing\n")
            return
        body = METRICS.format(
            inserts=1000 * n,
            v=100 * n,
            last=time.time() - 30,
            **{"b1": 50 * n, "b2": 90 * n, "b3": 99 * n, "b4": 100 * n},
            **{"f1": 90 * n, "f2": 99 * n, "f3": 100 * n},
        )
        await route.fulfill(status=200, content_type="text/plain; version=0.0.4", body=body)

    await page.route("**/metrics", metrics)
    await log_in(page, "alice")
    lanes = page.get_by_test_id("operator-lanes")
    await expect(lanes).to_contain_text("not exported")
    await expect(page.get_by_test_id("operator-inserts")).to_contain_text("not exported")
    await expect(page.get_by_test_id("operator-p99")).to_contain_text(
        "no feed_request_seconds samples yet"
    )
    await expect(page.get_by_test_id("operator-probe")).to_contain_text("no probe")
    await expect(page.get_by_test_id("operator-visible")).to_contain_text(
        "no feed_post_visible_95_seconds samples yet"
    )

    await expect(lanes.locator('[data-lane="big"]')).to_contain_text("42.0 s")
    await expect(lanes.locator('[data-lane="big"]')).to_have_attribute("data-level", "bad")
    await expect(lanes.locator('[data-lane="big"]')).to_contain_text("250 queued")
    await expect(lanes.locator('[data-lane="default"]')).to_contain_text("250 ms")
    await expect(lanes.locator('[data-lane="default"]')).to_have_attribute("data-level", "good")

    # 1,000 inserts per 2 s poll.
    inserts = page.get_by_test_id("operator-inserts")
    await expect(inserts).to_contain_text(re.compile(r"\d+ /s"), timeout=15_000)
    rate = int(re.search(r"(\d+) /s", await inserts.inner_text()).group(1))  # type: ignore[union-attr]
    assert 350 <= rate <= 700, rate
    # All GraphQL requests: p99 of the window's buckets interpolates to 200 ms.
    graphql_p99 = page.get_by_test_id("operator-graphql-p99")
    await expect(graphql_p99).to_contain_text("200 ms")
    await expect(graphql_p99).to_contain_text("last 30 s")
    # The feed query alone, both pages summed: rank 198 of 200 per poll falls in the 10-25 ms
    # bucket (190 -> 199): 10 + 15 * 8/9 = 23 ms. First pages alone: 25 ms; next: < 5 ms.
    p99 = page.get_by_test_id("operator-p99")
    await expect(p99).to_contain_text("23 ms")
    await expect(p99).to_contain_text("feed_request_seconds, last 30 s")
    pages = p99.get_by_test_id("operator-feed-pages")
    await expect(pages).to_contain_text("first page 25 ms")
    await expect(pages).to_contain_text(re.compile(r"next pages \d\.\d ms"))
    # Post -> 95% of active followers, default lane: 100 new observations per poll in
    # 0.1-0.5 s, p99 = 0.1 + 0.4 * 0.99 = 496 ms; no first-follower histogram exported.
    visible = page.get_by_test_id("operator-visible").locator('[data-lane="default"]')
    await expect(visible).to_contain_text("95% 496 ms")
    await expect(visible).to_contain_text("first —")
    await expect(page.get_by_test_id("operator-empty-pages")).to_have_text("empty pages 4")
    await expect(page.get_by_test_id("operator-page-duplicates")).to_have_text("duplicates 0")
    # The probe counted a leak: red, with its figures and the age of its last round.
    probe = page.get_by_test_id("operator-probe")
    await expect(probe).to_have_attribute("data-level", "bad")
    await expect(probe.get_by_test_id("operator-probe-leaks")).to_have_text("leaks 1")
    await expect(probe.get_by_test_id("operator-probe-lost")).to_have_text("lost 0")
    await expect(probe.get_by_test_id("operator-probe-duplicates")).to_have_text("duplicates 2")
    await expect(probe.get_by_test_id("operator-probe-round")).to_have_text(
        re.compile(r"last round 3\d\.\d s ago")
    )


async def test_on_a_narrow_screen_the_panel_is_a_drawer(pages, http) -> None:
    await sign_up(http, "alice")
    page = await pages.new(width=390, height=844)
    await log_in(page, "alice")
    panel = page.get_by_test_id("operator")
    await expect(panel).to_be_hidden()
    await page.get_by_test_id("operator-toggle").click()
    await expect(panel).to_be_visible()
    await expect(page.get_by_test_id("operator-p99")).to_contain_text("ms")


def _feed_count(metrics: str, mode: str, page: str) -> float:
    line = f'feed_request_seconds_count{{mode="{mode}",page="{page}"}} '
    values = [float(x[len(line) :]) for x in metrics.splitlines() if x.startswith(line)]
    return values[0] if values else 0.0


async def test_metrics_expose_the_feed_query_latency(http: httpx.AsyncClient) -> None:
    token = await sign_up(http, "alice")
    before = (await http.get("/metrics")).text
    (await gql(http, "Feed", {"first": 5, "mode": "RANKED"}, token=token)).ok()
    (await gql(http, "Feed", {"first": 5, "mode": "CHRONOLOGICAL"}, token=token)).ok()
    refused = await gql(http, "Feed", {"first": 0}, token=token)  # no read: not timed
    assert refused.codes == ["BAD_USER_INPUT"]
    response = await http.get("/metrics")
    assert response.status_code == 200
    after = response.text
    assert "# TYPE feed_request_seconds histogram" in after
    assert 'feed_request_seconds_bucket{le="0.005",mode="ranked",page="first"}' in after
    for mode in ("ranked", "chronological"):
        assert _feed_count(after, mode, "first") == _feed_count(before, mode, "first") + 1
