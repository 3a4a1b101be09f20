"""Authoritative checks for feed candidates, in SQL, against the CURRENT state.

Every id that leaves the read path passed the home-feed rule (app.posts.visibility,
`home_feed_sql`) in the same request: alive, not private (unless the viewer's own), author
followed now (or the viewer), no block either way, not restricted in the viewer's region
(app.posts.regions: each region has its statements, `filter_statements`); or, for an id
the recommendation source proposed (RANKED sessions only), the recommendation rule
(`recommended_sql`: alive, PUBLIC, author neither the viewer nor followed, no block).
Timelines, caches and sources only ever propose ids; these queries decide.

How the queries run: `Reads` (app.feed.reads), the driver's own SQL on the app engine's
pooled connections, no ORM session, no transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import FANOUT_PULL
from app.feed.constants import AFFINITY_COMMENTS, AFFINITY_LIKES, MAX_ID
from app.feed.reads import UNFILTERED
from app.feed.reads import Reads as Reads  # re-exported: the stages import it from here
from app.media.hydrate import MediaView
from app.posts.ids import created_ms
from app.posts.regions import current_region
from app.posts.visibility import (
    alive_sql,
    home_feed_sql,
    reaches_followers_sql,
    recommended_sql,
)


@dataclass(frozen=True, slots=True)
class FilterStatements:
    """The filter's statements for one region (the rule writes it as a literal: decision
    0088), built once per region by `filter_statements`."""

    rank_rows: str
    page_rows: str
    page_rows_newest: str
    rank_rows_rec: str
    page_rows_rec: str


@lru_cache(maxsize=64)
def filter_statements(region: str) -> FilterStatements:
    """The filter queries judged in `region` (see FilterStatements)."""
    # The filter ($1 = candidate ids, $2 = viewer), shared by every filter query; with
    # recommendations among the candidates ($3: those of $1 from app.feed.recommended) each
    # is judged by `recommended_sql`, the others by the home-feed rule (a followed source's
    # id never passes as recommended, nor the reverse); only when $3 is not empty.
    visible = f" p.id = ANY($1::bigint[]) AND {home_feed_sql('p', '$2', region)}"
    visible_rec = (
        f" p.id = ANY($1::bigint[]) AND CASE WHEN p.id = ANY($3::bigint[])"
        f" THEN ({recommended_sql('p', '$2', region)})"
        f" ELSE ({home_feed_sql('p', '$2', region)}) END"
    )
    rank = _RANK_ROWS.format(visible=visible)
    page = _PAGE_ROWS.format(visible=visible)
    statements = FilterStatements(
        rank_rows=rank,
        page_rows=page,
        page_rows_newest=page + " ORDER BY p.id DESC LIMIT $3",
        rank_rows_rec=_RANK_ROWS_REC.format(visible=visible_rec),
        page_rows_rec=_PAGE_ROWS.format(visible=visible_rec),
    )
    # Test-only (FEED_FAULT_SKIP_FILTER; refused in production): the queries without the
    # rule, so tests show the probe catches a broken filter ($2 stays: its type inferred).
    plain = (rank, page, statements.page_rows_newest)
    recs = (statements.rank_rows_rec, statements.page_rows_rec)
    UNFILTERED.update({q: q.replace(visible, _NO_RULE) for q in plain})
    UNFILTERED.update({q: q.replace(visible_rec, _NO_RULE_REC) for q in recs})
    return statements


# Ranking's view of the candidates: a RANKED first page filters ~600 of them, and only the
# 20 shown need the rest of the row (read afterwards with _PAGE_ROWS). As four arrays in one
# row, newest first: the driver decodes arrays in C, while 600 result rows cost ~1 ms of
# Python row handling per read. Sorted once, in the subquery, whose order a plain aggregate
# keeps (one ORDER BY per array_agg sorted the rows four times: 15% of the query's CPU for
# a heavy viewer; tests/feed/test_first_page_costs.py checks the order). `{visible}`: the
# filter.
_RANK_ROWS = """
    SELECT array_agg(s.id), array_agg(s.author_id), array_agg(s.like_count),
           array_agg(s.comment_count)
    FROM (SELECT p.id, p.author_id, p.like_count, p.comment_count FROM posts p WHERE{visible}
    ORDER BY p.id DESC) s"""

# With recommendations, those come first, then the followed ones newest first: the session's
# window (app.feed.first_page) is then two slices, not a pass over ~600 ids in Python.
_RANK_ROWS_REC = _RANK_ROWS.replace(
    "ORDER BY p.id DESC) s", "ORDER BY p.id = ANY($3::bigint[]) DESC, p.id DESC) s"
)

# A page's rows with everything its Post and User fields show: the author's columns and
# whether the viewer liked the post. Used where the candidates are few (a page plus slack),
# so authors and likes cost no round trips of their own. Keyset pages want the newest
# visible candidates only (`page_rows_newest`: the rest are not read at all).
_PAGE_ROWS = """
    SELECT p.id, p.author_id, p.like_count, p.comment_count, p.version, p.visibility,
           p.created_at, p.edited_at, p.body,
           u.handle, u.display_name, u.follower_count, u.following_count, u.fanout_mode,
           EXISTS (SELECT 1 FROM likes l WHERE l.user_id = $2 AND l.post_id = p.id)
    FROM posts p JOIN users u ON u.id = p.author_id
    WHERE{visible}"""

_NO_RULE = " p.id = ANY($1::bigint[]) AND $2::bigint IS NOT NULL"
_NO_RULE_REC = _NO_RULE + " AND $3::bigint[] IS NOT NULL"


def _own_posts_sql(limit: str, before: str, before_at: str) -> str:
    """The viewer's ($1) newest `limit` posts below post id `before`; `before_at` (the next
    ms after that id's) bounds the index range, so a deep page skips no newer rows."""
    return f"""
    SELECT id FROM posts WHERE author_id = $1 AND {alive_sql("posts")}
      AND created_at < {before_at} AND id < {before}
    ORDER BY created_at DESC, id DESC LIMIT {limit}
"""


