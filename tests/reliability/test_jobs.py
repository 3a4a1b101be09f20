"""Job reliability (issue 11): a failed job is retried with backoff, then kept as a dead
letter and replayed; a worker killed mid-batch, a relay that was down and a lost fan-out job
all end with the post in every follower's timeline. Faults are real: injected through Redis
into the worker (jobs.faults, JOB_FAULT_HOOK), a process SIGKILLed, a Redis that refuses.
docs/RELIABILITY.md lists these scenarios."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis.exceptions
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix, job_key_prefix

from app.config import PROJECT_ROOT
from app.fanout import lanes
from app.outbox import events
from app.relay import OutboxRelay, jobs_for
from devtools.provision import REDIS_EXTRA_CONFIG, _redis_server
from jobs import dead_letters, faults, marks, tracking
from jobs.worker import RECONCILE
from tests.helpers import (
    author_with_fans,
    cli,
    eventually,
    feed_ids,
    metric_value,
    post,
    sql,
    timeline_ids,
)
from tests.servers import free_port, stop_process

# Subprocess workers: fast retries, faults read from Redis.
WORKER_ENV = {"JOB_FAULT_HOOK": "1", "JOB_RETRY_BASE_SECONDS": "0.05"}


@pytest.fixture
def faulty(state: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-process workers (tests/pipeline.py) read injected faults, retry after ~20 ms,
    40 ms, ... and give up after 3 tries."""
    monkeypatch.setattr(state.faults, "job_fault_hook", True)
    monkeypatch.setattr(state.settings, "job_max_tries", 3)
    monkeypatch.setattr(state.settings, "job_retry_base_seconds", 0.02)


async def _metric(client: Any, sample: str) -> float:
    return metric_value((await client.get("/metrics")).text, sample, default=0.0)


async def _holders(state: Any, fans: list[tuple[str, int]], post_id: int) -> int:
    return sum([post_id in await timeline_ids(state, fan_id) for _, fan_id in fans])


async def _fanned_out(state: Any, post_id: int) -> bool:
    return (await marks.finished(state.redis, [tracking.state_key(post_id)])) == [True]


async def _cli(*args: str) -> str:
    return await cli("jobs.dead_letters", *args)


