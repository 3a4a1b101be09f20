"""DataLoaders built per request: one IN query per kind of data, results in key order.

Each batch takes its own pooled session: Strawberry resolves sibling fields concurrently
and one AsyncSession must never be shared across concurrent awaits. The sessions are in
autocommit (read_sessions): a lone SELECT needs no BEGIN/ROLLBACK round trips around it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property

from sqlalchemy import ARRAY, BigInteger, Select, cast, func, select, true, tuple_
from sqlalchemy.orm import InstrumentedAttribute, aliased
from strawberry.dataloader import DataLoader

from app.db.models import Comment, Follow, Like, Mute, Post, User
from app.feed.rows import FeedAuthor, FeedPost, PageExtras, read_sessions
from app.media.hydrate import MediaView, page_media
from app.media.urls import MediaUrls, UrlPolicy
from app.posts.visibility import visible_to
from app.social.comments import comments_pages
from app.social.follow_lists import Direction, follow_pages
from app.social.graph import across_block
from app.state import AppState

Position = tuple[datetime, int]  # keyset (created_at, id), as app.posts.keyset decodes it
AuthorPage = tuple[int, int, Position | None]
CommentsKey = tuple[int, int, Position | None]  # (post id, page size, position)
CommentsPage = tuple[list[Comment], bool]
FollowKey = tuple[int, Direction, int, Position | None]  # (listed user id, ...)
FollowPage = tuple[list[tuple[User, datetime]], bool]
MediaKey = tuple[int, str]  # (post id, its visibility): which URLs the post's images get


def _pages_query(
    authors: Sequence[int], size: int, position: Position | None, viewer_id: int | None
) -> Select[Post]:
    """Each author's newest `size` + 1 visible posts older than `position`, newest first."""
    author = func.unnest(cast(list(authors), ARRAY(BigInteger))).table_valued("id").render_derived()
    page = select(Post).where(Post.author_id == author.c.id, visible_to(viewer_id))
    if position is not None:
        page = page.where(tuple_(Post.created_at, Post.id) < tuple_(*position))
    page = page.order_by(Post.created_at.desc(), Post.id.desc()).limit(size + 1)
    lateral = page.subquery().lateral()
    row = aliased(Post, lateral)
    return (
        select(row)
        .select_from(author)
        .join(lateral, true())
        .order_by(lateral.c.author_id, lateral.c.created_at.desc(), lateral.c.id.desc())
    )


