"""Realtime metrics (each process exports its own registry: workers count what they publish,
API processes what they receive, deliver and drop)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

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
