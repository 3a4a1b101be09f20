"""The recommendation source (decision 0079): PUBLIC posts of authors the viewer does not follow
that the viewer's followees liked lately, read at ranking time with a hard bound, and the
"why" of a recommended post (which followees liked it, how many).

Bound: the viewer's newest FEED_RECOMMENDED_FOLLOWEES follows (an index-only range of
follows_follower_created_idx), each one's newest FEED_RECOMMENDED_LIKES_PER_FOLLOWEE likes of
posts younger than FEED_RECOMMENDED_WINDOW_SECONDS (likes_user_idx: post ids are time-ordered,
so "younger" is an id range), grouped by post, the posts that pass `recommended_sql` kept, most
liked first, LIMIT FEED_SOURCE_RECOMMENDED_MAX. Measured on the benchmark network (100k users,
1M likes): 0.6-1 ms for a light viewer, 2.5-5 ms for a heavy one (2,842 followees; 15-22 ms
without the followee bound); each viewer's answer is kept in process for
FEED_RECOMMENDED_CACHE_SECONDS. Precomputing per viewer by a job costs the same query for
every active viewer whether they read or not (docs/decisions/0079-candidate-sources.md).

The source only proposes: every recommended id is judged again by the filter under
`recommended_sql` (app.feed.rows), on the first page and on every later page of the session.
So the source reads the rule without its regional clause (decision 0088): a viewer's cached
ids serve requests judged in any region, and the filter drops what the viewer's region
restricts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

from app.config import Settings
from app.feed.filter import RECOMMENDED_USE, PageFilter
from app.feed.hot_cache import CoalescingCache
from app.feed.rows import FeedAuthor, Reads
from app.posts.ids import EPOCH_MS, SEQUENCE_BITS
from app.posts.visibility import blocked_sql, follows_sql, muted_sql, recommended_sql

# $1 viewer, $2 the oldest post id liked that counts, $3 likes per followee, $4 limit,
# $5 followees.
_RECOMMENDED = f"""
    SELECT array_agg(r.post_id) FROM (
        SELECT c.post_id FROM (
            SELECT l.post_id, count(*) AS n
            FROM (SELECT followee_id FROM follows WHERE follower_id = $1
                  AND NOT {muted_sql("$1", "followee_id")}
                  ORDER BY created_at DESC LIMIT $5) f
            CROSS JOIN LATERAL (
                SELECT post_id FROM likes
                WHERE user_id = f.followee_id AND post_id > $2
                ORDER BY post_id DESC LIMIT $3
            ) l
            GROUP BY l.post_id
        ) c JOIN posts p ON p.id = c.post_id
        WHERE {recommended_sql("p", "$1", None)}
        ORDER BY c.n DESC, c.post_id DESC LIMIT $4
    ) r
"""


# Why each of a page's recommended posts ($1 ids, $2 viewer): how many of the viewer's
# followees liked it, and the newest three of them with their user columns; never a user
# across a block from the viewer, nor one the viewer muted (whose likes the source skips too).
_LIKER = (
    f"{follows_sql('$2', 'l.user_id')} AND NOT {blocked_sql('$2', 'l.user_id')}"
    f" AND NOT {muted_sql('$2', 'l.user_id')}"
)
_WHY = f"""
    SELECT q.id, c.n, u.id, u.handle, u.display_name, u.follower_count, u.following_count,
           u.fanout_mode
    FROM unnest($1::bigint[]) AS q(id)
    CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM likes l WHERE l.post_id = q.id AND {_LIKER}
    ) c
    LEFT JOIN LATERAL (
        SELECT l.user_id, l.created_at FROM likes l WHERE l.post_id = q.id AND {_LIKER}
        ORDER BY l.created_at DESC, l.user_id DESC LIMIT {{likers}}
    ) w ON true
    LEFT JOIN users u ON u.id = w.user_id
    ORDER BY q.id, w.created_at DESC, w.user_id DESC
