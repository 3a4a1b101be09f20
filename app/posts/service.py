"""Post writes and lookups. Each write and its outbox event commit in one transaction; no
fan-out here. Who may see a post is decided by app.posts.visibility."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IdempotencyKey, Post, PostWidening, Visibility
from app.errors import BadInput, Forbidden, NotFound, RateLimited
from app.outbox import events
from app.posts.constants import IDEMPOTENCY_KEY_MAX as IDEMPOTENCY_KEY_MAX
from app.posts.constants import IDEMPOTENCY_KEY_TTL_SECONDS as IDEMPOTENCY_KEY_TTL_SECONDS
from app.posts.constants import WIDENING_WINDOW as WIDENING_WINDOW
from app.posts.constants import WIDENINGS_PER_POST_PER_HOUR
from app.posts.ids import created_ms
from app.posts.visibility import visible_to
from app.text_rules import Kind, clean

# The one answer of a replayed key whose object was deleted since, at every creating
# mutation (NOT_FOUND, as for a post or comment that is gone): never the tombstone as if
# live, never a second object.
DELETED_POST = "The post created with this idempotency key was deleted."


def key_expired(created_at: Any, ttl_seconds: int) -> ColumnElement[bool]:
    """SQL: a key row first used `ttl_seconds` or more ago (expired: free for a new use)."""
    return created_at < func.now() - timedelta(seconds=ttl_seconds)  # type: ignore[no-any-return]


def clean_body(body: str, limit: int, allow_empty: bool = False) -> str:
    """NFC, newline and tab the only controls (app.text_rules); length after that. Empty only
    when `allow_empty` (a post with images)."""
    body = clean("post", body, Kind.BODY).strip()
    if not body and not allow_empty:
        raise BadInput("A post cannot be empty.")
    if len(body) > limit:
        raise BadInput(f"A post is at most {limit} characters (this one has {len(body)}).")
    return body


def check_visibility(visibility: str) -> Visibility:
    try:
        return Visibility(visibility)
    except ValueError:
        allowed = ", ".join(v.value for v in Visibility)
        raise BadInput(f"Visibility must be one of {allowed}.") from None


def _event_payload(post: Post) -> dict[str, object]:
    return {
        "post_id": post.id,
        "author_id": post.author_id,
        "created_ms": created_ms(post.id),
        "visibility": post.visibility,
        "version": post.version,
    }


async def create_post(
    session: AsyncSession,
    author_id: int,
    body: str,
    visibility: str,
    idempotency_key: str | None,
    max_chars: int,
    key_ttl_seconds: int = IDEMPOTENCY_KEY_TTL_SECONDS,
    *,
    allow_empty: bool = False,
    on_created: Callable[[Post], Awaitable[None]] | None = None,
) -> Post:
    """Insert the post and a PostCreated event together; a repeated key returns the first post
    (NOT_FOUND once that post was deleted), and a key first used `key_ttl_seconds` or more
    ago is taken over by the new post. `on_created` runs in the same transaction for a new
    post only, never for a replay (the post's images: app.media.uploads.attach); an empty
    body only with `allow_empty`.

    The idempotency row is claimed before the post exists: a concurrent duplicate blocks on
    the key's primary key until the first transaction commits, then finds its post.
    """
    body = clean_body(body, max_chars, allow_empty)
    checked = check_visibility(visibility)
    now = datetime.now(UTC)
    # Millisecond precision: the id and the timeline score carry ms, so SQL order by
    # (created_at, id) and Redis order by (score, id) must agree.
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)
    post_id: int = (await session.execute(select(func.next_post_id(now)))).scalar_one()
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= IDEMPOTENCY_KEY_MAX:
            raise BadInput(f"An idempotency key is 1-{IDEMPOTENCY_KEY_MAX} characters.")
        claim = pg_insert(IdempotencyKey).values(
            user_id=author_id, key=idempotency_key, post_id=post_id
        )
        claimed = await session.scalar(
            claim.on_conflict_do_update(
                index_elements=[IdempotencyKey.user_id, IdempotencyKey.key],
                set_={"post_id": claim.excluded.post_id, "created_at": func.now()},
                where=key_expired(IdempotencyKey.created_at, key_ttl_seconds),
            ).returning(IdempotencyKey.post_id)
        )
        if claimed is None:
            existing = await session.scalar(
                select(Post)
                .join(IdempotencyKey, IdempotencyKey.post_id == Post.id)
                .where(IdempotencyKey.user_id == author_id, IdempotencyKey.key == idempotency_key)
            )
            if existing is None or existing.deleted_at is not None:
                raise NotFound(DELETED_POST)
            return existing
    post = Post(
        id=post_id,
        author_id=author_id,
        created_at=now,
        body=body,
        visibility=checked.value,
        version=1,
        like_count=0,
        comment_count=0,
    )
    session.add(post)
    await session.flush()
    if on_created is not None:
        await on_created(post)
    await events.record(session, events.POST_CREATED, _event_payload(post))
    return post


async def visible_post(session: AsyncSession, viewer_id: int | None, post_id: int) -> Post:
    post = await session.scalar(select(Post).where(Post.id == post_id, visible_to(viewer_id)))
    if post is None:
        raise NotFound("No such post.")
    return post


async def _own_post_for_update(session: AsyncSession, viewer_id: int, post_id: int) -> Post:
    post = await session.scalar(
        select(Post).where(Post.id == post_id, visible_to(viewer_id)).with_for_update()
    )
    if post is None:
        raise NotFound("No such post.")
    if post.author_id != viewer_id:
        raise Forbidden("Only the author can change this post.")
    return post


async def edit_post(
    session: AsyncSession, viewer_id: int, post_id: int, body: str, max_chars: int
) -> Post:
    body = clean_body(body, max_chars)
    post = await _own_post_for_update(session, viewer_id, post_id)
    post.body = body
    post.version += 1
    post.edited_at = datetime.now(UTC)
    await session.flush()
    await events.record(session, events.POST_EDITED, _event_payload(post))
    return post


async def _admit_widening(session: AsyncSession, post_id: int, per_hour: int) -> None:
    """A widening fans the post out again (every active follower's timeline): at most
    `per_hour` of one post within WIDENING_WINDOW, else RATE_LIMITED with the seconds until
    the oldest leaves the window. The post's row is locked: widenings of a post count one
    at a time."""
    window = func.now() - WIDENING_WINDOW
    count, wait = (
        await session.execute(
            select(
                func.count(),
                func.ceil(func.extract("epoch", func.min(PostWidening.widened_at) - window)),
            ).where(PostWidening.post_id == post_id, PostWidening.widened_at > window)
        )
    ).one()
    if count >= per_hour:
        retry_after = max(1, int(wait or 1))
        raise RateLimited(
            f"This post was made visible again {count} times within the hour, the most that"
            f" reach followers' feeds; try again in {retry_after} s.",
            retry_after=retry_after,
        )


async def set_visibility(
    session: AsyncSession,
    viewer_id: int,
    post_id: int,
    visibility: str,
    widenings_per_hour: int = WIDENINGS_PER_POST_PER_HOUR,
) -> Post:
    """Change who may see the post (read paths recheck at once). A widening (PRIVATE ->
    FOLLOWERS/PUBLIC) fans the post out again, deduplicated per (post, version), counted as
    a post in the author's posting-rate window, and bounded to `widenings_per_hour` per post
    (`_admit_widening`); narrowing is never refused (decision 0067)."""
    checked = check_visibility(visibility)
    post = await _own_post_for_update(session, viewer_id, post_id)
    if post.visibility != checked:
        widened = post.visibility == Visibility.PRIVATE
        if widened:
            await _admit_widening(session, post.id, widenings_per_hour)
        post.visibility = checked.value
        post.version += 1
        await session.flush()
        await events.record(session, events.POST_VISIBILITY_CHANGED, _event_payload(post))
        if widened:
            # Followers may see it now, but its fan-out skipped it (or will: it read PRIVATE):
            # the split a new post gets, again, under job ids of (post, version) (a replay
            # is dropped), skipped if a later widening overtook it (app.fanout.service).
            session.add(PostWidening(post_id=post.id, version=post.version))
            await session.flush()
            payload = {**_event_payload(post), "widening": post.version}
            await events.record(session, events.POST_CREATED, payload)
    return post


async def delete_post(session: AsyncSession, viewer_id: int, post_id: int) -> None:
    """Tombstone only: timelines keep the id and the read path drops it at hydration."""
    post = await _own_post_for_update(session, viewer_id, post_id)
    await session.execute(
        update(Post).where(Post.id == post.id).values(deleted_at=datetime.now(UTC))
    )
    await events.record(session, events.POST_DELETED, _event_payload(post))