# Where candidates come from besides Redis: the viewer's graph and own posts, plus (RANKED
# first pages only) the recent likes/comments that make author affinity. One round trip.
# $1 viewer, $2 "recent" (follows and mode switches whose async work may still run), $3-$5
# the own posts' limit and bounds.
#
# The pull sources are the followees in pull mode, followed or switched since $2. Read from
# the few pull-mode or just-switched users (partial indexes, migration 0005) joined to the
# viewer's follows, plus the follows made since $2 (an index range): checking each followee's
# mode instead cost a heavy viewer (1,159 followees) 1.8 ms per first page, now 0.4 ms.
_CONTEXT_SOURCES = f"""
    SELECT 1 AS kind, s.id, 0::bigint AS n FROM (
        SELECT u.id FROM users u
        WHERE (u.fanout_mode = {FANOUT_PULL} OR u.fanout_mode_changed_at >= $2)
          AND EXISTS (SELECT 1 FROM follows f WHERE f.follower_id = $1 AND f.followee_id = u.id)
        UNION
        SELECT f.followee_id FROM follows f WHERE f.follower_id = $1 AND f.created_at >= $2
    ) s
    UNION ALL
    SELECT 2, o.id, 0 FROM ({_own_posts_sql("$3", "$4", "$5")}) o
    UNION ALL
    SELECT 5, u.id, 0 FROM users u WHERE u.id = $1 AND NOT u.recommendations_enabled
"""
_OWN_POSTS_BEFORE = f"SELECT array_agg(id) FROM ({_own_posts_sql('$2', '$3', '$4')}) o"
_CONTEXT_AFFINITY = f"""
    UNION ALL
    SELECT 3, l.author_id, count(*) FROM (
        SELECT author_id FROM likes WHERE user_id = $1
        ORDER BY post_id DESC LIMIT {AFFINITY_LIKES}
    ) l GROUP BY l.author_id
    UNION ALL
    SELECT 4, c.post_author_id, count(*) FROM (
        SELECT post_author_id FROM comments WHERE author_id = $1
        ORDER BY id DESC LIMIT {AFFINITY_COMMENTS}
    ) c GROUP BY c.post_author_id
    UNION ALL
    SELECT 6, ff.author_id, ff.count FROM feed_feedback ff
    WHERE ff.user_id = $1 AND ff.kind = 'fewer'
"""
# One row per kind with two arrays (a heavy viewer's context is hundreds of rows otherwise).
_GROUPED = "SELECT kind, array_agg(id), array_agg(n) FROM ({}) c GROUP BY kind"
_VIEWER_CONTEXT = _GROUPED.format(_CONTEXT_SOURCES + _CONTEXT_AFFINITY)
_VIEWER_SOURCES = _GROUPED.format(_CONTEXT_SOURCES)

# A fingerprint of the pull-mode users (app.feed.context_cache.ModesEpoch): a switch to or
# from PULL moves the count or the versions' sum, a production switch also the newest time.
# Read through the partial index on pull-mode users (migration 0005): tens of rows.
_MODES_EPOCH = f"""
    SELECT count(*), coalesce(sum(fanout_mode_version), 0), max(fanout_mode_changed_at)
    FROM users WHERE fanout_mode = {FANOUT_PULL}
"""

