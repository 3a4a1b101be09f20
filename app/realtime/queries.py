"""The SQL the hub needs: whom a subscriber follows in pull mode, their posts since the last
reset, and the final check that a pull-mode post may be announced to these users; the
authors of counted posts, for an unfollow, block or mute to remove the pair's posts from a
count; and whom each user mutes, for the hub to keep those pairs stopped."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import BigInteger

from app.db.models import FANOUT_PULL
from app.posts.ids import created_ms
from app.posts.visibility import (
    blocked_sql,
    hidden_sql,
    muted_sql,
    reaches_followers_sql,
    unrestricted_sql,
)

# The follow edge `f` carries posts: no block either way between its two users.
_NOT_BLOCKED = f"NOT {blocked_sql('f.follower_id', 'f.followee_id')}"
# ... nor a mute of the followee by the follower (decision 0076: the follow stays).
_NOT_MUTED = f"NOT {muted_sql('f.follower_id', 'f.followee_id')}"

_PULL_FOLLOWEES = text(
    f"""
    SELECT f.follower_id, f.followee_id FROM follows f JOIN users u ON u.id = f.followee_id
    WHERE f.follower_id = ANY(:users) AND u.fanout_mode = :pull AND {_NOT_BLOCKED}
    """
).bindparams(bindparam("users", type_=ARRAY(BigInteger)))

# Followers-only and public posts both go to followers only (a home feed is followers'
# business); private ones never get here. Follows and blocks are read now, not from the
# hub's routing cache, so an unfollow or block is honoured at once.
_ALLOWED = text(
    f"""
    SELECT f.follower_id FROM follows f
    WHERE f.followee_id = :author AND f.follower_id = ANY(:users) AND {_NOT_BLOCKED}
      AND {_NOT_MUTED}
    """
).bindparams(bindparam("users", type_=ARRAY(BigInteger)))


_AUTHORS = text("SELECT id, author_id FROM posts WHERE id = ANY(:ids)").bindparams(
    bindparam("ids", type_=ARRAY(BigInteger))
)


async def pull_followees(session: AsyncSession, user_ids: Sequence[int]) -> dict[int, set[int]]:
    """user id -> pull-mode authors they follow (users following none are absent)."""
    out: dict[int, set[int]] = {}
    if not user_ids:
        return out
    rows = await session.execute(_PULL_FOLLOWEES, {"users": list(user_ids), "pull": FANOUT_PULL})
    for follower, followee in rows:
        out.setdefault(follower, set()).add(followee)
    return out


async def allowed_recipients(
    session: AsyncSession, author_id: int, user_ids: Sequence[int]
) -> set[int]:
    """Those of `user_ids` who follow the author now, block neither way and do not mute
    the author."""
    if not user_ids:
        return set()
    rows = await session.execute(_ALLOWED, {"author": author_id, "users": list(user_ids)})
    return {r[0] for r in rows}


async def post_authors(session: AsyncSession, post_ids: Sequence[int]) -> dict[int, int]:
    """post id -> author id (ids of posts that no longer exist are absent); one PK lookup."""
    if not post_ids:
        return {}
    rows = await session.execute(_AUTHORS, {"ids": list(post_ids)})
    return {r[0]: r[1] for r in rows}


# Posts a user may be told about now, for many (user, post) pairs at once: the author is
# followed, since before the post (a refollow does not bring old posts back as "new"), no
# block either way, not muted, the post not hidden by the user, still visible, restricted in
# no region (a count does not know the user's region: decision 0088).
_COUNTABLE_PAIRS = text(
    f"""
    SELECT pair.user_id, p.id, p.author_id
    FROM unnest(:users, :ids) AS pair(user_id, post_id)
    JOIN posts p ON p.id = pair.post_id
    JOIN follows f ON f.follower_id = pair.user_id AND f.followee_id = p.author_id
    WHERE f.created_at < p.created_at AND {reaches_followers_sql("p")} AND {unrestricted_sql("p")}
      AND {_NOT_BLOCKED} AND {_NOT_MUTED} AND NOT {hidden_sql("pair.user_id", "p")}
    """
).bindparams(bindparam("users", type_=ARRAY(BigInteger)), bindparam("ids", type_=ARRAY(BigInteger)))

_MUTED_BY = text(
    "SELECT muter_id, array_agg(muted_id) FROM mutes WHERE muter_id = ANY(:users) GROUP BY 1"
).bindparams(bindparam("users", type_=ARRAY(BigInteger)))


async def muted_authors_many(
    session: AsyncSession, user_ids: Sequence[int]
) -> dict[int, list[int]]:
    """user id -> the authors they mute (users muting nobody are absent); one query on the
    primary key's prefix."""
    if not user_ids:
        return {}
    rows = await session.execute(_MUTED_BY, {"users": list(user_ids)})
    return {r[0]: list(r[1]) for r in rows}


async def countable_entries_many(
    session: AsyncSession, entries_by_user: dict[int, Sequence[Sequence[int]]]
) -> dict[int, list[tuple[int, int, int]]]:
    """Those of each user's entries ((post id, ms), e.g. a subscriber's catch-up from the
    timeline) the user may be told about now, as (post id, ms, author id): the graph is read
    now, so a timeline the async cleanup has not reached yet (or a fan-out that lagged behind
    it) brings back nothing of someone unfollowed or blocked. One query for all users."""
    users: list[int] = []
    ids: list[int] = []
    ms: dict[int, int] = {}
    for user_id, entries in entries_by_user.items():
        for entry in entries:
            users.append(user_id)
            ids.append(int(entry[0]))
            ms[int(entry[0])] = int(entry[1])
    out: dict[int, list[tuple[int, int, int]]] = {u: [] for u in entries_by_user}
    if not ids:
        return out
    rows = await session.execute(_COUNTABLE_PAIRS, {"users": users, "ids": ids})
    for user_id, post_id, author_id in rows:
        out[user_id].append((post_id, ms[post_id], author_id))
    return out


_POSTS_SINCE_EACH = text(
    f"""
    SELECT a.author_id, p.id
    FROM unnest(:authors) AS a(author_id)
    CROSS JOIN LATERAL (
      SELECT id FROM posts
      WHERE author_id = a.author_id AND created_at > :since
        AND {reaches_followers_sql("posts")} AND {unrestricted_sql("posts")}
      ORDER BY created_at DESC, id DESC LIMIT :n
    ) p
    """
).bindparams(bindparam("authors", type_=ARRAY(BigInteger)))


async def posts_since_each(
    session: AsyncSession, author_ids: Sequence[int], since_ms: int, limit: int
) -> dict[int, list[tuple[int, int]]]:
    """Each author's newest `limit` announceable posts newer than `since_ms`, as entries.
    Enough for every user whose own mark is at or after `since_ms`: a user's newest `limit`
    posts are each among their author's newest `limit`."""
    out: dict[int, list[tuple[int, int]]] = {a: [] for a in author_ids}
    if not author_ids:
        return out
    since = datetime.fromtimestamp(since_ms / 1000, UTC)
    rows = await session.execute(
        _POSTS_SINCE_EACH, {"authors": list(author_ids), "since": since, "n": limit}
    )
    for author_id, post_id in rows:
        out[author_id].append((post_id, created_ms(post_id)))
    return out
