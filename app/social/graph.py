"""Follow and block. The graph changes first (readers filter at once); timeline cleanup is
an outbox event handled asynchronously. Counters move in the same transaction as the rows.

Live "new posts" counts are not left to the cleanup: right after the commit, the mutation
calls `live_counts_stopped` (unfollow, block) or `live_counts_resumed` (follow) so the
viewer's open sockets drop the other user's posts at once and queued fan-out batches of them
count nothing (`app.realtime.counts.stop_counting`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from redis.exceptions import RedisError
from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import Block, Follow, User
from app.errors import BadInput, Forbidden, NotFound, Unavailable
from app.outbox import events
from app.posts.visibility import blocked_among, blocked_between
from app.realtime import counts
from app.realtime import queries as live_queries
from app.redis_scripts import AnyRedis

log = logging.getLogger("app.social")


async def _check_and_lock_pair(
    session: AsyncSession, viewer_id: int, target: User, verb: str
) -> None:
    """Refuse a change of the viewer with themself; lock both user rows in id order so
    concurrent changes of a pair never deadlock."""
    if target.id == viewer_id:
        raise BadInput(f"You cannot {verb} yourself.")
    await session.execute(
        select(User.id)
        .where(User.id.in_((viewer_id, target.id)))
        .order_by(User.id)
        .with_for_update()
    )


async def _adjust_counts(session: AsyncSession, follower: int, followee: int, delta: int) -> None:
    await session.execute(
        update(User).where(User.id == follower).values(following_count=User.following_count + delta)
    )
    await session.execute(
        update(User).where(User.id == followee).values(follower_count=User.follower_count + delta)
    )


async def is_blocked_either_way(session: AsyncSession, a: int, b: int) -> bool:
    return bool(await session.scalar(blocked_between(a, b)))


async def across_block(session: AsyncSession, viewer_id: int, user_ids: Sequence[int]) -> set[int]:
    """The users among `user_ids` on the other side of a block from the viewer: the viewer
    sees none of their graph (counts and lists), nor they the viewer's."""
    return set(await session.scalars(blocked_among(viewer_id, user_ids)))


async def _remove_follow(session: AsyncSession, follower: int, followee: int) -> bool:
    gone = await session.scalar(
        delete(Follow)
        .where(Follow.follower_id == follower, Follow.followee_id == followee)
        .returning(Follow.follower_id)
    )
    if gone is None:
        return False
    await _adjust_counts(session, follower, followee, -1)
    return True


async def follow(session: AsyncSession, viewer_id: int, target: User) -> bool:
    """Returns True when a new edge was made (False: already following)."""
    await _check_and_lock_pair(session, viewer_id, target, "follow")
    if target.canary and not await session.scalar(select(User.canary).where(User.id == viewer_id)):
        # The synthetic probe's canaries (decision 0065) are followed by canaries only; to
        # anyone else the handle answers as an unknown one does.
        raise NotFound(f"No user @{target.handle}.")
    if await is_blocked_either_way(session, viewer_id, target.id):
        raise Forbidden(f"You cannot follow @{target.handle}: one of you blocked the other.")
    made = await session.scalar(
        pg_insert(Follow)
        .values(follower_id=viewer_id, followee_id=target.id)
        .on_conflict_do_nothing()
        .returning(Follow.follower_id)
    )
    if made is None:
        return False
    await _adjust_counts(session, viewer_id, target.id, +1)
    await events.record(
        session, events.FOLLOWED, {"follower_id": viewer_id, "followee_id": target.id}
    )
    return True


async def unfollow(session: AsyncSession, viewer_id: int, target: User) -> bool:
    await _check_and_lock_pair(session, viewer_id, target, "unfollow")
    removed = await _remove_follow(session, viewer_id, target.id)
    if removed:
        await events.record(
            session, events.UNFOLLOWED, {"follower_id": viewer_id, "followee_id": target.id}
        )
    return removed


async def block(session: AsyncSession, viewer_id: int, target: User) -> bool:
    """Blocking also cuts follows both ways, so neither side keeps receiving the other."""
    await _check_and_lock_pair(session, viewer_id, target, "block")
    made = await session.scalar(
        pg_insert(Block)
        .values(blocker_id=viewer_id, blocked_id=target.id)
        .on_conflict_do_nothing()
        .returning(Block.blocker_id)
    )
    await _remove_follow(session, viewer_id, target.id)
    await _remove_follow(session, target.id, viewer_id)
    if made is not None:
        await events.record(
            session, events.BLOCKED, {"blocker_id": viewer_id, "blocked_id": target.id}
        )
    return made is not None


async def unblock(session: AsyncSession, viewer_id: int, target: User) -> bool:
    gone = await session.scalar(
        delete(Block)
        .where(Block.blocker_id == viewer_id, Block.blocked_id == target.id)
        .returning(Block.blocker_id)
    )
    return gone is not None


async def require_user(session: AsyncSession, handle: str) -> User:
    from app.users.service import by_handle

    user = await by_handle(session, handle)
    if user is None:
        raise NotFound(f"No user @{handle.strip().lstrip('@')}.")
    return user


async def live_counts_stopped(
    redis: AnyRedis,
    sessions: async_sessionmaker[AsyncSession],
    pairs: Sequence[tuple[int, int]],
    settings: Settings,
) -> None:
    """After an unfollow or block committed: for each (user, author) pair, the author's posts
    leave the user's live count now and are not counted later. Best effort, like every live
    notification: the graph change stands whatever happens here (logged)."""

    async def authors_of(post_ids: list[int]) -> Mapping[int, int]:
        async with sessions() as session:
            return await live_queries.post_authors(session, post_ids)

    try:
        await counts.stop_counting(redis, pairs, authors_of, settings)
    except (RedisError, SQLAlchemyError, OSError, Unavailable):
        log.warning("live counts not updated after a graph change %s", pairs, exc_info=True)


def live_counts_clock() -> int:
    """Now, in the live counts' clock (ms): taken before a follow, for `live_counts_resumed`."""
    return counts.now_ms()


async def live_counts_resumed(
    redis: AnyRedis, follower_id: int, followee_id: int, since_ms: int, settings: Settings
) -> None:
    """After a follow committed: the followee's posts made since `since_ms` (taken before the
    follow began) count again for the follower; older ones stay out of the count."""
    try:
        await counts.resume_counting(redis, follower_id, followee_id, since_ms, settings)
    except (RedisError, OSError):
        log.warning("live counts not resumed for %d -> %d", follower_id, followee_id, exc_info=True)