"""

# users: shown in a recommendation's "why" at most.
WHY_LIKERS = 3
_WHY_SQL = _WHY.format(likers=WHY_LIKERS)


@dataclass(slots=True)
class Why:
    """Why a post is recommended: `count` followees of the viewer liked it, `liked_by` the
    newest WHY_LIKERS of them (as the page's authors: FeedAuthor rows)."""

    count: int
    liked_by: list[FeedAuthor] = field(default_factory=list)

    @property
    def text(self) -> str:
        """ "Liked by @a", "Liked by @a and @b", "Liked by @a and 2 others"; a post whose
        likers since went (unliked, unfollowed, blocked) is "Suggested for you"."""
        if not self.liked_by:
            return "Suggested for you"
        first = f"@{self.liked_by[0].handle}"
        others = self.count - 1
        if others <= 0:
            return f"Liked by {first}"
        if others == 1 and len(self.liked_by) > 1:
            return f"Liked by {first} and @{self.liked_by[1].handle}"
        return f"Liked by {first} and {others} {'other' if others == 1 else 'others'}"


def since_id(window_seconds: float, now: float | None = None) -> int:
    """The smallest post id made within the last `window_seconds` (ids are time-ordered)."""
    ms = int(((time.time() if now is None else now) - window_seconds) * 1000) - EPOCH_MS
    return max(ms, 0) << SEQUENCE_BITS


async def recommended_ids(reads: Reads, viewer_id: int, settings: Settings) -> list[int]:
    """The recommendation source's ids for a viewer, most liked first (see module doc)."""
    rows = await reads.all(
        _RECOMMENDED,
        viewer_id,
        since_id(settings.feed_recommended_window_seconds),
        settings.feed_recommended_likes_per_followee,
        settings.feed_source_recommended_max,
        settings.feed_recommended_followees,
    )
    return list(rows[0][0] or [])


async def why(reads: Reads, viewer_id: int, ids: Sequence[int]) -> dict[int, Why]:
    """Why each of `ids` (recommended posts on a page) is recommended, read now."""
    if not ids:
        return {}
    found: dict[int, Why] = {}
    for r in await reads.all(_WHY_SQL, list(ids), viewer_id):
        entry = found.get(r[0])
        if entry is None:
            entry = found[r[0]] = Why(int(r[1]))
        if r[2] is not None:
            entry.liked_by.append(FeedAuthor(r[2], r[3], r[4], r[5], r[6], r[7]))
    return found


class RecommendationSource:
    """The "recommended" candidate source: each viewer's ids, kept in process briefly
    (`cached` answers without I/O, as the pulled authors' cache does)."""

    def __init__(self, reads: Reads, settings: Settings, filter_: PageFilter | None = None) -> None:
        self.reads = reads
        self.settings = settings
        # Candidates only (the filter judges each): on a replica that has the viewer's marks
        # (their follows, blocks, mutes), decision 0086.
        self.filter = filter_ or PageFilter(reads)
        self.cache: CoalescingCache[int, list[int]] = CoalescingCache(
            settings.feed_recommended_cache_seconds
        )

    def cached(self, viewer_id: int) -> list[int] | None:
        """The viewer's ids while the cache holds them (the same list object each time, so
        the merge memo sees them unchanged), else None."""
        return self.cache.fresh(viewer_id)

    async def read_recommended(self, viewer_id: int) -> list[int]:
        found = await self.cache.get_many([viewer_id], self._load)
        return found.get(viewer_id, [])

    async def _load(self, viewers: list[int]) -> dict[int, list[int]]:
        result = {}
        for viewer_id in viewers:  # one at a time: a load is one viewer's page
            ids = await self.filter.routed(
                RECOMMENDED_USE, viewer_id, partial(_ids, viewer_id, self.settings), _no_authors
            )
            held = self.cache.last(viewer_id)
            result[viewer_id] = held if held is not None and held == ids else ids
        return result


async def _ids(viewer_id: int, settings: Settings, reads: Reads) -> list[int]:
    return await recommended_ids(reads, viewer_id, settings)


def _no_authors(_: list[int]) -> tuple[int, ...]:
    """Candidate ids only: the viewer's own marks concern them (the filter judges them)."""
    return ()
