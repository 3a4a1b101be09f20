"""The fan-out control plane: push or pull per author, decided by what each costs and by the
freshness budget, not by a constant follower count (docs/decisions/0026-fanout-control-plane.md).

write cost = active followers x posts in the window x SECONDS_PER_INSERT x lane headroom factor
read cost  = active followers x reads per active user x SECONDS_PER_PULLED_SOURCE

Both are seconds of serving work per window. `decide` is pure; `gather_inputs` reads the
inputs cheaply (a capped count cached a minute, a per-author sliding window in Redis, the lanes'
lag, the measured read rate of app.users.reads). Owner of the key families `fcn:{<author_id>}`,
`fcw:{<author_id>}`, `fcc:{<author_id>}`, `fcr:review` and `fcr:costs` (docs/redis-keys.md).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Any, cast

from redis.exceptions import RedisError
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import Settings
from app.db.models import FANOUT_PULL, FANOUT_PUSH, User
from app.fanout import constants, lanes
from app.fanout.lag import lane_lag_seconds
from app.fanout.queries import active_since
from app.redis_client import RedisRoles
from app.redis_scripts import AnyRedis
from app.users.reads import reads_per_active_user

REVIEW_KEY = "fcr:review"
COSTS_KEY = "fcr:costs"  # the periodic pass's top authors by estimated cost, for /metrics

PIN_PUSH = "push"
PIN_PULL = "pull"
PINS = {PIN_PUSH: FANOUT_PUSH, PIN_PULL: FANOUT_PULL}


@dataclass(frozen=True)
class AuthorInputs:
    followers: int  # users.follower_count (always known)
    active_followers: int | None  # eligible (active within ACTIVE_DAYS) followers; None = unknown
    posts_per_window: float | None  # the author's posts in the sliding window; None = unknown
    lane_lag_seconds: float | None  # the author's lane: age of the oldest waiting job
    queued_jobs: int | None  # the author's lane: jobs waiting
    pin: str | None  # "push" | "pull" | None (auto)
    # Measured feed reads per active user per window (app.users.reads); None: not enough
    # reads seen yet, the prior FANOUT_READS_PER_ACTIVE_FOLLOWER applies.
    reads_per_active_user: float | None = None


@dataclass(frozen=True)
class CostDecision:
    mode: int  # FANOUT_PUSH / FANOUT_PULL (app.db.models)
    reason: str  # one of REASONS
    write_cost_seconds: float | None
    read_cost_seconds: float | None
    inputs: AuthorInputs


def threshold_mode(current: int, followers: int, settings: Settings) -> int:
    """Today's rule: PULL at >= the pull threshold, back to PUSH below the push threshold."""
    if current == FANOUT_PUSH and followers >= settings.fanout_pull_threshold:
        return FANOUT_PULL
    if current == FANOUT_PULL and followers < settings.fanout_push_threshold:
        return FANOUT_PUSH
    return current


def headroom_factor(inputs: AuthorInputs, settings: Settings) -> float:
    """1 on an idle lane, growing as its lag or its queued work (jobs x one batch's fan-out
    time) nears the freshness budget: 1 / (1 - pressure), at most MAX_HEADROOM_FACTOR."""
    budget = settings.fanout_freshness_budget_seconds
    lag = inputs.lane_lag_seconds or 0.0
    queued = (inputs.queued_jobs or 0) * settings.fanout_batch_size * constants.SECONDS_PER_INSERT
    pressure = max(lag, queued) / budget
    return min(
        constants.MAX_HEADROOM_FACTOR,
        1.0 / max(1.0 / constants.MAX_HEADROOM_FACTOR, 1.0 - pressure),
    )


def write_cost(inputs: AuthorInputs, settings: Settings) -> float:
    assert inputs.active_followers is not None and inputs.posts_per_window is not None
    raw = inputs.active_followers * inputs.posts_per_window * constants.SECONDS_PER_INSERT
    return raw * headroom_factor(inputs, settings)


def read_rate(inputs: AuthorInputs, settings: Settings) -> float:
    """Reads per active follower per window: measured when known, else the prior."""
    if inputs.reads_per_active_user is not None:
        return inputs.reads_per_active_user
    return settings.fanout_reads_per_active_follower


def read_cost(inputs: AuthorInputs, settings: Settings) -> float:
    assert inputs.active_followers is not None
    reads = inputs.active_followers * read_rate(inputs, settings)
    return reads * constants.SECONDS_PER_PULLED_SOURCE


