"""Who may see a post: the one home of the visibility-and-block rule.

The rule, read against the current rows (never a cache):
- a deleted post is seen by nobody; the author sees every other post of theirs;
- a block, either way, lets nothing flow between two users: neither sees the other's posts,
  comments, or graph (follower and following lists and counts: decision 0018);
- PUBLIC posts are seen by anyone (anonymous readers see only these), FOLLOWERS posts by the
  author's followers, PRIVATE posts by the author alone;
- a home feed, a timeline, a live count or a pull shows another user's post only to a
  follower, so there a post "reaches followers" when it is alive and not PRIVATE;
- a recommendation (a RANKED feed's out-of-network post) is a post the viewer could open
  anyway and does not get from following: alive, PUBLIC, another user's, an author the
  viewer does not follow, no block either way (`recommended_sql`);
- negative feedback (decision 0076) narrows what a viewer's feeds and live counts show, never
  what they may see: a post the viewer hid and every post of an author the viewer muted are
  left out of the home feed (`home_feed_sql`), recommendations (`recommended_sql`) and live
  counts, while the author's profile and the post by id still show them (`visible_sql` does
  not apply it);
- regional policy (decision 0088): a post an operator restricted in a region is seen by
  nobody judged in that region (app.posts.regions: the serving region or a trusted edge's),
  followers included, except its author, who still sees it everywhere; in other regions
  nothing changes. Live counts, which workers raise without knowing a viewer's region,
  leave out a post restricted anywhere (`unrestricted_sql`): a count may miss a post, never
  announce one the viewer may not open.

Every query that returns posts or routes them to users builds its condition from here. The
rule is written once, as SQL fragments: queries kept as SQL text for speed (the read path's
driver SQL, the hub's and the write path's queries) splice the `*_sql` builders in, and ORM
queries use `visible_to`, the same fragment as a SQLAlchemy clause. Builders take SQL
expressions (a table alias such as "p", a parameter such as "$2" or ":viewer").
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ARRAY, BigInteger, BindParameter, TextClause, bindparam, text

from app.db.models import Visibility
from app.posts.regions import current_region, region_literal

_PUBLIC = f"'{Visibility.PUBLIC.value}'"
_FOLLOWERS = f"'{Visibility.FOLLOWERS.value}'"
_PRIVATE = f"'{Visibility.PRIVATE.value}'"


def alive_sql(post: str) -> str:
    """The post (alias `post`) is not deleted."""
    return f"{post}.deleted_at IS NULL"


def proven_sql(post: str) -> str:
    """The post is alive as far as this region can prove (decision 0087): one homed in a
    region whose tombstones this database cannot confirm now (that region's heartbeat on the
    priority path late) is not served to readers until it can. The read rules only: the
    write path (fan-out, live counts) keeps routing it, so timelines converge. One InitPlan
    a query; with one region it reads an empty table."""
    return (
        f"{alive_sql(post)}"
        f" AND ({post}.id & 15)::smallint <> ALL ((SELECT region_unconfirmed())::smallint[])"
    )


def reaches_followers_sql(post: str) -> str:
    """The post may reach its author's followers: alive and not PRIVATE."""
    return f"{alive_sql(post)} AND {post}.visibility <> {_PRIVATE}"


def allowed_in_region_sql(post: str, region: str) -> str:
    """The post (alias `post`) is not restricted in `region` (a region name, checked and
    written as a literal). Reads the post's own `restricted_regions` (NULL for all but the
    few restricted posts), so it adds no table to the query and costs a feed page nothing
    measurable (decision 0088)."""
    return (
        f"({post}.restricted_regions IS NULL"
        f" OR {region_literal(region)} <> ALL({post}.restricted_regions))"
    )


def unrestricted_sql(post: str) -> str:
    """The post is restricted in no region: what live counts announce (they are raised by
    workers that do not know the viewer's region)."""
    return f"{post}.restricted_regions IS NULL"


def follows_sql(follower: str, followee: str) -> str:
    """`follower` follows `followee` now."""
    return (
        "EXISTS (SELECT 1 FROM follows fo"
        f" WHERE fo.follower_id = {follower} AND fo.followee_id = {followee})"
    )


def blocked_sql(a: str, b: str) -> str:
    """Either user blocked the other: nothing flows between them.

    Two EXISTS, one per direction, rather than one with an OR inside: PostgreSQL turns each
    into a hashed subplan when `b` varies over many rows (a feed filter: the viewer's blocks
    read once per query), where the OR form ran two bitmap index scans per candidate (a
    heavy viewer's RANKED first page: ~2,300 of its ~4,800 buffer reads)."""
    return (
        f"(EXISTS (SELECT 1 FROM blocks bl WHERE bl.blocker_id = {a} AND bl.blocked_id = {b})"
        f" OR EXISTS (SELECT 1 FROM blocks bl WHERE bl.blocker_id = {b} AND bl.blocked_id = {a}))"
    )


def hidden_sql(viewer: str, post: str) -> str:
    """The viewer hid the post (alias `post`): hidePost, showFewerLikeThis.

    One EXISTS on the primary key (user_id, post_id): over a feed's candidates PostgreSQL
    reads the viewer's hidden rows once into a hashed subplan (or an anti-join), as for
    `blocked_sql`; a viewer holds at most FEEDBACK_MAX_HIDDEN_POSTS of them."""
    return (
        "EXISTS (SELECT 1 FROM hidden_posts hp"
        f" WHERE hp.user_id = {viewer} AND hp.post_id = {post}.id)"
    )


