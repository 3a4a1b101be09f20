"""The bare-handler anchor (issue 24): a feed page with the product's I/O and nothing else.

    uvicorn benchmarks.anchor_server:app  (started by benchmarks/feed_wrk.py, variant "anchor")

A minimal ASGI endpoint, no GraphQL, no Strawberry, no Starlette: POST /graphql with the
JSON body the product gets (`variables.first`, `variables.after`, `variables.mode`; the
query text and documentId are ignored) and the `Authorization` bearer token. A next page
(`after` is a session cursor) does what the product's next page does for its I/O, directly:

1. the token's signature checked once per token and process (the product checks it once
   per process too, app.auth.tokens; the revocation round trip, once per token per second
   in the product, is left out);
2. the cursor checked and decoded with the product's codec (app.feed.cursor);
3. the feed session read: one GET through the product's FeedSessionStore (redis-py);
4. the authoritative filter: the product's own page query (app.feed.rows' `page_rows`,
   the home-feed rule with the authors' columns and the viewer's likes; `page_rows_rec`
   where the window holds ids the session froze as recommendations) over the same
   window of ids (the page plus its read-ahead), on a plain asyncpg pool of the product's
   size (10), no SQLAlchemy;
5. hydration and JSON: the rows to the Feed document's response shape
   (edges { cursor node { ...PostFields } } pageInfo sessionId degraded) with orjson.

tests/benchmarks/test_anchor.py checks the bytes equal the product's for the same page.
Left out on purpose, as not I/O of a page: the read budgets, impressions, metrics, the
verified window kept for an outage. A session used up before the page is full ends there
(the product continues below it with a keyset read; feed_wrk reads at most one session).

First pages (no `after`: how feed_wrk's "next" loop starts a session) are answered by the
product's FeedService in this process (app.state.create_state) and rendered the same way:
they are not counted in the next-page rate, and cost here what they cost in the product.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import asyncpg
import orjson
from starlette.types import Receive, Scope, Send

from app.auth.tokens import verify_token
from app.config import Settings, asyncpg_url
from app.db.models import FANOUT_PULL
from app.errors import AppError, Unauthenticated
from app.feed.cursor import CursorCodec, SessionPosition, fingerprint
from app.feed.modes import FeedMode
from app.feed.page import FeedPage
from app.feed.rows import FeedRow, filter_statements
from app.feed.sessions import FeedSessionStore
from app.media.hydrate import MediaView, page_media
from app.media.urls import MediaUrls, UrlPolicy
from app.posts.regions import serving_region
from app.state import AppState, create_state

POOL_SIZE = 10  # the product's engine pool (app.state.create_state)
FIRST_PAGE_POOL = 3
PAGE_MAX = 100
_JSON = [(b"content-type", b"application/json")]
_FANOUT = {FANOUT_PULL: "PULL"}


def _error(message: str, code: str) -> dict[str, Any]:
    return {"data": None, "errors": [{"message": message, "extensions": {"code": code}}]}


class Anchor:
    """The ASGI app: lifespan opens the pool, the Redis client and the product's state."""

    def __init__(self) -> None:
        self.settings: Settings | None = None
        self.pool: asyncpg.Pool | None = None
        self.state: AppState | None = None
        self.tokens: dict[str, int] = {}
        self.errors = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":  # /healthz, for the benchmark's readiness wait
            await send({"type": "http.response.start", "status": 200, "headers": _JSON})
            await send({"type": "http.response.body", "body": b'{"status":"ok"}'})
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        auth = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value
                break
        try:
            result = await self.page(bytes(body), auth)
        except AppError as exc:
            result = _error(str(exc), exc.code)
            self.errors += 1
            if self.errors <= 5:  # the benchmark's log shows what they were
                print(f"anchor: {exc.code}: {exc}", file=sys.stderr, flush=True)
        payload = orjson.dumps(result)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_JSON, (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.open(Settings())
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.close()
                if self.state is not None:
                    await self.state.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def open(self, settings: Settings, state: AppState | None = None) -> None:
        """The pool, the session store and the codec; `state` (the product's, for first
        pages) is made from `settings` unless given (the tests hand theirs)."""
        self.settings = settings
        self.pool = await asyncpg.create_pool(
            asyncpg_url(settings.database_url), min_size=1, max_size=POOL_SIZE
        )
        # First pages only (1 request in 25 of feed_wrk's loop): a small pool, so that the
        # anchor holds about the product's share of the shared server's connections.
        self.state = state or create_state(settings, pool_size=FIRST_PAGE_POOL)
        self.sessions = FeedSessionStore(self.state.redis, settings.feed_session_ttl_seconds)
        self.codec = CursorCodec(settings.secret_key)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    def viewer(self, auth: bytes | None) -> int:
        if auth is None or not auth.startswith(b"Bearer "):
            raise Unauthenticated("Not logged in.")
        token = auth[7:].decode()
        viewer = self.tokens.get(token)
        if viewer is None:
            assert self.settings is not None
            viewer = self.tokens[token] = verify_token(self.settings, token)[0]
        return viewer

    async def page(self, body: bytes, auth: bytes | None) -> dict[str, Any]:
        data = orjson.loads(body)
        variables = data.get("variables") or {}
        viewer = self.viewer(auth)
        first = variables.get("first", 20)
        if type(first) is not int or not 1 <= first <= PAGE_MAX:
            return _error("first must be between 1 and 100", "BAD_USER_INPUT")
        mode = FeedMode(str(variables.get("mode") or "RANKED").lower())
        fp = fingerprint(viewer, mode)
        after = variables.get("after")
        if after is None:
            assert self.state is not None
            first_page = await self.state.feed.page(viewer, mode, first, None)
            rendered = self.render(first_page, fp, False)
            await self.add_media([edge["node"] for edge in rendered["data"]["feed"]["edges"]])
            return rendered
        cursor = self.codec.decode(after, fp)
        if not isinstance(cursor, SessionPosition):
            return _error("anchor: session cursors only", "BAD_USER_INPUT")
        return await self.next_page(viewer, cursor, first, fp)

    async def next_page(
        self, viewer: int, cursor: SessionPosition, first: int, fp: str
    ) -> dict[str, Any]:
        """Session GET, the filter over the page and its read-ahead, JSON (module doc)."""
        frozen = await self.sessions.load(viewer, cursor.session_id)
        if frozen is None:
            return _error("This feed session has expired.", "CURSOR_EXPIRED")
        assert self.pool is not None
        ids, session, position = frozen.ids, frozen.session_id, cursor.position
        recommended = frozen.ranking.recommended
        edges: list[dict[str, Any]] = []
        encode = self.codec.encode
        while len(edges) < first and position < len(ids):
            chunk = ids[position : position + first - len(edges) + max(5, first)]  # as the product
            rec = [i for i in chunk if i in recommended]  # judged by their rule, as the product
            async with self.pool.acquire() as conn:
                if rec:
                    rows = await conn.fetch(
                        filter_statements(serving_region()).page_rows_rec, chunk, viewer, rec
                    )
                else:
                    rows = await conn.fetch(
                        filter_statements(serving_region()).page_rows, chunk, viewer
                    )
            found = {r[0]: r for r in rows}
            for offset, post_id in enumerate(chunk, position):
                row = found.get(post_id)
                if row is not None and len(edges) < first:
                    edges.append(
                        {
                            "cursor": encode(SessionPosition(session, offset + 1), fp),
                            "node": _post(row),
                        }
                    )
                    last = offset + 1
            position = last if len(edges) == first else position + len(chunk)
        await self.add_media([edge["node"] for edge in edges])
        has_next = position < len(ids) or frozen.tail is not None
        return _connection(edges, has_next, True, session, False)

    async def add_media(self, nodes: list[dict[str, Any]]) -> None:
        """Each node's `media`, read and minted as the product does: one query for the page
        (app.media.hydrate), URLs for this viewer (app.media.urls)."""
        assert self.pool is not None and self.state is not None and self.settings is not None
        urls = MediaUrls(self.state.media_store, UrlPolicy.of(self.settings))
        posts = [(int(n["id"]), n["visibility"].lower()) for n in nodes]
        async with self.pool.acquire() as conn:
            found = await page_media(conn.fetch, urls, posts)
        for node in nodes:
            node["media"] = [_media(m) for m in found[int(node["id"])]]

    def render(self, page: FeedPage, fp: str, has_previous: bool) -> dict[str, Any]:
        """A FeedService page (first pages) in the same shape."""
        authors, liked = page.extras.authors, page.extras.liked
        edges = []
        for row, position in page.rows:
            a = authors[row.author_id]
            edges.append(
                {
                    "cursor": self.codec.encode(position, fp),
                    "node": _node(row, row.post_id in liked, a.id, a.handle, a.display_name,
                                  a.fanout_mode),
                }
            )  # fmt: skip
        return _connection(edges, page.has_next, has_previous, page.session_id, page.degraded)


def _media(m: MediaView) -> dict[str, Any]:
    return {
        "url": m.url,
        "width": m.width,
        "height": m.height,
        "contentType": m.content_type,
        "alt": m.alt,
    }


def _post(r: Sequence[Any]) -> dict[str, Any]:
    """One _PAGE_ROWS row (FeedRow's nine columns, the author's five, the like) as PostFields."""
    return _node(FeedRow._make(r[:9]), r[14], r[1], r[9], r[10], r[13])


def _node(
    row: FeedRow, liked: bool, author: int, handle: str, name: str, fanout: int
) -> dict[str, Any]:
    edited = row.edited_at
    return {
        "id": str(row.post_id),
        "body": row.body,
        "visibility": row.visibility.upper(),
        "createdAt": row.created_at.isoformat(),
        "editedAt": edited.isoformat() if edited is not None else None,
        "likeCount": row.likes,
        "commentCount": row.comments,
        "viewerHasLiked": bool(liked),
        "media": [],  # filled per page (AnchorApp.add_media): one query for all its posts
        "author": {
            "id": str(author),
            "handle": handle,
            "displayName": name,
            "fanoutMode": _FANOUT.get(fanout, "PUSH"),
        },
    }


def _connection(
    edges: list[dict[str, Any]],
    has_next: bool,
    has_previous: bool,
    session: str | None,
    degraded: bool,
) -> dict[str, Any]:
    return {
        "data": {
            "feed": {
                "edges": edges,
                "pageInfo": {
                    "hasNextPage": has_next,
                    "hasPreviousPage": has_previous,
                    "startCursor": edges[0]["cursor"] if edges else None,
                    "endCursor": edges[-1]["cursor"] if edges else None,
                },
                "sessionId": session,
                "degraded": degraded,
            }
        }
    }


app = Anchor()
