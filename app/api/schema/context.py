"""Per-request context: the viewer, shared resources and this request's DataLoaders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.websockets import WebSocket

from app.api.schema.loaders import Loaders
from app.auth import revocation
from app.auth.tokens import TokenClaims, header_claims
from app.client_address import budget_address, trusted_peer
from app.config import Settings
from app.db.watermarks import record_narrowing
from app.errors import AppError, Unauthenticated
from app.posts.regions import check_region, judge_in
from app.ratelimit import check_rate
from app.state import AppState


@dataclass
class Context:
    state: AppState
    request: Request | WebSocket | None
    viewer_id: int | None = None
    # A token that was sent but is bad: public fields fail with it too, never silently anonymous.
    auth_error: AppError | None = None
    # The accepted token's claims (logOut revokes this one token).
    token: TokenClaims | None = None
    # The region whose policy judges this request's reads (`request_region`; empty: the
    # process's REGION). Set for the request's task and the tasks it starts.
    region: str = ""
    loaders: Loaders = field(init=False)

    def __post_init__(self) -> None:
        self.loaders = Loaders(self.state, self.viewer_id)
        judge_in(self.region or self.state.settings.region)

    def viewer(self) -> int | None:
        if self.auth_error is not None:
            raise self.auth_error
        return self.viewer_id

    def require_viewer(self) -> int:
        viewer = self.viewer()
        if viewer is None:
            raise Unauthenticated("Log in first: send 'Authorization: Bearer <token>'.")
        return viewer

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.state.sessions.begin() as session:
            yield session

    def budget_key(self) -> str:
        """Who a per-client budget counts: `u<user id>` with a token, else `ip<address>`."""
        return f"u{self.viewer_id}" if self.viewer_id is not None else f"ip{self.client_ip()}"

    async def limit_writes(self) -> None:
        who = self.budget_key()
        await check_rate(
            self.state.roles.limits, who, self.state.settings.rate_limit_writes_per_minute
        )

    async def narrowed(self, viewers: Iterable[int] = (), authors: Iterable[int] = ()) -> None:
        """After a commit: a replica answers these viewers' pages, and pages with these
        authors' posts, only once it has replayed it (app.db.watermarks, decision 0086)."""
        await record_narrowing(self.state.watermarks, viewers=viewers, authors=authors)

    def client_ip(self) -> str:
        """The client's address as every per-address budget counts it (app.client_address:
        IPv6 by its CLIENT_IPV6_PREFIX, IPv4-mapped as IPv4), not the exact address."""
        client = self.request.client if self.request is not None else None
        host = client.host if client is not None else "unknown"
        return budget_address(host, self.state.settings.client_ipv6_prefix)


def request_region(settings: Settings, request: Request | WebSocket) -> str:
    """The viewer's region (decision 0088): the one a trusted edge names in REGION_HEADER
    (its peer in REGION_HEADER_TRUSTED_PROXIES, app.client_address), else the serving
    REGION. The header from any other peer is ignored; a trusted edge's malformed or unknown
    name is BadInput (every field of the request then fails, as with a bad token): a reader
    is never judged by a region nobody named."""
    name = settings.region_header
    value = request.headers.get(name) if name else None
    if value is None or not trusted_peer(request.scope, settings.region_trusted_networks()):
        return settings.region
    return check_region(value.strip(), settings.policy_region_names())


async def http_context(state: AppState, request: Request) -> Context:
    """An HTTP request's context: its bearer token checked (signature, expiry, revocation)
    and its region (`request_region`). A bad token or region header is kept as
    `auth_error`, which every field then raises."""
    try:
        region = request_region(state.settings, request)
    except AppError as exc:
        return Context(state=state, request=request, auth_error=exc)
    header = request.headers.get("authorization")
    if not header:
        return Context(state=state, request=request, region=region)
    try:
        token = header_claims(state.settings, header)
        cache = state.settings.token_check_cache_seconds
        await revocation.check(state.roles.limits, state.sessions, token, cache)
    except AppError as exc:
        return Context(state=state, request=request, auth_error=exc, region=region)
    return Context(
        state=state, request=request, viewer_id=token.user_id, token=token, region=region
    )
