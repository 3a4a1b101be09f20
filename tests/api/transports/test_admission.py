"""Overload: admission control (app.api.transports.admission) on a real uvicorn process with
MAX_IN_FLIGHT=2, and the feed's source timeouts, which a busy process must not mistake for
a slow Redis (app.feed.deadline `SourceDeadline.within`).

Slow requests without mocks: `logIn` marks the user active with an UPDATE of their row, and
the test holds that row locked, so every logIn of the user waits in PostgreSQL, in flight,
for as long as the test wants. Cheap requests then find the process full.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from app.api.transports.admission import QUEUE_FACTOR, RETRY_AFTER_SECONDS, Slots
from app.feed.deadline import LoadTimeout, LoopLag
from tests.helpers import eventually, gql, log_in_request, make_user, row_locked, waiting_on_locks
from tests.realtime.live import LiveClient
from tests.servers import ApiServer

WAIT_MS = 600
SLOTS = 2
QUEUED = QUEUE_FACTOR * SLOTS  # may wait for a slot, WAIT_MS at most


@pytest.fixture(scope="module")
async def small_server(test_database: str) -> AsyncIterator[ApiServer]:
    env = {"MAX_IN_FLIGHT": str(SLOTS), "ADMISSION_WAIT_MS": str(WAIT_MS)}
    async with ApiServer(env=env) as api:
        yield api


async def timed(call) -> tuple[float, httpx.Response]:
    start = time.perf_counter()
    response = await call
    return time.perf_counter() - start, response


def profile(http: httpx.AsyncClient, handle: str):
    query = "query($h: String!) { user(handle: $h) { handle } }"
    return http.post("/graphql", json={"query": query, "variables": {"h": handle}})


async def test_past_capacity_the_excess_is_refused_at_once(small_server: ApiServer) -> None:
    refused_before = await small_server.metric(
        "feed_admission_refused_total", 'reason="queue_full"'
    )
    waited_before = await small_server.metric(
        "feed_admission_refused_total", 'reason="wait_budget"'
    )
    limits = httpx.Limits(max_connections=100)
    async with (
        small_server.http() as http,
        httpx.AsyncClient(base_url=small_server.url, timeout=30, limits=limits) as crowd,
    ):
        token, user_id = await make_user(http, "slow")
        async with row_locked(user_id):
            # Two slow requests fill the process: both wait on the row lock in PostgreSQL.
            slow = [asyncio.create_task(timed(log_in_request(crowd, "slow"))) for _ in range(2)]
            await eventually(lambda: _equals(waiting_on_locks(), 2), what="2 logIns in flight")

            # More at once: QUEUED of them wait (WAIT_MS), the other four are refused at once.
            crowd_size = QUEUED + 4
            answers = await asyncio.gather(
                *(timed(profile(crowd, "slow")) for _ in range(crowd_size))
            )
            # Not counted: health, metrics, the GraphiQL page, opening a websocket. An
            # operation sent over it takes a slot like a request (endpoint.websocket): refused.
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/metrics")).status_code == 200
            assert (await http.get("/graphql", headers={"accept": "text/html"})).status_code == 200
            live = await LiveClient.open(small_server, token, subscribe=False)
            await live.subscribe()
            refused = json.loads(await asyncio.wait_for(live.ws.recv(), 5.0))
            assert refused["type"] == "error", refused
            assert refused["payload"][0]["extensions"]["code"] == "OVERLOADED", refused
            await live.close()
            assert not any(task.done() for task in slow)  # still in flight all along
        done = await asyncio.gather(*slow)

    for seconds, response in answers:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == str(RETRY_AFTER_SECONDS)
        assert response.json()["errors"][0]["extensions"]["code"] == "OVERLOADED"
        assert seconds < WAIT_MS / 1000 + 1.0  # answered at once, or after the wait budget
    times = sorted(seconds for seconds, _ in answers)
    assert times[3] < WAIT_MS / 1000, times  # four refused on arrival: no wait at all
    assert times[4] > WAIT_MS / 1000 * 0.9, times  # the others after their wait budget
    for _, response in done:
        assert response.status_code == 200 and response.json()["data"]["logIn"]["token"]
    assert (
        await small_server.metric("feed_admission_refused_total", 'reason="queue_full"')
        == refused_before + 4
    )
    assert (
        await small_server.metric("feed_admission_refused_total", 'reason="wait_budget"')
        == waited_before + QUEUED
    )


async def test_a_request_waits_for_a_slot_freed_within_the_budget(
    small_server: ApiServer,
) -> None:
    async with (
        small_server.http() as http,
        httpx.AsyncClient(base_url=small_server.url, timeout=30) as other,
    ):
        _, user_id = await make_user(http, "slow")
        async with row_locked(user_id):
            slow = [asyncio.create_task(log_in_request(http, "slow")) for _ in range(2)]
            await eventually(lambda: _equals(waiting_on_locks(), 2), what="2 logIns in flight")
            queued = asyncio.create_task(timed(profile(other, "slow")))
            await asyncio.sleep(WAIT_MS / 4000)  # it waits in the queue meanwhile
            assert not queued.done()
        seconds, response = await queued  # the lock went: a logIn ended and handed its slot
        assert response.status_code == 200
        assert response.json()["data"]["user"]["handle"] == "slow"
        assert seconds < WAIT_MS / 1000
        assert all(r.status_code == 200 for r in await asyncio.gather(*slow))


async def test_below_capacity_nothing_is_refused(small_server: ApiServer, client, state) -> None:
    """Sequential requests never meet the limit, and the in-process app answers a burst of
    MAX_IN_FLIGHT requests at once in full."""
    async with small_server.http() as http:
        await make_user(http, "calm")
        for _ in range(5):
            assert (await profile(http, "calm")).status_code == 200
    burst = state.settings.max_in_flight
    results = await asyncio.gather(
        *(gql(client, "UserProfile", {"handle": "calm"}) for _ in range(burst))
    )
    assert all(r.status == 200 and not r.errors for r in results)


async def test_a_refused_request_leaves_its_connection_usable(test_database: str) -> None:
    """A 503 is sent before the request body is read: the connection still serves the next
    request (keep-alive), however big the unread body was."""
    async with (
        ApiServer(env={"MAX_IN_FLIGHT": "1", "ADMISSION_WAIT_MS": "0"}) as api,
        api.http() as http,
        httpx.AsyncClient(
            base_url=api.url, timeout=30, limits=httpx.Limits(max_connections=1)
        ) as one,
    ):
        _, user_id = await make_user(http, "slow")
        async with row_locked(user_id):
            slow = asyncio.create_task(log_in_request(http, "slow"))
            await eventually(lambda: _equals(waiting_on_locks(), 1), what="a logIn in flight")
            streams = set()
            padding = "x" * 30_000  # an unread body bigger than a socket read
            for _ in range(30):
                query = "query($h: String!, $pad: String) { user(handle: $h) { handle } }"
                variables = {"h": "slow", "pad": padding}
                response = await one.post("/graphql", json={"query": query, "variables": variables})
                assert response.status_code == 503
                streams.add(id(response.extensions["network_stream"]))
            assert (await one.get("/healthz")).status_code == 200
            assert len(streams) == 1, "the connection was not kept"
        assert (await slow).status_code == 200


async def _equals(value, expected) -> bool:
    return (await value) == expected


# -- the slots alone -------------------------------------------------------------------------


async def test_slots_are_handed_over_in_order_and_waiting_is_bounded() -> None:
    slots = Slots(limit=1, wait_seconds=5.0, max_waiting=2)
    assert await slots.acquire() is None
    first = asyncio.create_task(slots.acquire())
    second = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    assert slots.waiting == 2
    assert await slots.acquire() == "queue_full"  # a third waiter: refused at once
    slots.release()  # handed to `first`, not to whoever comes next
    assert await first is None and not second.done()
    assert slots.in_flight == 1
    second.cancel()  # a waiter that goes away leaves no trace
    await asyncio.gather(second, return_exceptions=True)
    assert slots.waiting == 0
    slots.release()
    assert slots.in_flight == 0

    hurried = Slots(limit=1, wait_seconds=0.05, max_waiting=5)
    await hurried.acquire()
    started = time.perf_counter()
    assert await hurried.acquire() == "wait_budget"
    assert 0.04 < time.perf_counter() - started < 1.0
    assert hurried.waiting == 0 and hurried.in_flight == 1


# -- load alone does not degrade the feed ----------------------------------------------------


@asynccontextmanager
async def busy_loop(block_seconds: float) -> AsyncIterator[None]:
    """Keep this event loop as a saturated process would: callbacks hogging it in turn."""
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            time.sleep(block_seconds)  # noqa: ASYNC251 - blocking on purpose
            await asyncio.sleep(0)

    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        stop.set()
        await task


RESPONSIVE_TIMEOUT = 0.5  # busy past 0.1 s of loop lag: a loaded test machine stays under it
BUSY_TIMEOUT = 0.1  # busy past 20 ms of loop lag: the hog's 40 ms makes it so (load only adds)
BLOCK_SECONDS = 0.6  # a blocked loop, well above any scheduling noise of a loaded machine


async def test_a_late_read_degrades_only_when_the_loop_was_responsive(state) -> None:
    """The bounds are in units of the source timeout, not guessed lengths: a read that gives
    up at once takes one timeout (under two even on a loaded machine), a patient one takes
    PATIENCE + 1. A fresh LoopLag, so lateness left by earlier tests on this session's loop
    does not count."""
    deadline = state.feed.deadline
    saved = deadline.timeout, deadline.loop_lag
    deadline.loop_lag = LoopLag()
    try:
        # A responsive loop: the source itself is slow, so the page goes without it.
        deadline.timeout = RESPONSIVE_TIMEOUT
        started = time.perf_counter()
        with pytest.raises(TimeoutError) as caught:
            await deadline.within(asyncio.sleep(30))
        assert not isinstance(caught.value, LoadTimeout)
        assert time.perf_counter() - started < 2 * RESPONSIVE_TIMEOUT
        # A saturated loop (timers 40 ms late): the same wait is the process's, not Redis's.
        deadline.timeout = BUSY_TIMEOUT
        async with busy_loop(0.04):
            assert await deadline.within(asyncio.sleep(3.5 * BUSY_TIMEOUT, result="read")) == "read"
            with pytest.raises(LoadTimeout):  # bounded all the same: PATIENCE more at most
                await deadline.within(asyncio.sleep(30))
        assert deadline.loop_lag.recent() < 1.0
    finally:
        deadline.timeout, deadline.loop_lag = saved


async def test_loop_lag_measures_a_blocked_loop() -> None:
    """A loop blocked for BLOCK_SECONDS runs its next beat at least that late (less the beat's
    PERIOD): a lower bound load cannot break. Before the block the figure is well below it
    (scheduling noise only)."""
    lag = LoopLag()
    lag.recent()
    await asyncio.sleep(0.1)
    assert lag.recent() < BLOCK_SECONDS / 2  # only scheduling noise
    time.sleep(BLOCK_SECONDS)  # noqa: ASYNC251 - the loop is blocked: the next beat runs late
    await asyncio.sleep(0.05)
    assert lag.recent() >= BLOCK_SECONDS - LoopLag.PERIOD
