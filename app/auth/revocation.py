"""Is a valid token still honoured? Per-user token versions and a per-token deny-list.

docs/decisions/0013-token-revocation.md: changePassword bumps `users.token_version`, which
outdates every token issued before; logOut deny-lists one token id until that token expires.
The hot path (every authenticated request) costs one pipelined Redis round trip: the user's
cached version and the token's deny-list entry. PostgreSQL is read only when the cached
version is missing (first use, after its TTL, after Redis lost it) and while Redis fails.

A token that passed is not checked again in the same process for TOKEN_CHECK_CACHE_SECONDS (1 s
by default; 0 checks every request): a client paging through its feed sends the same token
several times a second, and that round trip was ~4% of a feed page's API CPU plus Redis
work (docs/benchmarks/archive.md, issue 10). The process that runs a logOut or changePassword
forgets the user's passed tokens at once; other API processes honour a revoked token for
at most that long. Failures are never remembered, nor a pass while Redis was down.

Durable (docs/decisions/0066-durable-revocation.md, issue 33): PostgreSQL is the authority
for logOut too (`revoked_tokens`, committed before Redis is told); Redis caches it per token.
`tr:{<user>}:<token id>` is "1" for a logged-out token and "0" for one PostgreSQL (or its
issue) vouched for, for VOUCH_SECONDS at most. A token with no mark is unknown, not honoured:
its answer comes from PostgreSQL (one query, with the version) and is written back. So a
Redis role that comes back empty (a failover to an empty replica, a restart without
persistence, a flush) loses nothing: every token is read back once, a normal request then
costs no query. The marks live in the user's hash slot, as the version does, so a lost
Cluster shard is detected for exactly the users it held. While Redis is down every check
reads PostgreSQL (version and logOut); a Redis write of logOut or changePassword that
failed is retried in the background until Redis takes it (`retries`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.constants import PRUNE_BATCH, VERSION_CACHE_SECONDS, VOUCH_SECONDS
from app.auth.tokens import TokenClaims
from app.coalesce import Coalesced
from app.db.models import RevokedToken, User
from app.errors import AppError, Unauthenticated
from app.redis_scripts import AnyRedis

REVOKED, VOUCHED = b"1", b"0"  # a token's mark in Redis (module doc)
_REDIS_DOWN = (RedisError, OSError, TimeoutError)


def version_key(user_id: int) -> str:
    """`tv:{<user_id>}`: the user's current token version (decimal)."""
    return f"tv:{{{int(user_id)}}}"


def revoked_key(user_id: int, token_id: str) -> str:
    """`tr:{<user_id>}:<token_id>`: "1" while a logged-out token would still be unexpired,
    "0" while PostgreSQL's word that it is not logged out is trusted (VOUCH_SECONDS)."""
    return f"tr:{{{int(user_id)}}}:{token_id}"


class Revoked(Unauthenticated):
    """A well-signed, unexpired token that was logged out or outdated by a password change."""


class _Passed:
    """Tokens that passed lately in this process: user -> {(token id, version): deadline}."""

    MAX_USERS = 50_000

    def __init__(self) -> None:
        self._users: OrderedDict[int, dict[tuple[str, int], float]] = OrderedDict()

    def fresh(self, claims: TokenClaims) -> bool:
        tokens = self._users.get(claims.user_id)
        deadline = tokens.get((claims.token_id, claims.version)) if tokens else None
        return deadline is not None and deadline > time.monotonic()

    def remember(self, claims: TokenClaims, seconds: float) -> None:
        tokens = self._users.get(claims.user_id)
        if tokens is None:
            if len(self._users) >= self.MAX_USERS:
                self._users.popitem(last=False)  # the user remembered first goes
            tokens = self._users[claims.user_id] = {}
        now = time.monotonic()
        if len(tokens) > 8:  # a user's lapsed entries go when more tokens come
            for key in [k for k, deadline in tokens.items() if deadline <= now]:
                del tokens[key]
        tokens[(claims.token_id, claims.version)] = now + seconds

    def forget(self, user_id: int) -> None:
        self._users.pop(user_id, None)

    def clear(self) -> None:
        self._users.clear()


passed = _Passed()


