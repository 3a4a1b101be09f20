"""prometheus_client internals: a Histogram observed many times in one call.

The `prometheus_client` adapter (docs/decisions/0071): the only module of the service that
reads prometheus_client's private fields. tests/realtime/test_lean_sockets.py checks they
are still what its own `Histogram.observe` uses; `make canary` runs that test against the
newest release."""

from __future__ import annotations

from prometheus_client import Histogram

__all__ = ["observe_many"]


def observe_many(histogram: Histogram, amount: float, times: int) -> None:
    """`histogram.observe(amount)` `times` times, in one go: the sum and one bucket grow
    (prometheus_client's Histogram internals `_sum`, `_upper_bounds`, `_buckets`, as its
    own `observe` uses them; tests/realtime/test_lean_sockets.py checks they still are)."""
    histogram._sum.inc(amount * times)
    for i, bound in enumerate(histogram._upper_bounds):
        if amount <= bound:
            histogram._buckets[i].inc(times)
            break