class Loaders:
    """Each DataLoader is built on first use: a websocket holds a context (and so a Loaders)
    per socket and per operation for hours, and a live subscription never loads anything;
    eight idle loaders were ~4 KB of every socket (docs/benchmarks/archive.md, issue 24)."""

    def __init__(self, state: AppState, viewer_id: int | None) -> None:
        self.state = state
        self.viewer_id = viewer_id

    @cached_property
    def user_by_id(self) -> DataLoader[int, User | FeedAuthor | None]:
        return DataLoader(self._users)

    @cached_property
    def visible_post_by_id(self) -> DataLoader[int, Post | FeedPost | None]:
        return DataLoader(self._posts)

    @cached_property
    def viewer_follows_user(self) -> DataLoader[int, bool]:
        return DataLoader(self._viewer_follows)

    @cached_property
    def viewer_mutes_user(self) -> DataLoader[int, bool]:
        return DataLoader(self._viewer_mutes)

    @cached_property
    def viewer_liked_post(self) -> DataLoader[int, bool]:
        return DataLoader(self._viewer_liked)

    @cached_property
    def author_posts(self) -> DataLoader[AuthorPage, tuple[list[Post], bool]]:
        """(author id, page size, keyset position or None) -> (posts, has more): `User.posts`
        of every user in a response in one query per distinct (size, position)."""
        return DataLoader(self._author_posts)

    @cached_property
    def post_comments(self) -> DataLoader[CommentsKey, CommentsPage]:
        """`Post.comments` and `User.followers`/`following` alike: one query per distinct
        (size, position) (and direction) per level of the response, not one per parent."""
        return DataLoader(self._post_comments)

    @cached_property
    def follow_lists(self) -> DataLoader[FollowKey, FollowPage]:
        return DataLoader(self._follow_lists)

    @cached_property
    def post_media(self) -> DataLoader[MediaKey, list[MediaView]]:
        """`Post.media` of every post in a response in one query, URLs minted for the
        viewer (app.media.hydrate). Only posts the viewer may see reach a Post object."""
        return DataLoader(self._post_media)

    @cached_property
    def graph_hidden(self) -> DataLoader[int, bool]:
        """Per user: across a block from the viewer (their graph is hidden; decision 0018)."""
        return DataLoader(self._graph_hidden)

    async def _users(self, ids: Sequence[int]) -> list[User | FeedAuthor | None]:
        async with read_sessions(self.state.sessions)() as session:
            rows = {u.id: u for u in await session.scalars(select(User).where(User.id.in_(ids)))}
        return [rows.get(i) for i in ids]

    async def _posts(self, ids: Sequence[int]) -> list[Post | FeedPost | None]:
        async with read_sessions(self.state.sessions)() as session:
            found = await session.scalars(
                select(Post).where(Post.id.in_(ids), visible_to(self.viewer_id))
            )
            rows = {p.id: p for p in found}
        return [rows.get(i) for i in ids]

    async def _author_posts(self, keys: Sequence[AuthorPage]) -> list[tuple[list[Post], bool]]:
        """Per (size, position): one LATERAL query, each author's page read through the
        (author_id, created_at, id) index with its own LIMIT, like a keyset page."""
        groups: dict[tuple[int, Position | None], list[int]] = defaultdict(list)
        for author_id, size, position in keys:
            groups[size, position].append(author_id)
        pages: dict[AuthorPage, tuple[list[Post], bool]] = {}
        async with read_sessions(self.state.sessions)() as session:
            for (size, position), authors in groups.items():
                found: dict[int, list[Post]] = defaultdict(list)
                for post in await session.scalars(
                    _pages_query(authors, size, position, self.viewer_id)
                ):
                    found[post.author_id].append(post)
                for author_id in authors:
                    rows = found.get(author_id, [])
                    pages[author_id, size, position] = (rows[:size], len(rows) > size)
        return [pages[k] for k in keys]

    async def _post_comments(self, keys: Sequence[CommentsKey]) -> list[CommentsPage]:
        groups: dict[tuple[int, Position | None], list[int]] = defaultdict(list)
        for post_id, size, position in keys:
            groups[size, position].append(post_id)
        pages: dict[CommentsKey, CommentsPage] = {}
        async with read_sessions(self.state.sessions)() as session:
            for (size, position), post_ids in groups.items():
                found = await comments_pages(session, self.viewer_id, post_ids, size, position)
                for post_id, page in found.items():
                    pages[post_id, size, position] = page
        return [pages[k] for k in keys]

    async def _follow_lists(self, keys: Sequence[FollowKey]) -> list[FollowPage]:
        groups: dict[tuple[Direction, int, Position | None], list[int]] = defaultdict(list)
        for user_id, direction, size, position in keys:
            groups[direction, size, position].append(user_id)
        pages: dict[FollowKey, FollowPage] = {}
        async with read_sessions(self.state.sessions)() as session:
            for (direction, size, position), user_ids in groups.items():
                found = await follow_pages(
                    session, self.viewer_id, user_ids, direction, size, position
                )
                for user_id, page in found.items():
                    pages[user_id, direction, size, position] = page
        return [pages[k] for k in keys]

    async def _post_media(self, keys: Sequence[MediaKey]) -> list[list[MediaView]]:
        urls = MediaUrls(self.state.media_store, UrlPolicy.of(self.state.settings))
        # The read path's driver SQL on the same engine (app.feed.reads), not an ORM session.
        found = await page_media(self.state.feed.reads.all, urls, keys)
        return [found[post_id] for post_id, _ in keys]

    async def _graph_hidden(self, user_ids: Sequence[int]) -> list[bool]:
        if self.viewer_id is None:
            return [False] * len(user_ids)
        async with read_sessions(self.state.sessions)() as session:
            hidden = await across_block(session, self.viewer_id, user_ids)
        return [u in hidden for u in user_ids]

    async def _viewer_follows(self, user_ids: Sequence[int]) -> list[bool]:
        return await self._viewer_has(Follow.followee_id, Follow.follower_id, user_ids)

    async def _viewer_mutes(self, user_ids: Sequence[int]) -> list[bool]:
        return await self._viewer_has(Mute.muted_id, Mute.muter_id, user_ids)

    async def _viewer_liked(self, post_ids: Sequence[int]) -> list[bool]:
        return await self._viewer_has(Like.post_id, Like.user_id, post_ids)

    async def _viewer_has(
        self,
        key: InstrumentedAttribute[int],
        viewer: InstrumentedAttribute[int],
        keys: Sequence[int],
    ) -> list[bool]:
        """Per key, whether a row (viewer, key) exists: one IN query on the viewer's rows."""
        if self.viewer_id is None:
            return [False] * len(keys)
        async with read_sessions(self.state.sessions)() as session:
            query = select(key).where(viewer == self.viewer_id, key.in_(keys))
            found = set(await session.scalars(query))
        return [k in found for k in keys]

    def prime_posts(self, posts: Sequence[Post | FeedPost]) -> None:
        """Posts already loaded through a visibility-checked query need no second lookup."""
        for post in posts:
            self.visible_post_by_id.prime(post.id, post)

    def prime_page(self, posts: Sequence[Post | FeedPost], extras: PageExtras) -> None:
        """A feed page arrives with its authors and the viewer's likes (read with its rows),
        so `author` and `viewerHasLiked` resolve without a batch query each."""
        self.prime_posts(posts)
        for author_id, author in extras.authors.items():
            self.user_by_id.prime(author_id, author)
        for post in posts:
            if post.id in extras.covered:
                self.viewer_liked_post.prime(post.id, post.id in extras.liked)