class _Retries:
    """Redis writes of logOut and changePassword that failed (Redis unreachable at that
    moment): retried every INTERVAL seconds in the background until Redis takes them or
    they lapse. Without them a Redis back from an outage would still say "0" for a logged
    out token (until VOUCH_SECONDS) or hold the older version (VERSION_CACHE_SECONDS)."""

    INTERVAL = 1.0
    MAX = 10_000  # pending writes kept per process (past it, the marks' TTLs bound the rest)

    def __init__(self) -> None:
        self._pending: dict[str, tuple[AnyRedis, bytes, float]] = {}  # key -> (redis, value, until)
        self._task: asyncio.Task[None] | None = None

    async def write(self, redis: AnyRedis, key: str, value: bytes, ttl: int) -> None:
        """SET `key` to `value` for `ttl` s now, or later if Redis cannot take it now."""
        try:
            await redis.set(key, value, ex=ttl)
        except _REDIS_DOWN:
            if len(self._pending) < self.MAX:
                self._pending[key] = (redis, value, time.time() + ttl)
            self._schedule()
        else:
            self._pending.pop(key, None)  # an older failed write must not come after this one

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._task.get_loop() is loop:
            return
        self._task = loop.create_task(self._loop())

    async def _loop(self) -> None:
        while self._pending:
            await asyncio.sleep(self.INTERVAL)
            for key, (redis, value, until) in list(self._pending.items()):
                left = int(until - time.time())
                if left > 0:
                    try:
                        await redis.set(key, value, ex=left)
                    except _REDIS_DOWN:
                        break  # still down: all of them next time
                if self._pending.get(key, (None, None, None))[2] == until:
                    del self._pending[key]

    def pending(self) -> int:
        return len(self._pending)

    def clear(self) -> None:
        self._pending.clear()


retries = _Retries()


async def check(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    claims: TokenClaims,
    cache_seconds: float = 0.0,
) -> None:
    """Raise Revoked when `claims` belongs to a revoked token; return quietly otherwise.
    With `cache_seconds`, a pass is remembered that long in this process (module doc).

    Redis without the user's version or the token's mark (lost, lapsed, first use): both
    come from PostgreSQL in one query and are written back. Redis down: both come from
    PostgreSQL on every request (nothing is remembered).
    """
    if cache_seconds > 0 and passed.fresh(claims):
        return
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.get(version_key(claims.user_id))
        pipe.get(revoked_key(claims.user_id, claims.token_id))
        cached, mark = await pipe.execute()
    except _REDIS_DOWN:
        current, denied = await _stored(sessions, claims)
        cache_seconds = 0.0  # Redis could not be read: nothing to remember a pass by
    else:
        if cached is None or mark is None:
            current, denied = await _fill(redis, sessions, claims, cached is None, mark is None)
            if cached is not None:
                current = int(cached)
            if mark is not None:
                denied = mark == REVOKED
        else:
            current, denied = int(cached), mark == REVOKED
    if denied:
        raise Revoked("This token was logged out; log in again.")
    if claims.version < current:
        raise Revoked("Your password was changed since this token was issued; log in again.")
    if cache_seconds > 0:
        passed.remember(claims, cache_seconds)


async def revoke(
    redis: AnyRedis, sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
) -> None:
    """logOut: record this one token as revoked in PostgreSQL (committed first: the
    authority, docs/decisions/0066), then mark it in Redis until it would have expired
    anyway. A Redis that cannot take the mark now gets it from `retries`."""
    passed.forget(claims.user_id)
    expires = datetime.fromtimestamp(claims.expires_at, UTC)
    async with sessions.begin() as session:
        await session.execute(
            pg_insert(RevokedToken)
            .values(token_id=claims.token_id, user_id=claims.user_id, expires_at=expires)
            .on_conflict_do_nothing(index_elements=[RevokedToken.token_id])
        )
        await _prune(session)
    ttl = max(1, claims.expires_at - int(time.time()))
    await retries.write(redis, revoked_key(claims.user_id, claims.token_id), REVOKED, ttl)


async def vouch(redis: AnyRedis, claims: TokenClaims) -> None:
    """A token just issued is not revoked: its mark written at once, so its first uses cost
    no PostgreSQL read. Best effort (a missing mark is read from PostgreSQL)."""
    with contextlib.suppress(*_REDIS_DOWN):
        await redis.set(
            revoked_key(claims.user_id, claims.token_id),
            VOUCHED,
            ex=_vouch_seconds(claims),
            nx=True,
        )


async def _prune(session: AsyncSession) -> None:
    """Delete up to PRUNE_BATCH revocations of tokens past their expiry (each logOut does,
    so the table holds about a token lifetime of logOuts)."""
    lapsed = (
        select(RevokedToken.token_id)
        .where(RevokedToken.expires_at < func.now())
        .order_by(RevokedToken.expires_at)
        .limit(PRUNE_BATCH)
        .scalar_subquery()
    )
    await session.execute(delete(RevokedToken).where(RevokedToken.token_id.in_(lapsed)))


