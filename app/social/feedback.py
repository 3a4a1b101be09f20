"""Negative feedback: hide a post, mute an author, "show fewer like this" (decision 0076).

Each is a row the one visibility rule reads (app.posts.visibility: `hidden_sql`,
`muted_sql`, applied by `home_feed_sql` to home feeds and their open sessions, never by
`visible_sql`: a profile or a post by id still shows what the viewer hid or muted), so a
change holds from the viewer's next page on. A mute is not a block: follows stay, and the
muted user is told nothing and sees what they saw before. Every call is idempotent and
bounded: at most FEEDBACK_MAX_MUTES mutes (one more is refused), at most
FEEDBACK_MAX_HIDDEN_POSTS hidden posts (the oldest go first), as many "fewer" rows.

Live counts are the caller's step after the commit, as for follow and block
(app.social.graph `live_counts_stopped` / `live_counts_resumed`; `live_count_hidden` here).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from redis.exceptions import RedisError
from sqlalchemy import delete, func, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import FeedFeedback, HiddenPost, Mute, Post, User
from app.errors import BadInput, NotFound
from app.posts.visibility import visible_to
from app.realtime import counts
from app.redis_scripts import AnyRedis

log = logging.getLogger("app.social")

FEWER = "fewer"  # FeedFeedback.kind of "show fewer like this"

# The rows of one viewer beyond the newest `:cap`, oldest first (the cap's trim).
_TRIM_HIDDEN = text(
    """
    DELETE FROM hidden_posts WHERE user_id = :viewer AND post_id IN (
        SELECT post_id FROM hidden_posts WHERE user_id = :viewer
        ORDER BY created_at DESC, post_id DESC OFFSET :cap)
    """
)
_TRIM_FEEDBACK = text(
    """
    DELETE FROM feed_feedback WHERE user_id = :viewer AND (author_id, kind) IN (
        SELECT author_id, kind FROM feed_feedback WHERE user_id = :viewer
        ORDER BY updated_at DESC, author_id DESC OFFSET :cap)
    """
)


async def _visible_post(session: AsyncSession, viewer_id: int, post_id: int) -> Post:
    """The post, if the viewer may see it at all (by id); else NOT_FOUND, as `post(id)`."""
    post = await session.scalar(select(Post).where(Post.id == post_id, visible_to(viewer_id)))
    if post is None:
        raise NotFound("No such post.")
    return post


async def hide_post(
    session: AsyncSession, viewer_id: int, post_id: int, max_hidden: int
) -> tuple[Post, bool]:
    """Hide a post the viewer can see from their feeds: (the post, whether this call hid it).

    Not one's own post (BAD_USER_INPUT: delete it or make it PRIVATE): the feed rule then
    checks hides on others' posts only, where they cost a hashed subplan (decision 0076).
    Past `max_hidden` the viewer's oldest hides are dropped."""
    post = await _visible_post(session, viewer_id, post_id)
    if post.author_id == viewer_id:
        raise BadInput("You cannot hide your own post: delete it or make it PRIVATE.")
    made = await session.scalar(
        pg_insert(HiddenPost)
        .values(user_id=viewer_id, post_id=post_id)
        .on_conflict_do_nothing()
        .returning(HiddenPost.post_id)
    )
    if made is not None:
        await session.execute(_TRIM_HIDDEN, {"viewer": viewer_id, "cap": max_hidden})
    return post, made is not None


async def unhide_post(session: AsyncSession, viewer_id: int, post_id: int) -> bool:
    """Show a hidden post in the viewer's feeds again; whether it was hidden. A post neither
    hidden nor visible to the viewer answers NOT_FOUND, as a post that does not exist."""
    gone = await session.scalar(
        delete(HiddenPost)
        .where(HiddenPost.user_id == viewer_id, HiddenPost.post_id == post_id)
        .returning(HiddenPost.post_id)
    )
    if gone is None:
        await _visible_post(session, viewer_id, post_id)
        return False
    return True


