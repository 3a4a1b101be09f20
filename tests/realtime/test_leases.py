"""The leases behind the socket and subscription caps (app.realtime.leases): shared by
processes, freed when a process dies without releasing, per process while Redis is away."""

from __future__ import annotations

import asyncio
import socket
import time

from redis.asyncio import Redis

from app.realtime.leases import RENEW_BATCH, SOCKETS, Cap, CapReached, Leases, user_key
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


async def test_a_renewal_in_batches_reaches_every_key_held(
    state: AppState,
) -> None:
    """Renewed RENEW_BATCH keys at a time (each batch after the last one's answer, so the
    event loop is never held for the whole of it): every key held gets the new deadline,
    the last, partial batch too; a released key is not brought back."""
    leases = Leases(state.redis, 60)
    users = range(1, 2 * RENEW_BATCH + 3)  # one released: two batches and one key left
    holds = await asyncio.gather(
        *(leases.acquire([Cap(user_key(u, SOCKETS), 5, "account")]) for u in users)
    )

    async def deadlines() -> list[float | None]:
        pipe = state.redis.pipeline(transaction=False)
        for hold in holds:
            pipe.zscore(hold.keys[0], hold.member)
        return list(await pipe.execute())

    before = await deadlines()
    assert None not in before
    # The new deadline is later by the clock's advance at least: wait for the clock (ms, as
    # the leases read it) to pass the acquisition, not for a guessed time.
    latest = max(b for b in before if b is not None) - leases.lease_ms
    await eventually(lambda: int(time.time() * 1000) > latest, within=5, interval=0.001)
    await holds[-1].release()
    await leases.renew()
    after = await deadlines()
    assert after[-1] is None  # released: not renewed back into the set
    assert all(
        a is not None and b is not None and a > b
        for a, b in zip(after[:-1], before[:-1], strict=True)
    )
    await asyncio.gather(*(hold.release() for hold in holds))


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