async def bump_version(session: AsyncSession, user_id: int) -> int:
    """Outdate every token of `user_id` (inside the caller's transaction); the new version."""
    new = await session.scalar(
        update(User)
        .where(User.id == user_id)
        .values(token_version=User.token_version + 1)
        .returning(User.token_version)
    )
    if new is None:
        raise Unauthenticated("This account no longer exists.")
    return int(new)


async def publish_version(redis: AnyRedis, user_id: int, version: int) -> None:
    """After the bump commits: every process sees the new version on its next check (past
    TOKEN_CHECK_CACHE_SECONDS in the other processes). A Redis that cannot take it now gets it
    from `retries` (until then its older copy lapses within VERSION_CACHE_SECONDS)."""
    passed.forget(user_id)
    await retries.write(redis, version_key(user_id), str(version).encode(), VERSION_CACHE_SECONDS)


def _vouch_seconds(claims: TokenClaims) -> int:
    return max(1, min(VOUCH_SECONDS, claims.expires_at - int(time.time())))


def _put_version(pipe: Any, user_id: int, version: int) -> None:
    """Queue the version read from PostgreSQL back into Redis (NX: a concurrent
    publish_version, a newer value, wins over this read)."""
    pipe.set(version_key(user_id), str(version).encode(), ex=VERSION_CACHE_SECONDS, nx=True)


def _put_mark(pipe: Any, claims: TokenClaims, denied: bool) -> None:
    """Queue the token's mark read from PostgreSQL back into Redis: REVOKED until the token
    expires, or VOUCHED for _vouch_seconds (NX: a concurrent revoke wins)."""
    seconds = max(1, claims.expires_at - int(time.time())) if denied else _vouch_seconds(claims)
    key = revoked_key(claims.user_id, claims.token_id)
    pipe.set(key, REVOKED if denied else VOUCHED, ex=seconds, nx=True)


async def _fill(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    claims: TokenClaims,
    version: bool,
    mark: bool,
) -> tuple[int, bool]:
    """(version, revoked) from PostgreSQL, written back to Redis (what was missing)."""
    current, denied = await _stored(sessions, claims)
    # NX: a concurrent publish_version or revoke (a newer value) must win over this read.
    with contextlib.suppress(*_REDIS_DOWN):
        pipe = redis.pipeline(transaction=False)
        if version:
            _put_version(pipe, claims.user_id, current)
        if mark:
            _put_mark(pipe, claims, denied)
        await pipe.execute()
    return current, denied


async def _stored(
    sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
) -> tuple[int, bool]:
    """(the user's token version, whether this token was logged out), one query."""
    revoked = select(RevokedToken.token_id).where(RevokedToken.token_id == claims.token_id).exists()
    try:
        async with sessions() as session:
            row = (
                await session.execute(
                    select(User.token_version, revoked).where(User.id == claims.user_id)
                )
            ).first()
    except (SQLAlchemyError, OSError) as exc:
        # Neither store can vouch for the token: a typed error (UNAVAILABLE when PostgreSQL is
        # out of reach, app/db/engine.py), never a silent accept.
        raise AppError("The token cannot be checked right now; try again shortly.") from exc
    if row is None:
        raise Unauthenticated("This account no longer exists; sign up again.")
    return int(row[0]), bool(row[1])


Checked = tuple[AnyRedis, async_sessionmaker[AsyncSession], TokenClaims]


async def check_many(
    redis: AnyRedis, sessions: async_sessionmaker[AsyncSession], many: Sequence[TokenClaims]
) -> list[AppError | None]:
    """`check` for many tokens at once (no pass cache): one Redis pipeline, one PostgreSQL
    round of the versions and marks Redis does not hold, one pipeline to cache those. Each
    token's answer in order: None when it is honoured, else the error `check` would raise."""
    if not many:
        return []
    users = sorted({c.user_id for c in many})
    marks: list[bytes | None] = [None] * len(many)
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for user_id in users:
                pipe.get(version_key(user_id))
            for claims in many:
                pipe.get(revoked_key(claims.user_id, claims.token_id))
            replies = await pipe.execute()
    except _REDIS_DOWN:
        versions: dict[int, int] = {}
        missing, redis_up = users, False
    else:
        versions = {u: int(v) for u, v in zip(users, replies, strict=False) if v is not None}
        marks = list(replies[len(users) :])
        missing, redis_up = [u for u in users if u not in versions], True
    unmarked = [c for c, m in zip(many, marks, strict=True) if m is None]
    failed: AppError | None = None
    denied_ids: set[str] = set()
    if missing or unmarked:
        try:
            stored, denied_ids = await _stored_many(
                sessions, missing, [c.token_id for c in unmarked]
            )
        except AppError as exc:
            failed = exc
        else:
            versions.update(stored)
            if redis_up:  # NX: a concurrent publish_version or revoke must win
                with contextlib.suppress(*_REDIS_DOWN):
                    async with redis.pipeline(transaction=False) as pipe:
                        for user_id, version in stored.items():
                            _put_version(pipe, user_id, version)
                        for claims in unmarked:
                            _put_mark(pipe, claims, claims.token_id in denied_ids)
                        await pipe.execute()
    out: list[AppError | None] = []
    for claims, mark in zip(many, marks, strict=True):
        current = versions.get(claims.user_id)
        if mark is None and failed is not None:
            out.append(failed)  # PostgreSQL could not say whether it was logged out
        elif current is None:
            out.append(failed or Unauthenticated("This account no longer exists; sign up again."))
        elif mark == REVOKED or (mark is None and claims.token_id in denied_ids):
            out.append(Revoked("This token was logged out; log in again."))
        elif claims.version < current:
            out.append(
                Revoked("Your password was changed since this token was issued; log in again.")
            )
        else:
            out.append(None)
    return out


