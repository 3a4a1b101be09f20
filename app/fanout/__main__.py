"""Operators' say over the fan-out control plane (docs/decisions/0026-fanout-control-plane.md),
on the PostgreSQL and Redis that DATABASE_URL and REDIS_URL name.

    python -m app.fanout explain <handle>
        the author's inputs, both costs, the decision the control plane would make now and
        why, the current mode and the pin; changes nothing;
    python -m app.fanout pin <handle> push|pull|auto
        pins the author's mode (auto: clears the pin), recorded in users.fanout_pin; it takes
        effect at the author's next decision (the next post, or the periodic pass).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.db.models import User
from app.fanout import constants, lanes
from app.fanout.control import (
    PINS,
    decide,
    gather_inputs,
    headroom_factor,
    lane_of,
    mark_for_review,
    one_post_cost,
    read_rate,
)
from app.fanout.modes import MODE_NAMES
from app.redis_client import RedisRoles, make_roles
from app.redis_scripts import AnyRedis

AUTO = "auto"


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{value * 1000:.3f} ms"


def _known(value: object) -> str:
    return "unknown" if value is None else str(value)


async def explain(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], redis: RedisRoles, handle: str
) -> int:
    async with sessions() as session:
        row = (
            await session.execute(
                select(User.id, User.fanout_mode, User.fanout_mode_version).where(
                    User.handle == handle
                )
            )
        ).one_or_none()
        if row is None:
            print(f"no user @{handle}", file=sys.stderr)
            return 1
        inputs = await gather_inputs(session, redis, row.id, settings)
    decision = decide(row.fanout_mode, inputs, settings)
    cap = settings.fanout_active_count_cap
    active = _known(inputs.active_followers)
    if inputs.active_followers is not None and inputs.active_followers >= cap:
        active = f">= {cap} (counted up to FANOUT_ACTIVE_COUNT_CAP)"
    print(f"author @{handle} (id {row.id})")
    print(f"  control:            FANOUT_CONTROL={settings.fanout_control}")
    print(f"  pin:                {inputs.pin or AUTO}")
    print(
        f"  mode now:           {MODE_NAMES[row.fanout_mode]} (version {row.fanout_mode_version})"
    )
    print("inputs")
    print(f"  followers:          {inputs.followers}")
    print(f"  active followers:   {active} (active within ACTIVE_DAYS={settings.active_days})")
    print(
        f"  posts in window:    {_known(inputs.posts_per_window)}"
        f" (FANOUT_WINDOW_SECONDS={settings.fanout_window_seconds})"
    )
    print(f"  lane:               {lanes.label(lane_of(inputs.followers, settings))}")
    lag = "unknown" if inputs.lane_lag_seconds is None else f"{inputs.lane_lag_seconds:.3f} s"
    print(f"  lane lag:           {lag}")
    print(f"  lane queued jobs:   {_known(inputs.queued_jobs)}")
    print(f"  headroom factor:    {headroom_factor(inputs, settings):.2f}")
    if inputs.reads_per_active_user is None:
        rate = (
            f"{settings.fanout_reads_per_active_follower:g} per window (the prior,"
            f" FANOUT_READS_PER_ACTIVE_FOLLOWER: fewer than FANOUT_READ_RATE_MIN_READS="
            f"{settings.fanout_read_rate_min_reads} reads measured)"
        )
    else:
        rate = f"{inputs.reads_per_active_user:.3g} per window (measured)"
    print(f"  reads per active:   {rate}")
    print("costs (seconds of work per window)")
    print(
        f"  write (push):       {_seconds(decision.write_cost_seconds)}"
        f"  [active x posts x {constants.SECONDS_PER_INSERT * 1e6:.1f} us x headroom]"
    )
    print(
        f"  read (pull):        {_seconds(decision.read_cost_seconds)}"
        f"  [active x {read_rate(inputs, settings):.3g} reads x"
        f" {constants.SECONDS_PER_PULLED_SOURCE * 1e6:.1f} us]"
    )
    one_post = None if inputs.active_followers is None else one_post_cost(inputs)
    print(f"  one post (push):    {_seconds(one_post)}  [celebrity when over the budget]")
    print(f"  freshness budget:   {settings.fanout_freshness_budget_seconds:g} s")
    print(
        f"  small-author floor: {settings.fanout_pull_min_active_followers} active followers"
        " (FANOUT_PULL_MIN_ACTIVE_FOLLOWERS: never PULL by cost below it)"
    )
    print(f"Decision: {MODE_NAMES[decision.mode]} (reason: {decision.reason})")
    return 0


async def pin(
    sessions: async_sessionmaker[AsyncSession], redis: AnyRedis, handle: str, choice: str
) -> int:
    value = None if choice == AUTO else choice
    async with sessions.begin() as session:
        row = (
            await session.execute(
                select(User.id, User.fanout_pin).where(User.handle == handle).with_for_update()
            )
        ).one_or_none()
        if row is None:
            print(f"no user @{handle}", file=sys.stderr)
            return 1
        await session.execute(update(User).where(User.id == row.id).values(fanout_pin=value))
    await mark_for_review(redis, row.id, int(time.time() * 1000))
    print(
        f"@{handle}: pin {row.fanout_pin or AUTO} -> {choice}; takes effect at the author's "
        "next decision (next post or periodic pass)"
    )
    return 0


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.fanout", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("explain", help="inputs, costs and decision").add_argument("handle")
    pinning = sub.add_parser("pin", help="pin push or pull, or auto")
    pinning.add_argument("handle")
    pinning.add_argument("choice", choices=[*PINS, AUTO])
    args = parser.parse_args(argv)
    settings = get_settings()
    engine = make_engine(settings, pool_size=1)
    redis = make_roles(settings)
    handle = args.handle.removeprefix("@")
    try:
        if args.command == "explain":
            return await explain(settings, make_sessionmaker(engine), redis, handle)
        return await pin(make_sessionmaker(engine), redis.timelines, handle, args.choice)
    finally:
        await redis.aclose()
        await engine.dispose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
