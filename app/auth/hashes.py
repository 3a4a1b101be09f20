"""Argon2 budgets per account and per client address (issue 33).

Each hash holds a core for tens of milliseconds and ~64 MiB, and a process runs
PASSWORD_HASH_CONCURRENCY of them at once (app.passwords). The write budget alone let a few
throwaway accounts keep those slots full (changePassword costs two hashes and returns the
token for the next call), so every hashing mutation (signUp, logIn, changePassword) first
spends its hashes here: RATE_LIMIT_HASHES_PER_ACCOUNT_PER_MINUTE per account (the handle,
normalized and hashed as app.auth.guesses names it, existing or not) and
RATE_LIMIT_HASHES_PER_IP_PER_MINUTE per client address (IPv6 by /64). Past either the
mutation answers RATE_LIMITED with retryAfter before any hash, a slot or a connection is
taken. Fixed windows in Redis with the in-process fallback of app.ratelimit.
"""

from __future__ import annotations

from app.auth.constants import HASH_WINDOW_SECONDS
from app.auth.guesses import account_digest
from app.client_address import budget_address
from app.config import Settings
from app.ratelimit import Window, check_windows
from app.redis_scripts import AnyRedis


def hash_windows(settings: Settings, handle: str, ip: str, hashes: int) -> list[Window]:
    """The windows `hashes` hashes for `handle` from `ip` count against (each window once
    per hash: one INCR per hash, so a call of two hashes cannot pass on one's headroom)."""
    account = (
        "hashes_account",
        f"hash-a{account_digest(handle)}",
        settings.rate_limit_hashes_per_account_per_minute,
        HASH_WINDOW_SECONDS,
    )
    address = (
        "hashes_ip",
        f"hash-ip{budget_address(ip, settings.client_ipv6_prefix)}",
        settings.rate_limit_hashes_per_ip_per_minute,
        HASH_WINDOW_SECONDS,
    )
    return [account, address] * max(1, hashes)


async def spend_hashes(
    redis: AnyRedis, settings: Settings, handle: str, ip: str, hashes: int = 1
) -> None:
    """Count `hashes` Argon2 hashes for `handle` from `ip`; RateLimited (with retry_after)
    when either budget is spent."""
    await check_windows(redis, hash_windows(settings, handle, ip, hashes))


__all__ = ["hash_windows", "spend_hashes"]