async def show_fewer(
    session: AsyncSession, viewer_id: int, post_id: int, max_hidden: int
) -> tuple[Post, bool]:
    """ "Show fewer like this": hide the post and count one 'fewer' for its author (a ranking
    feature, a recommendation source's demotion). Asked again of the same post it counts
    nothing more; one's own post is refused as by `hide_post`. (post, whether it was new)."""
    post, made = await hide_post(session, viewer_id, post_id, max_hidden)
    if made:
        stmt = pg_insert(FeedFeedback).values(
            user_id=viewer_id, author_id=post.author_id, kind=FEWER, count=1
        )
        await session.execute(
            stmt.on_conflict_do_update(
                index_elements=[FeedFeedback.user_id, FeedFeedback.author_id, FeedFeedback.kind],
                set_={"count": FeedFeedback.count + 1, "updated_at": func.now()},
            )
        )
        await session.execute(_TRIM_FEEDBACK, {"viewer": viewer_id, "cap": max_hidden})
    return post, made


async def _check_target(session: AsyncSession, viewer_id: int, target: User, verb: str) -> None:
    if target.id == viewer_id:
        raise BadInput(f"You cannot {verb} yourself.")
    if target.canary and not await session.scalar(select(User.canary).where(User.id == viewer_id)):
        # The probe's canaries (decision 0065) answer others as unknown handles do.
        raise NotFound(f"No user @{target.handle}.")


async def mute(session: AsyncSession, viewer_id: int, target: User, max_mutes: int) -> bool:
    """Mute the target: whether this call muted them. Refused past `max_mutes` (the viewer's
    row is locked, so concurrent mutes cannot pass the cap together)."""
    await _check_target(session, viewer_id, target, "mute")
    await session.execute(select(User.id).where(User.id == viewer_id).with_for_update())
    if await is_muted(session, viewer_id, target.id):
        return False
    held = await session.scalar(
        select(func.count()).select_from(Mute).where(Mute.muter_id == viewer_id)
    )
    if (held or 0) >= max_mutes:
        raise BadInput(f"You mute {max_mutes} users already: unmute one first.")
    made = await session.scalar(
        pg_insert(Mute)
        .values(muter_id=viewer_id, muted_id=target.id)
        .on_conflict_do_nothing()
        .returning(Mute.muted_id)
    )
    return made is not None


async def unmute(session: AsyncSession, viewer_id: int, target: User) -> bool:
    """Unmute the target: whether they were muted."""
    await _check_target(session, viewer_id, target, "unmute")
    gone = await session.scalar(
        delete(Mute)
        .where(Mute.muter_id == viewer_id, Mute.muted_id == target.id)
        .returning(Mute.muted_id)
    )
    return gone is not None


async def is_muted(session: AsyncSession, viewer_id: int, author_id: int) -> bool:
    found = await session.scalar(
        select(Mute.muted_id).where(Mute.muter_id == viewer_id, Mute.muted_id == author_id)
    )
    return found is not None


async def muted_users(session: AsyncSession, viewer_id: int, limit: int) -> Sequence[User]:
    """The users the viewer mutes, most recently muted first (at most `limit`)."""
    rows = await session.scalars(
        select(User)
        .join(Mute, Mute.muted_id == User.id)
        .where(Mute.muter_id == viewer_id)
        .order_by(Mute.created_at.desc(), Mute.muted_id.desc())
        .limit(limit)
    )
    return rows.all()


async def fewer_counts(
    session: AsyncSession, viewer_id: int, author_ids: Sequence[int]
) -> dict[int, int]:
    """How often the viewer asked "show fewer" of each of these authors (absent: never): a
    ranking feature, and a recommendation source's demotion. One query on the primary key."""
    if not author_ids:
        return {}
    rows = await session.execute(
        select(FeedFeedback.author_id, FeedFeedback.count).where(
            FeedFeedback.user_id == viewer_id,
            FeedFeedback.kind == FEWER,
            FeedFeedback.author_id.in_(list(author_ids)),
        )
    )
    return {int(a): int(c) for a, c in rows}


async def live_count_hidden(
    redis: AnyRedis, viewer_id: int, post_ids: Sequence[int], settings: Settings
) -> None:
    """After a hide committed: the post leaves the viewer's live "new posts" count now, and a
    fan-out batch or pull-mode delivery already under way counts it nothing (a tombstone, as
    for a delete, app.realtime.counts `forget_for_user`). Best effort, as every live
    notification: the hide stands whatever happens here (logged)."""
    try:
        await counts.forget_for_user(redis, viewer_id, post_ids, settings)
    except (RedisError, OSError):
        log.warning("live count not updated after hiding %s", post_ids, exc_info=True)