# Fallback source when Redis cannot answer: newest posts of followees, bounded per author,
# strictly older than a post id (ids are time-ordered, so this is the keyset bound).
_FOLLOWEE_POSTS_BEFORE = f"""
    SELECT p.id FROM follows f
    CROSS JOIN LATERAL (
        SELECT id, created_at FROM posts
        WHERE author_id = f.followee_id AND {reaches_followers_sql("posts")}
          AND id < $2
        ORDER BY created_at DESC, id DESC LIMIT $3
    ) p
    WHERE f.follower_id = $1
    ORDER BY p.created_at DESC, p.id DESC LIMIT $3
"""

_RECENT_FOLLOWEE_POSTS = f"""
    SELECT p.id FROM follows f
    JOIN posts p ON p.author_id = f.followee_id AND p.created_at >= $2
    WHERE f.follower_id = $1 AND {reaches_followers_sql("p")}
    ORDER BY p.id DESC LIMIT $3
"""


class FeedRow(NamedTuple):
    """A candidate that passed the filter, as a page shows it."""

    post_id: int
    author_id: int
    likes: int
    comments: int
    version: int
    visibility: str
    created_at: datetime
    edited_at: datetime | None
    body: str

    @property
    def created_ms(self) -> int:
        return created_ms(self.post_id)


# tuple.__new__ is what FeedRow._make calls (then checks the length: r[:9] of _PAGE_ROWS'
# fifteen columns is always nine); a page makes ~36 rows (20 and the verified read-ahead).
_new_row = tuple.__new__


class RankColumns(NamedTuple):
    """The visible candidates as ranking reads them: parallel columns, newest first."""

    post_ids: list[int]
    author_ids: list[int]
    likes: list[int]
    comments: list[int]


@dataclass(slots=True)
class FeedPost:
    """A hydrated page post: the attributes the GraphQL Post type reads, without the cost of
    building ORM instances for rows that are only ever read."""

    id: int
    author_id: int
    created_at: datetime
    body: str
    visibility: str
    version: int
    edited_at: datetime | None
    like_count: int
    comment_count: int


@dataclass(slots=True)
class FeedAuthor:
    """A page post's author: the attributes the GraphQL User type reads."""

    id: int
    handle: str
    display_name: str
    follower_count: int
    following_count: int
    fanout_mode: int


@dataclass(slots=True)
class PageExtras:
    """What _PAGE_ROWS read besides the rows: authors, and the viewer's like per post id
    (`liked` holds the ones liked among `covered`, the post ids it answered for); `media`,
    each post's images with URLs minted for the viewer, only when a compiled document
    selects Post.media (app.api.schema.feed's complete_page_extras reads them, one query)."""

    authors: dict[int, FeedAuthor] = field(default_factory=dict)
    liked: set[int] = field(default_factory=set)
    covered: set[int] = field(default_factory=set)
    media: dict[int, list[MediaView]] = field(default_factory=dict)


@dataclass(frozen=True)
class ViewerContext:
    pull_authors: list[int]  # followees to pull from: pull mode, just followed, just switched
    own_posts: list[int]  # the viewer's newest `own_limit` posts below `own_before`
    affinity: dict[int, int]  # empty unless asked for (RANKED first pages)
    own_before: int = MAX_ID
    own_limit: int = 0
    recommendations: bool = True  # the viewer's setting (setRecommendations)
    # "show fewer like this" counts per author (showFewerLikeThis), read with the affinity
    fewer: dict[int, int] = field(default_factory=dict)

    def own_below(self, before: int) -> list[int] | None:
        """The viewer's posts below `before` that `own_posts` holds (all of them down to its
        oldest), or None when it was read below another bound and cut at `own_limit`: then
        some of those just below `before` may be missing, and they must be read again."""
        if before == self.own_before or len(self.own_posts) < self.own_limit:
            return [p for p in self.own_posts if p < before]
        return None


@lru_cache(maxsize=8)
def read_sessions(sessions: async_sessionmaker[AsyncSession]) -> async_sessionmaker[AsyncSession]:
    """The same engine and pool in autocommit, for ORM reads (DataLoaders, rare paths):
    a lone SELECT then needs no BEGIN/ROLLBACK round trips, and sees the same data."""
    engine = sessions.kw["bind"]
    return async_sessionmaker(
        engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False
    )


def _among(ids: Sequence[int], recommended: Collection[int]) -> list[int]:
    """The recommended ids among `ids` (the filter's $3)."""
    return [i for i in ids if i in recommended] if recommended else []


