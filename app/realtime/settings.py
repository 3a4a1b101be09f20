"""Realtime capacity and timing knobs (env `REALTIME_*`); tests shrink them."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class RealtimeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REALTIME_", extra="ignore")

    # At most one frame per subscriber per interval; updates inside it are merged (coalesced).
    # The first update after a quiet interval goes out at once, so it adds no latency.
    coalesce_ms: int = 250
    # A subscriber whose pending update was not taken by its socket for this long is stuck
    # (its socket's send buffer is full): it is dropped and its socket closed (1013).
    stall_seconds: float = 10.0
    # Kernel send buffer and transport high-water mark per websocket (bytes; 0 = leave the
    # kernel's autotuning, up to ~4 MB a socket). Frames are ~150 B: 32 KiB is ~200 frames.
    socket_send_buffer: int = 32 * 1024
    # New-post ids kept per user; the count saturates here ("200+" is plenty for a banner).
    count_max: int = 200
    # Counts of users who never come back expire; a reconnect after that starts from zero.
    count_ttl_seconds: int = 7 * 24 * 3600
    # A user counts as online this long after their last socket closed: short reconnects keep
    # their running count without a rebuild.
    online_grace_seconds: float = 300.0
    # How often each hub re-reads which pull-mode authors its subscribers follow.
    refresh_seconds: float = 30.0
    # Pub/sub channel namespace; empty = the Redis database number (channels ignore databases).
    namespace: str = ""
    # Concurrent pull-mode deliveries per process (each is one SQL check + one Redis call).
    author_concurrency: int = 8
    # Live frames rendered once per distinct update and written straight to each socket
    # (app.api.frames); off = Strawberry's per-event execution for every frame (the
    # benchmark's baseline, and a fallback should a client ever need it).
    prepared_frames: bool = True
    # A socket that has not sent connection_init by then is closed (4408).
    connection_init_timeout_seconds: float = 10.0
    # Caps (decision 0017; 0 = off). Open sockets per account (from connection_ack) and per
    # client address (from the upgrade), across every API process: past them a socket is
    # closed with 4429.
    sockets_per_user: int = Field(default=8, ge=0)
    sockets_per_ip: int = Field(default=64, ge=0)
    # Live subscriptions (`feedUpdates`) running at once per account and per address; past
    # them a `subscribe` is answered with an `error` message (RATE_LIMITED, the limit).
    subscriptions_per_user: int = Field(default=16, ge=0)
    subscriptions_per_ip: int = Field(default=128, ge=0)
    # Subscriptions started per minute per account and per address (each costs a Redis
    # SUBSCRIBE, a count rebuild and SQL): past them, RATE_LIMITED with retryAfter.
    subscribes_per_minute: int = Field(default=60, ge=0)
    subscribes_per_ip_per_minute: int = Field(default=300, ge=0)
    # Operations running at once on one socket (queries, mutations, subscriptions).
    operations_per_socket: int = Field(default=10, ge=1)
    # A held socket or subscription counts this long after its process was last heard of
    # (renewed every third of it): a crashed process's sockets stop counting by then.
    lease_seconds: float = Field(default=60.0, gt=0)
    # From this many subscribers on, the hub moves the process's long-lived objects out of
    # the garbage collector's walks (gc.freeze, decision 0039): a full collection over
    # thousands of sockets paused the loop for 0.5-1.8 s, inside whatever broadcast ran.
    # 0 = off.
    gc_freeze_subscribers: int = Field(default=1000, ge=0)

    @model_validator(mode="after")
    def _check(self) -> RealtimeSettings:
        if self.coalesce_ms < 0 or self.count_max <= 0 or self.count_ttl_seconds <= 0:
            raise ValueError("REALTIME_COALESCE_MS >= 0, COUNT_MAX and COUNT_TTL_SECONDS > 0")
        if self.stall_seconds * 1000 <= self.coalesce_ms:
            raise ValueError("REALTIME_STALL_SECONDS must exceed the coalescing interval")
        return self


@lru_cache
def get_realtime_settings() -> RealtimeSettings:
    return RealtimeSettings()