def one_post_cost(inputs: AuthorInputs) -> float:
    """One post's fan-out on an idle lane: the audience alone, whatever the posting rate."""
    assert inputs.active_followers is not None
    return inputs.active_followers * constants.SECONDS_PER_INSERT


def decide(current_mode: int, inputs: AuthorInputs, settings: Settings) -> CostDecision:
    """Push or pull for one author. Pure: the same inputs give the same decision.

    In order: a pin wins; missing inputs fall back to the follower thresholds; an audience
    whose one post alone takes longer than the freshness budget to push goes PULL
    (`celebrity`); a window's posting whose fan-out (lane pressure included) would blow the
    budget goes PULL (`burst`); an author below FANOUT_PULL_MIN_ACTIVE_FOLLOWERS stays PUSH
    (`small_author`); otherwise switch only when one cost beats the other by the hysteresis
    margin."""
    if inputs.pin in PINS:
        return CostDecision(PINS[inputs.pin], "pin", None, None, inputs)
    if inputs.active_followers is None or inputs.posts_per_window is None:
        mode = threshold_mode(current_mode, inputs.followers, settings)
        return CostDecision(mode, "threshold_fallback", None, None, inputs)
    write = write_cost(inputs, settings)
    read = read_cost(inputs, settings)
    h = settings.fanout_hysteresis
    budget = settings.fanout_freshness_budget_seconds

    def made(mode: int, reason: str) -> CostDecision:
        return CostDecision(mode, reason, write, read, inputs)

    if one_post_cost(inputs) > budget:
        return made(FANOUT_PULL, "celebrity")
    if write > budget:
        return made(FANOUT_PULL, "burst")
    if inputs.active_followers < settings.fanout_pull_min_active_followers:
        return made(FANOUT_PUSH, "small_author")
    if current_mode == FANOUT_PUSH:
        if write > read * (1 + h):
            return made(FANOUT_PULL, "cost_pull")
        return made(FANOUT_PUSH, "hysteresis_hold" if write > read else "cost_push")
    if write == 0 or write < read * (1 - h):
        return made(FANOUT_PUSH, "cost_push")
    return made(FANOUT_PULL, "hysteresis_hold" if write < read else "cost_pull")


def lane_of(followers: int, settings: Settings) -> str:
    """The lane the author's batches go to (as FanoutService.lane_for)."""
    return lanes.BIG if followers >= settings.big_author_followers else lanes.DEFAULT


def _window_key(author_id: int) -> str:
    return f"fcw:{{{author_id}}}"


def _active_key(author_id: int) -> str:
    return f"fcn:{{{author_id}}}"


_COUNT_ACTIVE = text(
    """
    SELECT count(*) FROM (
        SELECT 1 FROM follows f JOIN users u ON u.id = f.follower_id
        WHERE f.followee_id = :author AND u.last_active_at >= :since
        LIMIT :cap
    ) capped
    """
)


async def count_active_followers(
    session: AsyncSession, redis: AnyRedis, author_id: int, settings: Settings
) -> int:
    """Active followers, at most FANOUT_ACTIVE_COUNT_CAP (an author past it reads as the cap:
    its cost is already far past any other's), cached ACTIVE_COUNT_TTL_SECONDS: a follower
    who becomes active or lapses counts within a minute."""
    cached = await redis.get(_active_key(author_id))
    if cached is not None:
        return int(cached)
    since = active_since(settings.active_days)
    params = {"author": author_id, "since": since, "cap": settings.fanout_active_count_cap}
    count = int(await session.scalar(_COUNT_ACTIVE, params) or 0)
    await redis.set(_active_key(author_id), count, ex=constants.ACTIVE_COUNT_TTL_SECONDS)
    return count


async def posts_in_window(redis: AnyRedis, author_id: int, now_ms: int, window_seconds: int) -> int:
    return int(await redis.zcount(_window_key(author_id), now_ms - window_seconds * 1000, "+inf"))


async def record_post(
    redis: AnyRedis, author_id: int, now_ms: int, post_id: int | str | None = None
) -> None:
    """Count one post in the author's window. Keyed by the post id when given (a widening:
    "<post id>:<version>", counted at its own time: decision 0067), so a replayed split
    counts it once; the author joins the review set for the periodic pass."""
    key = _window_key(author_id)
    async with redis.pipeline(transaction=False) as pipe:  # one round trip for both
        pipe.zadd(key, {str(post_id if post_id is not None else now_ms): now_ms})
        pipe.zremrangebyscore(key, "-inf", now_ms - constants.WINDOW_MAX_SECONDS * 1000)
        pipe.zremrangebyrank(key, 0, -constants.WINDOW_MAX_POSTS - 1)
        pipe.expire(key, constants.WINDOW_MAX_SECONDS)
        _queue_review(pipe, author_id, now_ms)
        await pipe.execute()


