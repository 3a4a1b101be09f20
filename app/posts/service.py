"""Post writes and lookups. Each write and its outbox event commit in one transaction; no
fan-out here. Who may see a post is decided by app.posts.visibility."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import IdempotencyKey, Post, Visibility
from app.errors import BadInput, Forbidden, NotFound
from app.outbox import events
from app.posts.ids import created_ms
from app.posts.visibility import visible_to
from app.text_rules import Kind, clean

IDEMPOTENCY_KEY_MAX = 100


def clean_body(body: str, limit: int) -> str:
    """NFC, newline and tab the only controls (app.text_rules); length after that."""
    body = clean("post", body, Kind.BODY).strip()
    if not body:
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
) -> Post:
    """Insert the post and a PostCreated event together; a repeated key returns the first post.

    The idempotency row is claimed before the post exists: a concurrent duplicate blocks on
    the key's primary key until the first transaction commits, then finds its post.
    """
    body = clean_body(body, max_chars)
    checked = check_visibility(visibility)
    now = datetime.now(UTC)
    # Millisecond precision: the id and the timeline score carry ms, so SQL order by
    # (created_at, id) and Redis order by (score, id) must agree.
    now = now.replace(microsecond=now.microsecond // 1000 * 1000)
    post_id: int = (await session.execute(select(func.next_post_id(now)))).scalar_one()
    if idempotency_key is not None:
        if not 1 <= len(idempotency_key) <= IDEMPOTENCY_KEY_MAX:
            raise BadInput(f"An idempotency key is 1-{IDEMPOTENCY_KEY_MAX} characters.")
        claimed = await session.scalar(
            pg_insert(IdempotencyKey)
            .values(user_id=author_id, key=idempotency_key, post_id=post_id)
            .on_conflict_do_nothing()
            .returning(IdempotencyKey.post_id)
        )
        if claimed is None:
            existing = await session.scalar(
                select(Post)
                .join(IdempotencyKey, IdempotencyKey.post_id == Post.id)
                .where(IdempotencyKey.user_id == author_id, IdempotencyKey.key == idempotency_key)
            )
            if existing is None:
                raise NotFound("The post created with this idempotency key no longer exists.")
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


async def set_visibility(
    session: AsyncSession, viewer_id: int, post_id: int, visibility: str
) -> Post:
    checked = check_visibility(visibility)
    post = await _own_post_for_update(session, viewer_id, post_id)
    if post.visibility != checked:
        widened = post.visibility == Visibility.PRIVATE
        post.visibility = checked.value
        post.version += 1
        await session.flush()
        await events.record(session, events.POST_VISIBILITY_CHANGED, _event_payload(post))
        if widened:
            # Followers may see it now, but its fan-out skipped it (or will: it read PRIVATE):
            # the split a new post gets, again. Replays are no-ops (same batch ids, same ZADD).
            await events.record(session, events.POST_CREATED, _event_payload(post))
    return post


async def delete_post(session: AsyncSession, viewer_id: int, post_id: int) -> None:
    """Tombstone only: timelines keep the id and the read path drops it at hydration."""
    post = await _own_post_for_update(session, viewer_id, post_id)
    await session.execute(
        update(Post).where(Post.id == post.id).values(deleted_at=datetime.now(UTC))
    )
    await events.record(session, events.POST_DELETED, _event_payload(post))


async def author_posts_page(
    session: AsyncSession,
    viewer_id: int | None,
    author_id: int,
    first: int,
    after: tuple[datetime, int] | None,
) -> tuple[list[Post], bool]:
    """Keyset page over (created_at, id) descending; one extra row tells if more exist."""
    query = select(Post).where(Post.author_id == author_id, visible_to(viewer_id))
    if after is not None:
        query = query.where(tuple_(Post.created_at, Post.id) < tuple_(*after))
    query = query.order_by(Post.created_at.desc(), Post.id.desc()).limit(first + 1)
    rows = list(await session.scalars(query))
    return rows[:first], len(rows) > first
