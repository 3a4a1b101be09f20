"""The queue's failover fence, priced (decision 0091): what the relay pays per batch to know
its jobs are on a replica, and what a job pays to know the master did not change under it.

A private master and its replica (the embedded valkey-server, loopback). In interleaved
rounds, a relay batch of `--batch` jobs enqueued with ARQ's `enqueue_job` as the relay did
before (enqueue only) and fenced (`QueueFence.begin()`, the enqueues, `confirm()`: INFO,
then SET + WAIT 1 + INFO in one pipeline); and a job's two master checks (`INFO
replication` twice) against one PING. Medians over the rounds, and their ratio.

    python -m benchmarks.queue_fence [--rounds 40] [--batch 1 --batch 100]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median

from arq.connections import ArqRedis

from app.redis_client import QueueFence
from benchmarks.common import free_port, stop_processes, wait_for_redis
from devtools import provision


def _server(port: int, workdir: Path, replica_of: int | None = None) -> subprocess.Popen[bytes]:
    argv = [str(provision._redis_server()), "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(workdir),
            "--dbfilename", f"{port}.rdb", "--repl-diskless-sync-delay", "0"]  # fmt: skip
    if replica_of is not None:
        argv += ["--replicaof", "127.0.0.1", str(replica_of)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _replica_up(master: ArqRedis) -> None:
    for _ in range(200):
        if int((await master.info("replication")).get("connected_slaves", 0)) >= 1:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the replica did not connect")


async def _batch(arq: ArqRedis, fence: QueueFence | None, prefix: str, n: int) -> float:
    """Seconds for one relay batch of `n` jobs (fenced when `fence` is given)."""
    started = time.perf_counter()
    epoch = await fence.begin() if fence is not None else None
    for i in range(n):
        await arq.enqueue_job("fanout_post", i, _job_id=f"{prefix}:{i}")
    if fence is not None and epoch is not None:
        await fence.confirm(epoch)
    return time.perf_counter() - started


async def run(rounds: int, batches: list[int]) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="queue-fence-"))
    master_port, replica_port = free_port(), free_port()
    procs = [_server(master_port, workdir)]
    procs.append(_server(replica_port, workdir, replica_of=master_port))
    arq = ArqRedis(host="127.0.0.1", port=master_port)
    try:
        await wait_for_redis(arq)
        await _replica_up(arq)
        fence = QueueFence(arq, replicas=1, timeout_ms=1000)
        assert (await fence.begin()).replicas == 1
        for n in batches:
            plain: list[float] = []
            fenced: list[float] = []
            for r in range(rounds):  # interleaved, the order alternating
                pair = [(plain, None), (fenced, fence)]
                for times, f in pair if r % 2 == 0 else pair[::-1]:
                    times.append(await _batch(arq, f, f"b{n}:{r}:{f is not None}", n))
            p, f = median(plain) * 1000, median(fenced) * 1000
            print(f"relay batch of {n:>3} jobs: enqueue only {p:.3f} ms, fenced {f:.3f} ms "
                  f"(x{f / p:.2f}, +{f - p:.3f} ms a batch)")  # fmt: skip
            await arq.flushall()
        pings: list[float] = []
        checks: list[float] = []
        for _ in range(rounds * 5):
            started = time.perf_counter()
            await arq.ping()
            pings.append(time.perf_counter() - started)
            started = time.perf_counter()
            await fence.master_id()
            await fence.master_id()
            checks.append(time.perf_counter() - started)
        p, c = median(pings) * 1000, median(checks) * 1000
        print(f"a job's two master checks: {c:.3f} ms against one PING {p:.3f} ms (x{c / p:.2f})")
    finally:
        await arq.aclose()
        stop_processes(procs)
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--batch", type=int, action="append", help="jobs a batch (repeatable)")
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.batch or [1, 100]))


if __name__ == "__main__":
    main()
