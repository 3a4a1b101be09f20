"""What /metrics serves: this process's metrics, the workers' (prometheus multiprocess mode
when PROMETHEUS_MULTIPROC_DIR is set, as `make run` does) and live gauges read at scrape
time: fan-out lag per lane in seconds and the age of the oldest unpublished outbox event.

Those live figures come from the process's `LiveSources` (the composition root, app.state,
implements them), so this module stays infrastructure: it knows Prometheus, not the parts."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector


class LiveSources(Protocol):
    async def lane_lag(self) -> dict[str, tuple[float, int]]:
        """Lane name -> (oldest waiting job's age in seconds, jobs waiting)."""
        ...

    async def outbox_age(self) -> float:
        """Seconds since the oldest outbox event not yet relayed was written (0: none)."""
        ...

    async def author_costs(self) -> list[tuple[str, float, float]]:
        """(handle, write cost, read cost) in seconds per window: the fan-out control plane's
        top authors by estimated cost, as its last periodic pass left them."""
        ...


class _Live(Collector):
    def __init__(self) -> None:
        self.lag: dict[str, tuple[float, int]] = {}
        self.outbox_age = 0.0
        self.costs: list[tuple[str, float, float]] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        lag = GaugeMetricFamily(
            "feed_fanout_oldest_job_age_seconds",
            "Age of the oldest job waiting per lane (seconds, not messages)",
            labels=["lane"],
        )
        queued = GaugeMetricFamily(
            "feed_fanout_queued_jobs", "Jobs waiting per lane", labels=["lane"]
        )
        for lane, (age, waiting) in sorted(self.lag.items()):
            lag.add_metric([lane], age)
            queued.add_metric([lane], waiting)
        yield lag
        yield queued
        yield GaugeMetricFamily(
            "feed_outbox_oldest_unpublished_seconds",
            "Age of the oldest outbox event not yet relayed",
            value=self.outbox_age,
        )
        costs = GaugeMetricFamily(
            "feed_fanout_author_cost_seconds",
            "Estimated fan-out cost per window of the control plane's top authors (seconds of "
            "work): cost=write (pushing their posts) or read (pulling them at read time)",
            labels=["author", "cost"],
        )
        for handle, write, read in self.costs:
            costs.add_metric([handle, "write"], write)
            costs.add_metric([handle, "read"], read)
        yield costs


_live = _Live()


async def render(sources: LiveSources) -> bytes:
    try:
        _live.lag = await sources.lane_lag()
        _live.outbox_age = await sources.outbox_age()
        _live.costs = await sources.author_costs()
    except Exception:  # a scrape must answer even when a backend is down
        _live.lag, _live.outbox_age, _live.costs = {}, 0.0, []
    registry = CollectorRegistry()
    registry.register(_live)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry)
    return generate_latest(REGISTRY) + generate_latest(registry)
