"""Is a valid token still honoured? Per-user token versions and a per-token deny-list.

docs/decisions/0013-token-revocation.md: changePassword bumps `users.token_version`, which
outdates every token issued before; logOut deny-lists one token id until that token expires.
The hot path (every authenticated request) costs one pipelined Redis round trip: the user's
cached version and the token's deny-list entry. PostgreSQL is read only when the cached
version is missing (first use, after its TTL, after Redis lost it) and while Redis fails.
"""

from __future__ import annotations

import contextlib
import time

from redis.asyncio import Redis
from redis.exceptions import RedisError
from sqlalchemy import select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.tokens import TokenClaims
from app.db.models import User
from app.errors import AppError, Unauthenticated

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


async def check(
    redis: Redis, sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
) -> None:
    """Raise Revoked when `claims` belongs to a revoked token; return quietly otherwise.

    Redis down: the version comes from PostgreSQL (a password change still locks old tokens
    out), the deny-list cannot be read (a logged-out token works until Redis is back).
    """
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.get(version_key(claims.user_id))
        pipe.exists(revoked_key(claims.user_id, claims.token_id))
        cached, denied = await pipe.execute()
    except _REDIS_DOWN:
        cached, denied = None, 0
        current = await _stored_version(sessions, claims.user_id)
    else:
        current = int(cached) if cached is not None else await _fill(redis, sessions, claims)
    if denied:
        raise Revoked("This token was logged out; log in again.")
    if claims.version < current:
        raise Revoked("Your password was changed since this token was issued; log in again.")


async def revoke(redis: Redis, claims: TokenClaims) -> None:
    """logOut: deny-list this one token until it would have expired anyway."""
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


async def publish_version(redis: Redis, user_id: int, version: int) -> None:
    """After the bump commits: every process sees the new version on its next check."""
    await redis.set(version_key(user_id), str(version).encode(), ex=VERSION_CACHE_SECONDS)


async def _fill(
    redis: Redis, sessions: async_sessionmaker[AsyncSession], claims: TokenClaims
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
        # Neither store can vouch for the token: a typed INTERNAL, never a silent accept.
        raise AppError("The token cannot be checked right now; try again shortly.") from exc
    if version is None:
        raise Unauthenticated("This account no longer exists; sign up again.")
    return int(version)