async def _stored_many(
    sessions: async_sessionmaker[AsyncSession],
    user_ids: Sequence[int],
    token_ids: Sequence[str],
) -> tuple[dict[int, int], set[str]]:
    """The versions of `user_ids` and which of `token_ids` were logged out."""
    try:
        async with sessions() as session:
            versions: dict[int, int] = {}
            if user_ids:
                rows = await session.execute(
                    select(User.id, User.token_version).where(User.id.in_(user_ids))
                )
                versions = {int(u): int(v) for u, v in rows}
            denied: set[str] = set()
            if token_ids:
                found = await session.scalars(
                    select(RevokedToken.token_id).where(RevokedToken.token_id.in_(token_ids))
                )
                denied = set(found)
            return versions, denied
    except (SQLAlchemyError, OSError) as exc:
        raise AppError("The token cannot be checked right now; try again shortly.") from exc


async def _check_batch(items: list[Checked]) -> list[BaseException | None]:
    """Items of one batch grouped by the stores they name (one app in production)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (redis, sessions, _) in enumerate(items):
        groups.setdefault((id(redis), id(sessions)), []).append(i)
    out: list[BaseException | None] = [None] * len(items)
    for indexes in groups.values():
        redis, sessions, _ = items[indexes[0]]
        answers = await check_many(redis, sessions, [items[i][2] for i in indexes])
        for i, answer in zip(indexes, answers, strict=True):
            out[i] = answer
    return out


_together: Coalesced[Checked, None] = Coalesced(_check_batch)


async def check_together(
    redis: AnyRedis, sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
) -> None:
    """`check` (no pass cache), batched with the other sockets opening at the same time:
    a reconnect storm costs one pipeline and at most one query per batch, not per socket."""
    await _together((redis, sessions, claims))


class Watch:
    """The tokens of this process's open sockets, re-checked together every `interval`.

    Why one loop and not a task per socket: 20,000 sleeping tasks held ~1 KB each and woke
    for one Redis round trip each; here one batch of `check_many` per 500 sockets."""

    BATCH = 500

    def __init__(self) -> None:
        self._watched: dict[
            int, tuple[AnyRedis, async_sessionmaker[AsyncSession], TokenClaims]
        ] = {}
        self._on_revoked: dict[int, Callable[[], None]] = {}
        self._intervals: dict[int, float] = {}
        self._ids = itertools.count(1)
        self._task: asyncio.Task[None] | None = None

    def add(
        self,
        redis: AnyRedis,
        sessions: async_sessionmaker[AsyncSession],
        claims: TokenClaims,
        interval: float,
        on_revoked: Callable[[], None],
    ) -> int:
        """Watch one socket's token; `on_revoked` runs (once) when it is revoked."""
        key = next(self._ids)
        self._watched[key] = (redis, sessions, claims)
        self._on_revoked[key] = on_revoked
        self._intervals[key] = interval
        task = self._task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self._task = asyncio.ensure_future(self._loop())
        return key

    def remove(self, key: int) -> None:
        self._watched.pop(key, None)
        self._on_revoked.pop(key, None)
        self._intervals.pop(key, None)

    async def _loop(self) -> None:
        while self._watched:
            await asyncio.sleep(min(self._intervals.values()))
            keys = list(self._watched)
            for i in range(0, len(keys), self.BATCH):
                batch = [k for k in keys[i : i + self.BATCH] if k in self._watched]
                try:
                    answers = await _check_batch([self._watched[k] for k in batch])
                except Exception:  # Redis and Postgres both down: keep the sockets
                    continue
                for key, answer in zip(batch, answers, strict=True):
                    if isinstance(answer, Revoked) and key in self._watched:
                        callback = self._on_revoked[key]
                        self.remove(key)
                        callback()


watch = Watch()
