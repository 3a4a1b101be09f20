"""/healthz and /readyz: the dependencies' checks, cached, and the readiness gauge."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from arq.constants import health_check_key_suffix
from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.config import REDIS_ROLES, Settings
from app.exposure import may_see_details
from app.fanout import lanes
from app.observability.metrics import READY
from app.state import AppState

PROBE_CACHE_SECONDS = 1.0  # /healthz and /readyz answers are this fresh at worst


T = TypeVar("T")


class Recent(Generic[T]):
    """An async check's last answer, kept `ttl` seconds; callers meanwhile share one run.

    /healthz and /readyz run SQL and Redis for anyone and outside admission: cached, a flood
    of probes costs the dependencies one check per `ttl` per process, and a hung dependency
    holds one check, not one per caller (each check is bounded by READY_TIMEOUT_SECONDS)."""

    def __init__(self, check: Callable[[], Awaitable[T]], ttl: float) -> None:
        self.check = check
        self.ttl = ttl
        self._answer: tuple[float, T] | None = None
        self._running: asyncio.Future[T] | None = None

    async def get(self) -> T:
        answer = self._answer
        if answer is not None and time.monotonic() - answer[0] < self.ttl:
            return answer[1]
        if self._running is None:
            self._running = asyncio.ensure_future(self._run())
        return await asyncio.shield(self._running)

    async def _run(self) -> T:
        try:
            value = await self.check()
            self._answer = (time.monotonic(), value)
            return value
        finally:
            self._running = None


WORKERS = "workers"  # readiness check names: workers:default, workers:big
REDIS = "redis"  # and redis, with redis:timelines, ... when the roles are on several servers
READY_TIMEOUT_SECONDS = 2.0  # per check: a hung dependency answers "timeout", not a hung probe


async def readiness(state: AppState) -> dict[str, str]:
    """Each dependency's state, "ok" or why not. A lane is up while one of its ARQ workers
    keeps the lane's health-check key alive (ARQ sets it every `health_check_interval`
    seconds, jobs.worker, and lets it lapse one second later)."""

    async def probe(check: Callable[[], Awaitable[object]]) -> str:
        try:
            return "ok" if await asyncio.wait_for(check(), READY_TIMEOUT_SECONDS) else "down"
        except TimeoutError:
            return "timeout"
        except Exception as exc:  # any failure means not ready, whatever its kind
            return type(exc).__name__

    async def postgres() -> bool:
        async with state.engine.connect() as conn:
            return bool((await conn.scalar(text("select 1"))) == 1)

    def lane_alive(queue: str) -> Callable[[], Awaitable[object]]:
        return lambda: state.roles.queue.exists(queue + health_check_key_suffix)

    checks = {"postgres": probe(postgres), REDIS: probe(lambda: ping_all(state))}
    if len(state.roles.clients()) > 1:  # roles on several servers: which one is down
        for role in REDIS_ROLES:
            checks[f"{REDIS}:{role}"] = probe(state.roles.get(role).ping)
    checks.update({f"{WORKERS}:{lane}": probe(lane_alive(q)) for lane, q in lanes.LANES.items()})
    results = await asyncio.gather(*checks.values())
    return dict(zip(checks, results, strict=True))


async def ping_all(state: AppState) -> bool:
    """Every Redis role's server answers (one PING per distinct client; a cluster client
    pings a node)."""
    answers = await asyncio.gather(*(client.ping() for client in state.roles.clients()))
    return all(answers)


def export_readiness(checks: dict[str, str]) -> None:
    """`feed_ready{part}`: 1 where /readyz finds the part ok, else 0 (alerts watch it; set by
    /readyz and, from its cached answer, before every /metrics scrape)."""
    for part, result in checks.items():
        READY.labels(part).set(1 if result == "ok" else 0)


class Probes:
    """The /healthz and /readyz endpoints over the current state, each answer cached
    PROBE_CACHE_SECONDS (`Recent`); /metrics exports the readiness answer too."""

    def __init__(self, settings: Settings, current_state: Callable[[], AppState]) -> None:
        self.settings = settings
        self.current_state = current_state
        self.recent_health = Recent(self.health, PROBE_CACHE_SECONDS)
        self.recent_ready = Recent(self.ready, PROBE_CACHE_SECONDS)

    async def health(self) -> tuple[dict[str, str], int]:
        st = self.current_state()
        try:
            async with st.engine.connect() as conn:
                await conn.execute(text("select 1"))
            await ping_all(st)
        except Exception as exc:  # any failure means unhealthy, whatever its kind
            return {"status": "unavailable", "error": type(exc).__name__}, 503
        return {"status": "ok"}, 200

    async def ready(self) -> tuple[dict[str, object], int]:
        checks = await readiness(self.current_state())
        export_readiness(checks)
        down = [name for name, state in checks.items() if state != "ok"]
        status = "unavailable" if down else "ready"
        body: dict[str, object] = {"status": status, "down": down, "checks": checks}
        return body, 503 if down else 200

    def answer(self, request: Request, body: dict[str, Any], status: int) -> Response:
        """The whole answer in development or to the metrics token's bearer; in production
        anonymous callers get the status alone (app.exposure.may_see_details)."""
        if not may_see_details(self.settings, request.headers.get("authorization")):
            body = {"status": body["status"]}
        return JSONResponse(body, status)

    async def healthz(self, request: Request) -> Response:
        """Liveness: PostgreSQL and Redis answer (cached: see `Recent`)."""
        return self.answer(request, *await self.recent_health.get())

    async def readyz(self, request: Request) -> Response:
        """Readiness: 503 naming what is down (PostgreSQL, Redis, a lane without a live worker)."""
        return self.answer(request, *await self.recent_ready.get())