def muted_sql(viewer: str, author: str) -> str:
    """The viewer muted the author (muteAuthor): one EXISTS on the primary key, read once per
    query into a hashed subplan when `author` varies over a feed's candidates."""
    return (
        f"EXISTS (SELECT 1 FROM mutes mu WHERE mu.muter_id = {viewer} AND mu.muted_id = {author})"
    )


def feedback_allows_sql(post: str, viewer: str) -> str:
    """The viewer's negative feedback lets the post (alias `post`) into their feeds: not
    hidden, its author not muted. For every source of feed candidates (the home feed here,
    recommendations), never for `visible_sql`."""
    return f"NOT {hidden_sql(viewer, post)} AND NOT {muted_sql(viewer, f'{post}.author_id')}"


def visible_sql(post: str, viewer: str | None, region: str) -> str:
    """The viewer (None: anonymous) judged in `region` may see the post when they ask for it
    by id or author."""
    regional = allowed_in_region_sql(post, region)
    if viewer is None:
        return f"{proven_sql(post)} AND {post}.visibility = {_PUBLIC} AND {regional}"
    author = f"{post}.author_id"
    allowed = (
        f"({post}.visibility = {_PUBLIC}"
        f" OR ({post}.visibility = {_FOLLOWERS} AND {follows_sql(viewer, author)}))"
    )
    others = f"{allowed} AND {regional} AND NOT {blocked_sql(viewer, author)}"
    return f"{proven_sql(post)} AND ({author} = {viewer} OR ({others}))"


def home_feed_sql(post: str, viewer: str, region: str) -> str:
    """The post may be in the home feed of the viewer judged in `region`: `visible_sql`
    narrowed to the viewer's own posts and the posts of authors they follow (so PUBLIC and
    FOLLOWERS alike), less the viewer's negative feedback on others' posts
    (`feedback_allows_sql`: no hidden post, no muted author's post; one's own posts cannot
    be hidden). Home feeds, their sessions' pages and keyset pages all filter through this,
    so a hide, a mute or a regional restriction applies to an open session's next page.

    Inside the OR's second branch, each EXISTS is a hashed subplan (the viewer's hides and
    mutes read once per query): at the caps (2,000 hides, 1,000 mutes) a heavy viewer's
    600-candidate filter read 4,246 buffers against 4,226 without them, where a top-level
    NOT EXISTS for hides became an anti-join probing the index per candidate (5,434;
    docs/decisions/0076-negative-feedback.md)."""
    author = f"{post}.author_id"
    others = (
        f"{post}.visibility <> {_PRIVATE} AND {allowed_in_region_sql(post, region)}"
        f" AND {follows_sql(viewer, author)}"
        f" AND NOT {blocked_sql(viewer, author)} AND {feedback_allows_sql(post, viewer)}"
    )
    return f"{proven_sql(post)} AND ({author} = {viewer} OR ({others}))"


def public_sql(post: str) -> str:
    """The post is PUBLIC: anyone may see it."""
    return f"{post}.visibility = {_PUBLIC}"


def recommended_sql(post: str, viewer: str, region: str | None) -> str:
    """The post may be recommended to the viewer judged in `region` (the recommendation
    source's rule, decision 0079): alive, PUBLIC, not restricted in the region, by another
    user whom the viewer does not follow (a followed
    author's post is the home feed's, `home_feed_sql`), no block either way. Stricter than
    `visible_sql`, never wider: a recommendation is a post the viewer could open anyway.
    The viewer's negative feedback applies as in the home feed (`feedback_allows_sql`).
    `region` None: no regional clause, for the recommendation source only (its per-viewer
    cache serves every region; the filter then judges each id in the viewer's region)."""
    author = f"{post}.author_id"
    regional = "" if region is None else f" AND {allowed_in_region_sql(post, region)}"
    return (
        f"{proven_sql(post)} AND {public_sql(post)}{regional}"
        f" AND {author} <> {viewer} AND NOT {follows_sql(viewer, author)}"
        f" AND NOT {blocked_sql(viewer, author)}"
        f" AND {feedback_allows_sql(post, viewer)}"
    )


def visible_to(viewer_id: int | None, region: str | None = None) -> TextClause:
    """`visible_sql` as a clause for ORM queries over the `posts` table (`select(Post)`),
    judged in `region` (default: the current request's, app.posts.regions)."""
    judged = current_region() if region is None else region
    if viewer_id is None:
        return text(visible_sql("posts", None, judged))
    return text(visible_sql("posts", ":visible_to_viewer", judged)).bindparams(
        _user_id("visible_to_viewer", viewer_id)
    )


def blocked_between(a: int, b: int) -> TextClause:
    """`blocked_sql` as a boolean SELECT for two known users."""
    return text(f"SELECT {blocked_sql(':blocked_a', ':blocked_b')}").bindparams(
        _user_id("blocked_a", a), _user_id("blocked_b", b)
    )


def blocked_among(viewer_id: int, user_ids: Sequence[int]) -> TextClause:
    """`blocked_sql` as a SELECT of the users among `user_ids` across a block from the
    viewer (either way)."""
    query = (
        "SELECT u.id FROM unnest(CAST(:among AS bigint[])) AS u(id)"
        f" WHERE {blocked_sql(':among_viewer', 'u.id')}"
    )
    return text(query).bindparams(
        _user_id("among_viewer", viewer_id),
        bindparam("among", list(user_ids), type_=ARRAY(BigInteger)),
    )


def _user_id(name: str, value: int) -> BindParameter[int]:
    return bindparam(name, value, type_=BigInteger)
