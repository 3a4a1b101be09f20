"""Password guesses at one account (logIn, changePassword's old password): decision 0020.

Two counts of failures, both kept for logIn and changePassword alike (a guess is a guess):

- per (account, client address): past RATE_LIMIT_LOGIN_FAILURES_PER_HANDLE_AND_IP failures
  within RATE_LIMIT_LOGIN_FAILURE_WINDOW_SECONDS of the first one, that address may not try
  again until the window ends; a success from it forgets them (Auth0's brute-force
  protection: 10 failures per identifier and IP).
- per account across addresses, within an hour of the first failure: past the first
  RATE_LIMIT_LOGIN_DELAY_AFTER_FAILURES each try waits 2^(n - that) s after the last failure
  (at most RATE_LIMIT_LOGIN_DELAY_MAX_SECONDS, as Cognito's doubling lockout), and past
  RATE_LIMIT_LOGIN_FAILURES_PER_HANDLE_PER_HOUR none is allowed (OWASP ASVS 2.2.1: at most
  100 failed attempts per hour on one account). An address the account logged in or signed
  up from within KNOWN_ADDRESS_SECONDS is not held by this count (Okta: no lockout from
  unknown devices), so strangers' failures cannot keep the owner out at their own address.

An attempt is reserved before its password is checked, in one script call (atomic: many
concurrent tries cannot all pass a check none of them counted yet), so a refusal costs no
Argon2 hash; a success takes its reservation back, an attempt that never checked the password
(OVERLOADED, a crash) too. Accounts are named by their normalized handle, hashed (a fixed
length whatever a client sends, existing account or not: a refusal says nothing about that).
Addresses count as every per-address budget counts them (app.client_address: IPv6 by its
/64, CLIENT_IPV6_PREFIX). While Redis is unreachable the same counts are kept in this
process, as app.ratelimit does.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from redis.exceptions import RedisError

from app.auth.constants import ACCOUNT_WINDOW_SECONDS, KNOWN_ADDRESS_SECONDS, LOCAL_MAX_ENTRIES
from app.client_address import DEFAULT_IPV6_PREFIX, budget_address
from app.config import Settings
from app.errors import RateLimited
from app.observability.metrics import RATE_LIMIT_FALLBACK, RATE_LIMITED
from app.redis_scripts import AnyRedis, LuaScript, run_script


@dataclass(frozen=True)
class GuessLimits:
    per_address: int
    window_seconds: int
    per_account_per_hour: int
    delay_after: int
    delay_max_seconds: int
    ipv6_prefix: int = DEFAULT_IPV6_PREFIX

    @classmethod
    def of(cls, settings: Settings) -> GuessLimits:
        return cls(
            settings.rate_limit_login_failures_per_handle_and_ip,
            settings.rate_limit_login_failure_window_seconds,
            settings.rate_limit_login_failures_per_handle_per_hour,
            settings.rate_limit_login_delay_after_failures,
            settings.rate_limit_login_delay_max_seconds,
            settings.client_ipv6_prefix,
        )

    def delay_ms(self, failures: int) -> float:
        """How long after the last failure the next try must wait, given the account's."""
        if failures < self.delay_after:
            return 0.0
        return min(2.0 ** min(failures - self.delay_after, 62), self.delay_max_seconds) * 1000


def account_digest(handle: str) -> str:
    name = handle.strip().lstrip("@").lower()
    return hashlib.blake2b(name.encode(), digest_size=12).hexdigest()


def account_key(handle: str) -> str:
    """The account's hash: `n` failures in its hour, `last` failure (ms since the epoch)."""
    return f"pg:{{{account_digest(handle)}}}"


