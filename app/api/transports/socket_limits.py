"""What one account or one client address may hold open and start over websockets
(docs/decisions/0017-socket-limits.md), and what a client is told past each limit.

- Sockets at once, per address (from the upgrade) and per account (from connection_init):
  past either the socket is closed with 4429 and a reason naming the limit and what to do.
- Live subscriptions at once, per account and per address, and subscriptions started per
  minute: past them the `subscribe` gets an `error` message, RATE_LIMITED, with the limit
  (`extensions.limit`) or the wait (`extensions.retryAfter`). The socket stays open.
- Operations at once on one socket: the same kind of `error` message.

The counts of what is held at once live in app.realtime.leases (shared by every API process).
"""

from __future__ import annotations

from prometheus_client import Counter

from app.coalesce import Coalesced
from app.config import Settings
from app.errors import RateLimited
from app.ratelimit import check_windows_many
from app.realtime.leases import SOCKETS, SUBSCRIPTIONS, Cap, address_key, user_key
from app.redis_scripts import AnyRedis

CLOSE_TOO_MANY = 4429  # graphql-ws's own code for "too many": its client does not retry it

REFUSED = Counter(
    "feed_socket_limit_refused_total",
    "Websockets closed and operations refused by a socket limit, by which",
    ["limit"],  # sockets_ip, sockets_user, subscriptions_ip, subscriptions_user, operations
)


class LimitReached(RateLimited):
    """A cap on what is held at once (not a rate): it frees when the client ends something,
    so there is no `retryAfter`; `extensions.limit` carries the cap."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.extensions = {"limit": limit}


def address_socket_caps(settings: Settings, address: str) -> list[Cap]:
    return [Cap(address_key(address, SOCKETS), settings.realtime_sockets_per_ip, "address")]


def user_socket_caps(settings: Settings, user_id: int) -> list[Cap]:
    return [Cap(user_key(user_id, SOCKETS), settings.realtime_sockets_per_user, "account")]


def subscription_caps(settings: Settings, user_id: int, address: str) -> list[Cap]:
    return [
        Cap(user_key(user_id, SUBSCRIPTIONS), settings.realtime_subscriptions_per_user, "account"),
        Cap(address_key(address, SUBSCRIPTIONS), settings.realtime_subscriptions_per_ip, "address"),
    ]


def socket_refusal(cap: Cap) -> str:
    """A close reason (under the 123 bytes a close frame carries) that says what to do."""
    REFUSED.labels(f"sockets_{'user' if cap.who == 'account' else 'ip'}").inc()
    return (
        f"Too many sockets: at most {cap.limit} open per {cap.who}; "
        "close one, or share one socket between subscriptions"
    )


def subscription_refusal(cap: Cap) -> LimitReached:
    REFUSED.labels(f"subscriptions_{'user' if cap.who == 'account' else 'ip'}").inc()
    return LimitReached(
        f"Too many live subscriptions: at most {cap.limit} at once per {cap.who}. "
        "Complete one before subscribing again (one feedUpdates per client is enough).",
        cap.limit,
    )


def operations_refusal(limit: int) -> LimitReached:
    REFUSED.labels("operations").inc()
    return LimitReached(
        f"Too many operations on this socket: at most {limit} running at once. Wait for "
        "one to complete (or send `complete` for a subscription), then send this again.",
        limit,
    )


async def count_subscribe(redis: AnyRedis, settings: Settings, user_id: int, address: str) -> None:
    """One subscription started, against the per-account and per-address minute budgets;
    RateLimited (with retryAfter) past either. Counted with the other subscriptions starting
    at the same time, in one pipeline (app.coalesce)."""
    await _together((redis, settings, user_id, address))


Counted = tuple[AnyRedis, Settings, int, str]


async def _count_batch(items: list[Counted]) -> list[RateLimited | None]:
    groups: dict[int, list[int]] = {}
    for i, item in enumerate(items):
        groups.setdefault(id(item[0]), []).append(i)
    out: list[RateLimited | None] = [None] * len(items)
    for indexes in groups.values():
        redis = items[indexes[0]][0]
        calls = [
            [
                ("subscribes", f"sub-u{user_id}", settings.realtime_subscribes_per_minute, 60),
                (
                    "subscribes_ip",
                    f"sub-ip{address}",
                    settings.realtime_subscribes_per_ip_per_minute,
                    60,
                ),
            ]
            for _, settings, user_id, address in (items[i] for i in indexes)
        ]
        for i, answer in zip(indexes, await check_windows_many(redis, calls), strict=True):
            out[i] = answer
    return out


_together: Coalesced[Counted, None] = Coalesced(_count_batch)
