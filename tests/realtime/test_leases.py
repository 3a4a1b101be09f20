"""The leases behind the socket and subscription caps (app.realtime.leases): shared by
processes, freed when a process dies without releasing, per process while Redis is away."""

from __future__ import annotations

import socket

from redis.asyncio import Redis

from app.realtime.leases import SOCKETS, Cap, CapReached, Leases, user_key
from app.state import AppState
from tests.helpers import eventually


def cap(limit: int) -> list[Cap]:
    return [Cap(user_key(7, SOCKETS), limit, "account")]


async def refused(leases: Leases, limit: int) -> bool:
    try:
        hold = await leases.acquire(cap(limit))
    except CapReached:
        return True
    await hold.release()
    return False


async def test_a_dead_process_stops_counting_when_its_lease_runs_out(state: AppState) -> None:
    crashed, alive = Leases(state.redis, 0.5), Leases(state.redis, 0.5)
    await crashed.acquire(cap(2))
    await alive.acquire(cap(2))
    assert await refused(alive, 2)  # both processes' holds count

    async def lapsed() -> bool:
        return not await refused(alive, 2)

    # `crashed` never renews nor releases (its process died): its member lapses.
    await eventually(lapsed, 5, 0.1, "the dead process's lease lapsed")
    await alive.renew()  # the live process's own hold is kept by its renewals
    assert await refused(Leases(state.redis, 0.5), 1)


async def test_released_holds_free_their_place_at_once(state: AppState) -> None:
    leases = Leases(state.redis, 60)
    hold = await leases.acquire(cap(1))
    assert await refused(Leases(state.redis, 60), 1)
    await hold.release()
    await hold.release()  # idempotent
    assert not await refused(Leases(state.redis, 60), 1)


async def test_without_redis_the_cap_holds_per_process() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    redis = Redis(port=port, socket_connect_timeout=0.2)
    try:
        leases = Leases(redis, 60)
        held = [await leases.acquire(cap(2)) for _ in range(2)]
        assert await refused(leases, 2)
        await held[0].release()
        assert not await refused(leases, 2)
    finally:
        await redis.aclose()