def _queue_review(pipe: Any, author_id: int, now_ms: int) -> None:
    pipe.zadd(REVIEW_KEY, {str(author_id): now_ms})
    pipe.zremrangebyscore(REVIEW_KEY, "-inf", now_ms - 2 * constants.WINDOW_MAX_SECONDS * 1000)


async def mark_for_review(redis: AnyRedis, author_id: int, now_ms: int) -> None:
    """The author's inputs changed (a post, a burst still on): the periodic pass looks again."""
    async with redis.pipeline(transaction=False) as pipe:
        _queue_review(pipe, author_id, now_ms)
        await pipe.execute()


def _catchup_key(author_id: int) -> str:
    return f"fcc:{{{author_id}}}"


async def note_catchup(redis: AnyRedis, author_id: int, version: int, since_ms: int) -> None:
    """Written inside the transaction that switches the author back to PUSH, before it
    commits: if the process dies between the commit and the catch-up's enqueue, the next
    decision for the author (its next post, the periodic pass: the author is put up for
    review) finds it and queues the catch-up (job ids per mode version: never twice)."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.set(
            _catchup_key(author_id), f"{version}:{since_ms}", ex=2 * constants.WINDOW_MAX_SECONDS
        )
        _queue_review(pipe, author_id, int(time.time() * 1000))
        await pipe.execute()


async def pending_catchup(redis: AnyRedis, author_id: int) -> tuple[int, int] | None:
    """(mode version, pull era start ms) of a catch-up noted and not known done."""
    raw = await redis.get(_catchup_key(author_id))
    if raw is None:
        return None
    version, since_ms = (
        int(x) for x in (raw.decode() if isinstance(raw, bytes) else raw).split(":")
    )
    return version, since_ms


async def catchup_done(redis: AnyRedis, author_id: int) -> None:
    await redis.delete(_catchup_key(author_id))


async def authors_to_review(redis: AnyRedis, limit: int) -> list[int]:
    """Authors who posted lately or are PULL for a burst, most recently changed first. Kept
    two windows (WINDOW_MAX_SECONDS) after the last change, so a burst's end is seen."""
    members = cast(list[bytes], await redis.zrevrange(REVIEW_KEY, 0, limit - 1))
    return [int(m) for m in members]


async def gather_inputs(
    session: AsyncSession,
    redis: RedisRoles,
    author_id: int,
    settings: Settings,
    now_ms: int | None = None,
) -> AuthorInputs:
    """The author's inputs; a Redis failure leaves its inputs None (the thresholds decide).
    Three roles: the author's keys (timelines), the lane's lag (queue), the read rate
    (sessions)."""
    row = (
        await session.execute(
            select(User.follower_count, User.fanout_pin).where(User.id == author_id)
        )
    ).one()
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    active: int | None = None
    posts: float | None = None
    lag: float | None = None
    queued: int | None = None
    rate: float | None = None
    try:
        active = await count_active_followers(session, redis.timelines, author_id, settings)
        window = settings.fanout_window_seconds
        posts = await posts_in_window(redis.timelines, author_id, now_ms, window)
        lane = lanes.label(lane_of(row.follower_count, settings))
        lag, queued = (await lane_lag_seconds(redis.queue))[lane]
        rate = await reads_per_active_user(
            session,
            redis.sessions,
            settings.fanout_window_seconds,
            settings.active_days,
            settings.fanout_read_rate_min_reads,
        )
    except (RedisError, OSError):
        pass
    return AuthorInputs(row.follower_count, active, posts, lag, queued, row.fanout_pin, rate)


@dataclass(frozen=True)
class AuthorCost:
    """One author's estimated costs, as the periodic pass exports the top ones."""

    handle: str
    write_seconds: float
    read_seconds: float
    mode: str


async def publish_costs(redis: AnyRedis, costs: list[AuthorCost], ttl_seconds: int) -> None:
    """The pass's top authors by cost, replaced as a whole (the label set stays bounded)."""
    payload = json.dumps([asdict(c) for c in costs])
    await redis.set(COSTS_KEY, payload, ex=max(1, ttl_seconds))


async def published_costs(redis: AnyRedis) -> list[AuthorCost]:
    raw = await redis.get(COSTS_KEY)
    return [AuthorCost(**c) for c in json.loads(raw)] if raw else []
