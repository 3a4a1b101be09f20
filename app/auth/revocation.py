"""Is a valid token still honoured? Per-user token versions and a per-token deny-list.

docs/decisions/0013-token-revocation.md: changePassword bumps `users.token_version`, which
outdates every token issued before; logOut deny-lists one token id until that token expires.
The hot path (every authenticated request) costs one pipelined Redis round trip: the user's
cached version and the token's deny-list entry. PostgreSQL is read only when the cached
version is missing (first use, after its TTL, after Redis lost it) and while Redis fails.

A token that passed is not checked again in the same process for TOKEN_CHECK_CACHE_MS (1 s
by default; 0 checks every request): a client paging through its feed sends the same token
several times a second, and that round trip was ~4% of a feed page's API CPU plus Redis
work (docs/benchmarks.md, issue 10). The process that runs a logOut or changePassword
forgets the user's passed tokens at once; other API processes honour a revoked token for
at most that long. Failures are never remembered, nor a pass while Redis was down.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from redis.exceptions import RedisError
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.tokens import TokenClaims
from app.coalesce import Coalesced
from app.db.models import User
from app.errors import AppError, Unauthenticated
from app.redis_scripts import AnyRedis

# Every bump writes the cached version at once, so it is never stale while Redis answers; if
# that write fails (Redis down during changePassword), a stale copy lives at most this long.
VERSION_CACHE_SECONDS = 300
_REDIS_DOWN = (RedisError, OSError, TimeoutError)


def version_key(user_id: int) -> str:
    """`tv:{<user_id>}`: the user's current token version (decimal)."""
    return f"tv:{{{int(user_id)}}}"


def revoked_key(user_id: int, token_id: str) -> str:
    """`tr:{<user_id>}:<token_id>`: set while a logged-out token would still be unexpired."""
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


async def check(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    claims: TokenClaims,
    cache_seconds: float = 0.0,
) -> None:
    """Raise Revoked when `claims` belongs to a revoked token; return quietly otherwise.
    With `cache_seconds`, a pass is remembered that long in this process (module doc).

    Redis down: the version comes from PostgreSQL (a password change still locks old tokens
    out), the deny-list cannot be read (a logged-out token works until Redis is back).
    """
    if cache_seconds > 0 and passed.fresh(claims):
        return
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.get(version_key(claims.user_id))
        pipe.exists(revoked_key(claims.user_id, claims.token_id))
        cached, denied = await pipe.execute()
    except _REDIS_DOWN:
        cached, denied = None, 0
        current = await _stored_version(sessions, claims.user_id)
        cache_seconds = 0.0  # the deny-list was not read
    else:
        current = int(cached) if cached is not None else await _fill(redis, sessions, claims)
    if denied:
        raise Revoked("This token was logged out; log in again.")
    if claims.version < current:
        raise Revoked("Your password was changed since this token was issued; log in again.")
    if cache_seconds > 0:
        passed.remember(claims, cache_seconds)


async def revoke(redis: AnyRedis, claims: TokenClaims) -> None:
    """logOut: deny-list this one token until it would have expired anyway."""
    passed.forget(claims.user_id)
    ttl = max(1, claims.expires_at - int(time.time()))
    await redis.set(revoked_key(claims.user_id, claims.token_id), b"1", ex=ttl)


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
    TOKEN_CHECK_CACHE_MS in the other processes)."""
    passed.forget(user_id)
    await redis.set(version_key(user_id), str(version).encode(), ex=VERSION_CACHE_SECONDS)


async def _fill(
    redis: AnyRedis, sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
) -> int:
    current = await _stored_version(sessions, claims.user_id)
    # NX: a concurrent publish_version (a newer value) must win over this older read.
    with contextlib.suppress(*_REDIS_DOWN):
        await redis.set(
            version_key(claims.user_id), str(current).encode(), ex=VERSION_CACHE_SECONDS, nx=True
        )
    return current


async def _stored_version(sessions: async_sessionmaker[AsyncSession], user_id: int) -> int:
    try:
        async with sessions() as session:
            version = await session.scalar(select(User.token_version).where(User.id == user_id))
    except (SQLAlchemyError, OSError) as exc:
        # Neither store can vouch for the token: a typed error (UNAVAILABLE when PostgreSQL is
        # out of reach, app/db/engine.py), never a silent accept.
        raise AppError("The token cannot be checked right now; try again shortly.") from exc
    if version is None:
        raise Unauthenticated("This account no longer exists; sign up again.")
    return int(version)


Checked = tuple[AnyRedis, async_sessionmaker[AsyncSession], TokenClaims]


async def check_many(
    redis: AnyRedis, sessions: async_sessionmaker[AsyncSession], many: Sequence[TokenClaims]
) -> list[AppError | None]:
    """`check` for many tokens at once (no pass cache): one Redis pipeline, one SQL query
    for the versions Redis does not hold, one pipeline to cache those. Each token's answer
    in order: None when it is honoured, else the error `check` would raise for it."""
    if not many:
        return []
    users = sorted({c.user_id for c in many})
    denied: list[int] = [0] * len(many)
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for user_id in users:
                pipe.get(version_key(user_id))
            for claims in many:
                pipe.exists(revoked_key(claims.user_id, claims.token_id))
            replies = await pipe.execute()
    except _REDIS_DOWN:
        versions: dict[int, int] = {}
        missing, redis_up = users, False
    else:
        versions = {u: int(v) for u, v in zip(users, replies, strict=False) if v is not None}
        denied = [int(d) for d in replies[len(users) :]]
        missing, redis_up = [u for u in users if u not in versions], True
    failed: AppError | None = None
    if missing:
        try:
            stored = await _stored_versions(sessions, missing)
        except AppError as exc:
            failed = exc
        else:
            versions.update(stored)
            if redis_up:  # NX: a concurrent publish_version (a newer value) must win
                with contextlib.suppress(*_REDIS_DOWN):
                    async with redis.pipeline(transaction=False) as pipe:
                        for user_id, version in stored.items():
                            pipe.set(
                                version_key(user_id),
                                str(version).encode(),
                                ex=VERSION_CACHE_SECONDS,
                                nx=True,
                            )
                        await pipe.execute()
    out: list[AppError | None] = []
    for claims, deny in zip(many, denied, strict=True):
        current = versions.get(claims.user_id)
        if current is None:
            out.append(failed or Unauthenticated("This account no longer exists; sign up again."))
        elif deny:
            out.append(Revoked("This token was logged out; log in again."))
        elif claims.version < current:
            out.append(
                Revoked("Your password was changed since this token was issued; log in again.")
            )
        else:
            out.append(None)
    return out


async def _stored_versions(
    sessions: async_sessionmaker[AsyncSession], user_ids: Sequence[int]
) -> dict[int, int]:
    try:
        async with sessions() as session:
            rows = await session.execute(
                select(User.id, User.token_version).where(User.id.in_(user_ids))
            )
            return {int(u): int(v) for u, v in rows}
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