def address_key(handle: str, ip: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """Failures at the account from one address (a counter, the window's TTL)."""
    return f"pg:{{{account_digest(handle)}}}:ip{budget_address(ip, ipv6_prefix)}"


def known_key(handle: str, ip: str, ipv6_prefix: int = DEFAULT_IPV6_PREFIX) -> str:
    """Present while the address is one the account succeeded from."""
    return f"pg:{{{account_digest(handle)}}}:known{budget_address(ip, ipv6_prefix)}"


# Refused: {1, ms} by the address's count, {2, ms} by the account's ceiling, {3, ms} by the
# account's delay; {0, 0} admitted (reserved). Mirrors `_Local.begin`.
_BEGIN = LuaScript(
    "guess_begin",
    """
local now = tonumber(ARGV[1])
local tries = tonumber(redis.call('GET', KEYS[2]) or '0')
if tries >= tonumber(ARGV[2]) then
  return {1, redis.call('PTTL', KEYS[2])}
end
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
if redis.call('EXISTS', KEYS[3]) == 0 then
  if n >= tonumber(ARGV[4]) then
    return {2, redis.call('PTTL', KEYS[1])}
  end
  local after = tonumber(ARGV[5])
  if n >= after then
    local gap = math.min(2 ^ math.min(n - after, 62), tonumber(ARGV[6])) * 1000
    local since = now - tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
    if since < gap then
      return {3, math.ceil(gap - since)}
    end
  end
end
redis.call('INCR', KEYS[2])
if redis.call('TTL', KEYS[2]) < 0 then
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end
redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('HSET', KEYS[1], 'last', now)
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[7])
end
return {0, 0}
""",
)

SUCCEEDED, RELEASED, KNOWN = "succeeded", "released", "known"

# ARGV[1]: succeeded = the password was right (the reservation back, the address's failures
# forgotten, the address known); released = the password was never checked (the reservation
# back); known = an account made from the address (known, nothing reserved). Mirrors
# `_Local.end`.
_END = LuaScript(
    "guess_end",
    """
local outcome = ARGV[1]
if outcome ~= 'known' and tonumber(redis.call('HGET', KEYS[1], 'n') or '0') > 0 then
  redis.call('HINCRBY', KEYS[1], 'n', -1)
end
if outcome == 'released' then
  if tonumber(redis.call('GET', KEYS[2]) or '0') > 0 then
    redis.call('DECR', KEYS[2])
  end
else
  if outcome == 'succeeded' then
    redis.call('DEL', KEYS[2])
  end
  redis.call('SET', KEYS[3], '1', 'EX', ARGV[2])
end
return 1
""",
)


class _Local:
    """The same counts in this process: the fallback while Redis is unreachable. Mirrors
    the two scripts above; times in ms."""

    def __init__(self) -> None:
        self.tries: dict[str, tuple[int, float]] = {}  # address key -> (failures, ends at)
        self.accounts: dict[str, tuple[int, float, float]] = {}  # -> (n, last, ends at)
        self.known: dict[str, float] = {}  # known key -> ends at

    def begin(self, keys: tuple[str, str, str], limits: GuessLimits, now: float) -> list[int]:
        account, address, known = keys
        self._drop_past(now)
        tries, tries_end = self.tries.get(address, (0, 0.0))
        if tries_end <= now:  # no window, or an ended one
            tries, tries_end = 0, 0.0
        if tries >= limits.per_address:
            return [1, int(tries_end - now)]
        n, last, account_end = self.accounts.get(account, (0, 0.0, 0.0))
        if account_end <= now:
            n, last, account_end = 0, 0.0, 0.0
        if self.known.get(known, 0.0) <= now:
            if n >= limits.per_account_per_hour:
                return [2, int(account_end - now)]
            gap = limits.delay_ms(n)
            if now - last < gap:
                return [3, math.ceil(gap - (now - last))]
        self.tries[address] = (tries + 1, tries_end or now + limits.window_seconds * 1000)
        self.accounts[account] = (n + 1, now, account_end or now + ACCOUNT_WINDOW_SECONDS * 1000)
        return [0, 0]

    def end(self, keys: tuple[str, str, str], outcome: str, now: float) -> None:
        account, address, known = keys
        if outcome != KNOWN and account in self.accounts:
            n, last, ends = self.accounts[account]
            self.accounts[account] = (max(0, n - 1), last, ends)
        if outcome == RELEASED:
            if address in self.tries:
                tries, ends = self.tries[address]
                self.tries[address] = (max(0, tries - 1), ends)
            return
        if outcome == SUCCEEDED:
            self.tries.pop(address, None)
        self.known[known] = now + KNOWN_ADDRESS_SECONDS * 1000

    def _drop_past(self, now: float) -> None:
        """Past LOCAL_MAX_ENTRIES, ended windows go; if that is not enough, start over (a
        looser limit for a while)."""
        if max(len(self.tries), len(self.accounts), len(self.known)) < LOCAL_MAX_ENTRIES:
            return
        self.tries = {k: v for k, v in self.tries.items() if v[-1] > now}
        self.accounts = {k: v for k, v in self.accounts.items() if v[-1] > now}
        self.known = {k: v for k, v in self.known.items() if v > now}
        if max(len(self.tries), len(self.accounts), len(self.known)) >= LOCAL_MAX_ENTRIES:
            self.clear()

    def clear(self) -> None:
        self.tries.clear()
        self.accounts.clear()
        self.known.clear()


_local = _Local()


def forget_local() -> None:
    """Drop the in-process counts (tests start each from nothing)."""
    _local.clear()


_REFUSALS = {
    1: ("guesses_address", "Too many failed password attempts at this account from your address"),
    2: ("guesses_account", "Too many failed password attempts at this account"),
    3: ("guesses_account", "Too many failed password attempts at this account"),
}


@dataclass(frozen=True)
class Guesses:
    """Password guesses with their budgets: `attempt` around each password check."""

    redis: AnyRedis
    limits: GuessLimits

    @asynccontextmanager
    async def attempt(self, handle: str, ip: str, wrong: type[Exception]) -> AsyncIterator[None]:
        """Reserve one guess at `handle` from `ip` (RateLimited, before any hashing, when
        over a budget). The body checks the password: raising `wrong` is a failure and keeps
        the reservation; returning is a success; anything else gives the guess back."""
        keys = self._keys(handle, ip)
        await self._begin(keys)
        try:
            yield
        except wrong:
            raise
        except BaseException:
            await self._end(keys, RELEASED)
            raise
        await self._end(keys, SUCCEEDED)

    async def remember(self, handle: str, ip: str) -> None:
        """The account was just made from `ip`: its owner's address from the start."""
        keys = self._keys(handle, ip)
        await self._end(keys, KNOWN)

    def _keys(self, handle: str, ip: str) -> tuple[str, str, str]:
        prefix = self.limits.ipv6_prefix
        return account_key(handle), address_key(handle, ip, prefix), known_key(handle, ip, prefix)

    async def _begin(self, keys: tuple[str, str, str]) -> None:
        now = time.time() * 1000
        limits = self.limits
        args = (
            int(now),
            limits.per_address,
            limits.window_seconds,
            limits.per_account_per_hour,
            limits.delay_after,
            limits.delay_max_seconds,
            ACCOUNT_WINDOW_SECONDS,
        )
        try:
            verdict, wait_ms = await run_script(self.redis, _BEGIN, keys, args)
        except (RedisError, OSError):
            RATE_LIMIT_FALLBACK.inc()
            verdict, wait_ms = _local.begin(keys, limits, now)
        if int(verdict):
            kind, message = _REFUSALS[int(verdict)]
            wait = max(1, math.ceil(int(wait_ms) / 1000))
            RATE_LIMITED.labels(kind).inc()
            raise RateLimited(f"{message}. Retry in {wait} s.", retry_after=wait)

    async def _end(self, keys: tuple[str, str, str], outcome: str) -> None:
        try:
            await run_script(self.redis, _END, keys, (outcome, KNOWN_ADDRESS_SECONDS))
        except (RedisError, OSError):
            RATE_LIMIT_FALLBACK.inc()
            _local.end(keys, outcome, time.time() * 1000)
