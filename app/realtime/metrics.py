"""Realtime metrics (each process exports its own registry: workers count what they publish,
API processes what they receive, deliver and drop)."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import Counter, Gauge, Histogram

# prometheus_client's adapter: the one module that reads its private fields.
from app.realtime.prometheus_internals import observe_many

SUBSCRIBERS = Gauge(
    "feed_realtime_subscribers",
    "Live feedUpdates subscriptions (summed over live processes in multiprocess mode)",
    multiprocess_mode="livesum",
)
PUBLISHED = Counter(
    "feed_realtime_notifications_published_total",
    "Notifications published to Redis pub/sub, by kind (user, author, reset)",
    ["kind"],
)
RECEIVED = Counter(
    "feed_realtime_notifications_received_total",
    "Pub/sub messages this process's hub received, by kind (user, author)",
    ["kind"],
)
DELIVERED = Counter("feed_realtime_frames_delivered_total", "feedUpdates frames handed to sockets")
PREPARED_FRAMES = Counter(
    "feed_realtime_prepared_frames_total",
    "Frames sent by the prepared path (app.api.fast.live_frames), by how they were written: "
    "raw (to the transport), asgi (the server's websocket send); the rest went through Strawberry",
    ["write"],
)
COALESCED = Counter(
    "feed_realtime_notifications_coalesced_total",
    "Updates merged into a later frame instead of getting their own",
)
DROPPED = Counter(
    "feed_realtime_subscribers_dropped_total",
    "Subscribers dropped by the hub, by reason (slow: socket stuck; shutdown)",
    ["reason"],
)
LATENCY = Histogram(
    "feed_realtime_publish_to_deliver_seconds",
    "From the PUBLISH of a notification to its frame being handed to the socket",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5),
)


# -- frames delivered, counted per loop turn -----------------------------------------------
# A broadcast hands thousands of frames to sockets in one loop turn, all for one notification
# (one publish time). Counting each one into DELIVERED and LATENCY was two metric calls with
# locks per frame, ~15% of a broadcast's CPU (docs/benchmarks/archive.md, issue 24 round 2): they
# are tallied per publish time and counted once at the end of the turn, the latency taken
# then (a broadcast's frames are handed over within that turn).
_tally: dict[float, int] = {}
_flush_armed = [False]
# Prepared frames written, by how (PREPARED_FRAMES' labels), counted at the same flush: a
# Counter.inc per frame (its lock) was 5% of a broadcast's CPU (issue 24, round 3).
_written: dict[str, int] = {}
_WRITE_KINDS = {how: PREPARED_FRAMES.labels(how) for how in ("raw", "asgi")}  # exported at 0


def frame_delivered(published_ms: float) -> None:
    """One frame handed to a socket (publish time in Unix ms; 0 = unknown: counted only)."""
    _tally[published_ms] = _tally.get(published_ms, 0) + 1
    if not _flush_armed[0]:
        _arm_flush()


def prepared_written(how: str) -> None:
    """One prepared frame written, `how` = "raw" or "asgi" (PREPARED_FRAMES' label)."""
    _written[how] = _written.get(how, 0) + 1
    if not _flush_armed[0]:
        _arm_flush()


def _arm_flush() -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop (a synchronous caller): count now
        flush_deliveries()
        return
    _flush_armed[0] = True
    loop.call_soon(flush_deliveries)


def flush_deliveries() -> None:
    _flush_armed[0] = False
    if _written:
        for how, frames in _written.items():
            _WRITE_KINDS[how].inc(frames)
        _written.clear()
    if not _tally:
        return
    now = time.time()
    for published_ms, frames in _tally.items():
        DELIVERED.inc(frames)
        if published_ms:
            observe_many(LATENCY, max(0.0, now - published_ms / 1000), frames)
    _tally.clear()
