"""The report's correctness check fails when it must: a post in a non-follower's timeline, an
active follower without it, a timeline made for an inactive user, a job left queued. Real
PostgreSQL (a generated network) and a private redis-server, as the report runs them."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import numpy as np

from app.posts.ids import EPOCH_MS
from app.timelines.store import TimelineStore
from benchmarks.report import check, drive
from benchmarks.report.generate import generate
from benchmarks.report.scales import SCALES
from benchmarks.report.system import Client, System

SCALE = replace(SCALES["small"], users=300, celebrity=120, big=40, ladder=(20,), read_ladder=(0, 1))


async def test_the_check_passes_a_correct_fan_out_and_reports_every_fault() -> None:
    system = System(f"bench_report_check_{uuid.uuid4().hex[:6]}", keep_database=False)
    client: Client | None = None
    try:
        await system.open()
        client = Client(system.base)  # no API runs: nothing here is pulled
        await generate(system.dsn, SCALE)
        active = await drive.active_ids(system.dsn)
        inactive = np.setdiff1d(np.arange(1, SCALE.users + 1), active)
        await drive.materialize_empty(system, active)
        followers = (await check.active_followers(system.dsn, {1}))[1]
        assert system.redis is not None
        store = TimelineStore(system.redis, 800, 200)
        ms = int(time.time() * 1000)
        post = (ms - EPOCH_MS) << 22
        posted = [drive.Posted(1, time.time(), time.time(), post, True)]
        seen = drive.Visibility({post: 1.0}, set(), {post: 1})
        await store.push_to_timelines(post, ms, sorted(followers))

        good = await check.verify(system, client, posted, seen, active, inactive, 1)
        assert good.ok, good.problems
        assert good.entries[post] == good.expected[post] == len(followers) > 50

        stranger = next(int(u) for u in active if int(u) not in followers and u != 1)
        await store.push_to_timelines(post, ms, [stranger])
        missed = min(followers)
        await store.remove_posts(missed, [post])
        await store.rebuild(int(inactive[0]), [])
        await system.redis.zadd("arq:queue", {f"fb:{post}:1": ms})
        bad = await check.verify(system, client, posted, seen, active, inactive, 1)
        text = "\n".join(bad.problems)
        assert f"leaked into 1 timelines of non-followers (e.g. [{stranger}])" in text
        assert f"missed 1 of {len(followers)} active followers (e.g. [{missed}])" in text
        assert "1 inactive users hold a timeline" in text
        assert "1 jobs still queued" in text
    finally:
        if client is not None:
            await client.aclose()
        await system.close()