async def rank_rows(
    reads: Reads, viewer_id: int, ids: Sequence[int], recommended: Collection[int] = ()
) -> RankColumns:
    """The visible candidates' ranking columns, newest first; `recommended`: the ids judged
    by the recommendation rule (app.posts.visibility.recommended_sql), the rest by the home
    feed's; the visible recommended ones then come first (newest first too)."""
    if not ids:
        return RankColumns([], [], [], [])
    rec = _among(ids, recommended)
    statements = filter_statements(current_region())
    if rec:
        (found,) = await reads.all(statements.rank_rows_rec, list(ids), viewer_id, rec)
    else:
        (found,) = await reads.all(statements.rank_rows, list(ids), viewer_id)
    if found[0] is None:  # no visible rows: array_agg of nothing is NULL
        return RankColumns([], [], [], [])
    return RankColumns(found[0], found[1], found[2], found[3])


async def page_rows(
    reads: Reads,
    viewer_id: int,
    ids: Sequence[int],
    extras: PageExtras,
    newest: int | None = None,
    recommended: Collection[int] = (),
) -> dict[int, FeedRow]:
    """Visible rows among ids (only the `newest` ones by id, if given); their authors and the
    viewer's likes are added to `extras`. `recommended` as for `rank_rows` (never with
    `newest`: keyset pages have no recommendations)."""
    if not ids:
        return {}
    found: dict[int, FeedRow] = {}
    authors, liked = extras.authors, extras.liked
    rec = _among(ids, recommended)
    statements = filter_statements(current_region())
    if rec:
        rows = await reads.all(statements.page_rows_rec, list(ids), viewer_id, rec)
    elif newest is None:
        rows = await reads.all(statements.page_rows, list(ids), viewer_id)
    else:
        rows = await reads.all(statements.page_rows_newest, list(ids), viewer_id, newest)
    for r in rows:
        post_id, author_id = r[0], r[1]
        found[post_id] = _new_row(FeedRow, r[:9])  # FeedRow._make without its Python frame
        if author_id not in authors:
            authors[author_id] = FeedAuthor(author_id, r[9], r[10], r[11], r[12], r[13])
        if r[14]:
            liked.add(post_id)
    extras.covered.update(found)
    return found


def _own_args(before: int) -> tuple[int, datetime]:
    """(id bound, created_at bound) of the own-posts query: below `before`, by both."""
    return before, datetime.fromtimestamp((created_ms(before) + 1) / 1000, UTC)


async def own_posts_before(reads: Reads, viewer_id: int, before: int, limit: int) -> list[int]:
    """The viewer's newest `limit` posts below post id `before` (any visibility: a home feed
    shows all of the viewer's own posts, however far it is scrolled)."""
    rows = await reads.all(_OWN_POSTS_BEFORE, viewer_id, limit, *_own_args(before))
    return list(rows[0][0] or [])


async def viewer_context(
    reads: Reads,
    viewer_id: int,
    recent: datetime,
    own: int,
    affinity: bool = True,
    own_before: int = MAX_ID,
) -> ViewerContext:
    """Pull sources, the viewer's newest `own` posts below `own_before` and (if `affinity`)
    per-author engagement, in one query."""
    pull: list[int] = []
    mine: list[int] = []
    weights: dict[int, int] = {}
    fewer: dict[int, int] = {}
    recommendations = True
    statement = _VIEWER_CONTEXT if affinity else _VIEWER_SOURCES
    rows = await reads.all(statement, viewer_id, recent, own, *_own_args(own_before))
    for kind, idents, counts in rows:
        if kind == 1:
            pull = idents
        elif kind == 2:
            mine = idents
        elif kind == 5:
            recommendations = False
        elif kind == 6:  # "show fewer like this" per author (a ranking feature)
            fewer = dict(zip(idents, map(int, counts), strict=True))
        else:  # likes (3) and comments (4) per author add up
            for ident, n in zip(idents, counts, strict=True):
                weights[ident] = weights.get(ident, 0) + int(n)
    return ViewerContext(pull, mine, weights, own_before, own, recommendations, fewer)


async def followee_posts_before(
    reads: Reads, viewer_id: int, before_id: int, limit: int
) -> list[int]:
    return [r[0] for r in await reads.all(_FOLLOWEE_POSTS_BEFORE, viewer_id, before_id, limit)]


async def recent_followee_posts(
    reads: Reads, viewer_id: int, since: datetime, limit: int
) -> list[int]:
    return [r[0] for r in await reads.all(_RECENT_FOLLOWEE_POSTS, viewer_id, since, limit)]


async def modes_epoch(reads: Reads) -> tuple[object, ...]:
    """The pull-mode users' fingerprint (see _MODES_EPOCH)."""
    (row,) = await reads.all(_MODES_EPOCH)
    return tuple(row)
