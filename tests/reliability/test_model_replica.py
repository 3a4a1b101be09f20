"""The model-based randomized test (tests/reliability/test_model.py's machine, its rules and
checks unchanged) with the app's feed pages on a streaming replica that lags part of the
time (decision 0086).

The replica is a standby of the test run's own PostgreSQL (devtools.replica.standby_of), set
as DATABASE_REPLICA_URLS for this module's app; every feed page and RANKED filter is routed
to it behind the narrowing watermarks. One more rule pauses its replay (and tells the router
the lag is fine: the worst case, the replica keeps answering while its data grows old) or
resumes it. So blocks, unfollows, deletes, visibility narrowings, hides and mutes land while
the replica has not replayed them, and every page check of the machine (no leak, no
duplicate, a narrowing read at once, each reason's rule) must still hold: only the
watermarks keep the lagging replica's answers out. Completeness checks (`settle_and_check`)
resume replay first: freshness on a lagging replica is not promised, authorization is.
`MODEL_REPLICA_EXAMPLES` (default 6) and `MODEL_REPLICA_STEPS` (default 40) size the run.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule, run_state_machine_as_test
from prometheus_client import REGISTRY

from app.config import get_settings
from devtools.replica import ReplicaPair, standby_of
from tests.conftest import BASE_DATABASE_URL, TEST_DB
from tests.helpers import app_client, eventually
from tests.reliability import test_model as model

EXAMPLES = int(os.environ.get("MODEL_REPLICA_EXAMPLES", "6"))
STEPS = int(os.environ.get("MODEL_REPLICA_STEPS", "40"))
LAGGING = 3600.0  # the routers' bound while replay is paused: the replica stays in use
BOUND = 0.5  # and while it replays


@pytest.fixture(scope="module")
async def standby(test_database: str) -> AsyncIterator[ReplicaPair]:
    """A standby of the test run's server (the test database migrated on it already)."""
    async with standby_of(BASE_DATABASE_URL.replace("postgresql+asyncpg", "postgresql")) as pair:
        yield pair


@pytest.fixture(scope="module")
async def state(standby: ReplicaPair) -> AsyncIterator[object]:
    """This module's app: the test settings plus the standby as its replica (the settings
    object is the process's own, so the workers and the model's monkeypatches share it)."""
    from app.state import create_state

    shared = get_settings()
    saved = (
        shared.database_replica_urls,
        shared.database_replica_check_seconds,
        shared.database_replica_max_lag_seconds,
    )
    shared.database_replica_urls = standby.url("standby", TEST_DB)
    shared.database_replica_check_seconds = 0.05
    shared.database_replica_max_lag_seconds = BOUND
    st_ = create_state()
    try:
        yield st_
    finally:
        await st_.close()
        (
            shared.database_replica_urls,
            shared.database_replica_check_seconds,
            shared.database_replica_max_lag_seconds,
        ) = saved


@pytest.fixture(scope="module")
async def client(state: object) -> AsyncIterator[httpx.AsyncClient]:
    from app.web import create_app

    app = create_app(state)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


class LaggingFeedModel(model.FeedModel):
    """The machine, plus a replica whose replay pauses and resumes at random."""

    standby: ReplicaPair
    paused = False

    @initialize()
    def world(self) -> None:
        """The machine's world (tables truncated, Redis flushed: the marks' epoch with it),
        then, once the replica has replayed all of it, the marks trusted afresh."""
        model.FeedModel.world(self)
        self.run(eventually(self.standby.caught_up, what="the standby caught up"))
        self.run(self.state.watermarks.clear())

    def bound(self, seconds: float) -> None:
        for router in self.state.replicas.routers:
            router.max_lag = seconds

    @rule(pause=st.booleans())
    def replica_lag(self, pause: bool) -> None:
        """Replay paused (the router still trusting the replica) or resumed."""
        if pause and not self.paused:
            self.run(self.standby.pause_replay())
            self.bound(LAGGING)
        elif not pause and self.paused:
            self.run(self.standby.resume_replay())
            self.bound(BOUND)
        self.paused = pause

    @rule(viewer=model.users, mode=model.modes, age=st.booleans(), review=st.booleans())
    def settle_and_check(self, viewer: int, mode: str, age: bool, review: bool) -> None:
        """Completeness needs the replica's freshness: replay resumed first."""
        self.replica_lag(False)
        model.FeedModel.settle_and_check(self, viewer, mode, age, review)

    def teardown(self) -> None:
        self.replica_lag(False)
        super().teardown()


def served(how: str) -> float:
    total = 0.0
    for metric in REGISTRY.collect():
        if metric.name == "feed_db_replica_reads":
            for s in metric.samples:
                if s.name.endswith("_total") and s.labels["served"] == how:
                    total += s.value if s.labels["use"] in ("feed_page", "feed_rank") else 0
    return total


async def test_feed_matches_the_model_with_a_lagging_replica(
    client: Any, state: Any, pipeline: Any, standby: ReplicaPair, monkeypatch: Any
) -> None:
    # As test_model.test_feed_matches_the_model (its module doc says why each).
    monkeypatch.setattr(get_settings(), "fanout_window_seconds", model.WINDOW_SECONDS)
    monkeypatch.setattr(get_settings(), "fanout_control", "cost")
    monkeypatch.setattr(get_settings(), "fanout_pull_min_active_followers", 0)
    monkeypatch.setattr(state.feed.recommendations.cache, "ttl", model.RECOMMENDED_CACHE_SECONDS)
    monkeypatch.setattr(get_settings(), "media_private_url_seconds", model.IMAGE_URL_SECONDS)
    monkeypatch.setattr(get_settings(), "media_public_url_seconds", model.IMAGE_URL_SECONDS)
    assert state.replicas is not None and state.watermarks is not None
    await state.watermarks.clear()  # the fixture flushed Redis: marks start known and empty
    await eventually(standby.caught_up)
    LaggingFeedModel.loop = asyncio.get_running_loop()
    LaggingFeedModel.client, LaggingFeedModel.state = client, state
    LaggingFeedModel.pipeline, LaggingFeedModel.standby = pipeline, standby
    before = {how: served(how) for how in ("replica", "behind")}
    run_settings = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
        print_blob=True,
    )
    # As test_model: viewers are served in two regions (decision 0088), each its app.
    async with app_client(state, region="eu") as eu:
        LaggingFeedModel.clients = {"local": client, "eu": eu}
        await asyncio.to_thread(run_state_machine_as_test, LaggingFeedModel, settings=run_settings)
    counts = {how: served(how) - before[how] for how in before}
    print(f"\nmodel with a lagging replica: {model.FIGURES}; feed reads {counts}")
    # Both routes were taken: the replica answered pages, and marks sent others away.
    assert counts["replica"] > 0 and counts["behind"] > 0, counts