def _spawn(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=PROJECT_ROOT,
        env={**os.environ, **WORKER_ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts, stopped at its end whatever happens."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        stop_process(proc)


async def test_transient_failures_are_retried_until_the_post_arrives(
    client: Any, state: Any, pipeline: Any, faulty: None
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await pipeline.settle()
    retries = 'feed_job_retries_total{function="fanout_batch"}'
    before = await _metric(client, retries)
    await faults.fail_next(state.redis, lanes.FANOUT_BATCH, 2)  # tries 1 and 2 fail

    post_id = await post(client, token, "through a failover")
    await pipeline.settle()

    assert await _holders(state, fans, post_id) == len(fans)
    assert post_id in await feed_ids(client, fans[0][0], mode="CHRONOLOGICAL")
    assert await _metric(client, retries) - before == 2
    assert await dead_letters.count(state.redis) == 0
    assert await _fanned_out(state, post_id)


async def test_a_job_failing_every_try_is_a_dead_letter_until_replayed(
    client: Any, state: Any, pipeline: Any, faulty: None
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await pipeline.settle()
    dead = 'feed_jobs_dead_lettered_total{function="fanout_batch"}'
    before = await _metric(client, dead)
    await faults.fail_next(state.redis, lanes.FANOUT_BATCH, 100)

    post_id = await post(client, token, "held back")
    await pipeline.settle()

    assert await _holders(state, fans, post_id) == 0
    assert not await _fanned_out(state, post_id)
    [letter] = await dead_letters.all_letters(state.redis)
    assert (letter.function, letter.tries, letter.lane) == ("fanout_batch", 3, lanes.DEFAULT)
    assert "InjectedFault" in letter.error
    assert await _metric(client, dead) - before == 1
    assert letter.job_id in await _cli("list")

    await state.redis.delete(faults.fail_key(lanes.FANOUT_BATCH))  # the outage is over
    assert await _cli("replay", "--all") == f"replayed {letter.job_id}\n"
    await pipeline.settle()

    assert await _holders(state, fans, post_id) == len(fans)
    assert await dead_letters.count(state.redis) == 0
    assert await _fanned_out(state, post_id)

    # Replaying the same batch again changes nothing anyone can see.
    seen = {fan: await feed_ids(client, token_) for token_, fan in fans}
    timelines = {fan: await timeline_ids(state, fan) for _, fan in fans}
    assert await dead_letters.replay_letter(pipeline.arq, letter)
    await pipeline.settle()
    assert {fan: await feed_ids(client, token_) for token_, fan in fans} == seen
    assert {fan: await timeline_ids(state, fan) for _, fan in fans} == timelines


async def test_worker_sigkilled_mid_batch_loses_nothing(
    client: Any, state: Any, pipeline: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    token, _, fans = await author_with_fans(client, 5)  # two FanoutBatch jobs of 4 and 1
    await pipeline.settle()
    await faults.stall(state.redis, lanes.FANOUT_BATCH)
    post_id = await post(client, token, "across a crash")
    await pipeline.relay.drain()

    processes.append(_spawn("arq", "jobs.worker.WorkerSettings"))

    async def batches_running() -> bool:
        owed = [m.decode() for m in await state.redis.smembers(tracking.pending_key(post_id))]
        running = [await state.redis.exists(in_progress_key_prefix + j) for j in owed]
        return len(owed) == 2 and all(running)

    await eventually(batches_running, within=30, what="both batches running in the worker")
    os.kill(processes[0].pid, signal.SIGKILL)
    processes[0].wait()
    assert await _holders(state, fans, post_id) == 0  # killed before writing anything
    await faults.stall(state.redis, lanes.FANOUT_BATCH, on=False)

    processes.append(_spawn("arq", "jobs.worker.WorkerSettings"))
    # ARQ runs a killed worker's job again once its in-progress mark lapses (~15 s here).
    await eventually(
        lambda: _fanned_out(state, post_id), within=60, interval=0.2, what="fan-out complete"
    )
    assert await _holders(state, fans, post_id) == len(fans)
    assert await dead_letters.count(state.redis) == 0


async def test_relay_down_then_catching_up(
    client: Any, state: Any, pipeline: Any, processes: list[subprocess.Popen[bytes]]
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await pipeline.settle()
    post_ids = [await post(client, token, f"while the relay is down {i}") for i in range(3)]

    # A relay whose Redis refuses publishes nothing and marks nothing published.
    refused = ArqRedis(host="127.0.0.1", port=free_port(), socket_connect_timeout=1)

    async def enqueue(function: str, *args: Any, job_id: str, lane: str) -> None:
        await refused.enqueue_job(function, *args, _job_id=job_id, _queue_name=lane)

    with pytest.raises(redis.exceptions.ConnectionError):
        await OutboxRelay(state.engine, enqueue).publish_pending()
    await refused.aclose()
    unpublished = "SELECT count(*) FROM outbox WHERE published_at IS NULL"
    assert (await sql(unpublished))[0][0] == 3
    assert await _metric(client, "feed_outbox_oldest_unpublished_seconds") > 0

    # The relay process starts and catches up; the workers deliver.
    processes.append(_spawn("jobs.relay"))

    async def relayed() -> bool:
        return (await sql(unpublished))[0][0] == 0

    await eventually(relayed, within=30, what="the relay caught up")
    # Its jobs wait in the queue up to JOB_EXPIRES_SECONDS (a week), not ARQ's default day.
    queued = [j.decode() for j in await state.redis.zrange(lanes.DEFAULT, 0, -1)]
    assert len(queued) == 3
    for job_id in queued:
        assert await state.redis.pttl(job_key_prefix + job_id) > 6 * 24 * 3600 * 1000
    await pipeline.settle()
    for post_id in post_ids:
        assert await _holders(state, fans, post_id) == len(fans)
        assert await _fanned_out(state, post_id)


async def test_reconciler_reruns_a_fan_out_whose_job_was_lost(
    client: Any, state: Any, pipeline: Any
) -> None:
    token, _, fans = await author_with_fans(client, 3)
    await pipeline.settle()
    post_id = await post(client, token, "lost in the queue")
    await pipeline.relay.drain()
    [(event_id,)] = await sql("SELECT id FROM outbox WHERE event_type = $1", events.POST_CREATED)
    [job] = jobs_for(event_id, events.POST_CREATED, {"post_id": post_id})
    # The job vanishes (as with a Redis restarted without persistence).
    assert await state.redis.zrem(lanes.DEFAULT, job.job_id) == 1
    await state.redis.delete(job_key_prefix + job.job_id)
    await pipeline.settle()
    assert await _holders(state, fans, post_id) == 0

    rerun = 'feed_fanout_reconciled_total{result="rerun"}'
    before = await _metric(client, rerun)
    await pipeline.arq.enqueue_job(RECONCILE, 0)  # grace 0: the event is old enough
    await pipeline.settle()

    assert await _holders(state, fans, post_id) == len(fans)
    assert await _fanned_out(state, post_id)
    assert await _metric(client, rerun) - before == 1

    # Complete now: the next pass leaves it alone.
    await pipeline.arq.enqueue_job(RECONCILE, 0)
    await pipeline.settle()
    assert await _metric(client, rerun) - before == 1


async def test_embedded_redis_restart_keeps_the_queue(tmp_path: Any) -> None:
    """`make run`'s Redis (devtools.provision's config) stopped and started again: the
    queued jobs and the dead letters are still there (append-only file)."""
    port = free_port()
    pairs = zip(REDIS_EXTRA_CONFIG[::2], REDIS_EXTRA_CONFIG[1::2], strict=True)
    argv = [str(_redis_server()), "--bind", "127.0.0.1", "--port", str(port),
            "--dir", str(tmp_path), "--save", ""]  # fmt: skip
    argv += [arg for name, value in pairs for arg in (f"--{name}", value)]

    async def start() -> tuple[subprocess.Popen[bytes], ArqRedis]:
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: ASYNC220
        arq = ArqRedis(host="127.0.0.1", port=port)

        async def up() -> bool:
            try:
                return bool(await arq.ping())
            except redis.exceptions.ConnectionError:
                return False

        await eventually(up, within=15, what="redis-server answers")
        return server, arq

    server, arq = await start()
    try:
        await arq.enqueue_job(lanes.FANOUT_POST, 42, _job_id="kept", _queue_name=lanes.DEFAULT)
        letter = dead_letters.DeadLetter(job_id="dead", function=lanes.CLEANUP_AUTHOR, args=[1, 2])
        await dead_letters.record(arq, letter)
        await arq.aclose()
        server.send_signal(signal.SIGTERM)  # what stopping `make run` does
        server.wait(timeout=15)

        server, arq = await start()
        assert await arq.zscore(lanes.DEFAULT, "kept") is not None
        assert [d.job_id for d in await dead_letters.all_letters(arq)] == ["dead"]
        await arq.aclose()
    finally:
        stop_process(server)
