"""Dead letters: jobs that failed every try, kept in Redis until replayed.

A dead letter is the job as ARQ ran it (function, args, kwargs, lane, job id) plus why and
when it gave up. Replaying clears ARQ's stored failed result (which would block the same job
id for `keep_result`) and enqueues the job again under its own id; every job is idempotent,
so a replay that repeats delivered work changes nothing visible.

    python -m jobs.dead_letters list
    python -m jobs.dead_letters replay ID [ID ...]
    python -m jobs.dead_letters replay --all
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from arq.connections import ArqRedis
from arq.constants import result_key_prefix, retry_key_prefix
from redis.asyncio import Redis

from app.config import get_settings
from app.fanout import lanes
from jobs.connections import arq_pool

DEAD_LETTERS = "dl:jobs"  # hash: job id -> JSON of a DeadLetter


@dataclass
class DeadLetter:
    job_id: str
    function: str
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    lane: str = lanes.DEFAULT
    error: str = ""
    tries: int = 0
    failed_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str | bytes) -> DeadLetter:
        return cls(**json.loads(raw))


async def _one(redis: Redis, command: str, *args: Any) -> Any:
    """One hash command (redis-py types its asyncio hash commands as maybe-not-awaitable)."""
    async with redis.pipeline(transaction=False) as pipe:
        getattr(pipe, command)(*args)
        [reply] = await pipe.execute()
    return reply


async def record(redis: Redis, letter: DeadLetter) -> None:
    await _one(redis, "hset", DEAD_LETTERS, letter.job_id, letter.to_json())


async def forget(redis: Redis, job_id: str) -> None:
    """The job succeeded after all: no dead letter of it."""
    await _one(redis, "hdel", DEAD_LETTERS, job_id)


async def all_letters(redis: Redis) -> list[DeadLetter]:
    raw = await _one(redis, "hgetall", DEAD_LETTERS)
    return sorted((DeadLetter.from_json(v) for v in raw.values()), key=lambda d: d.failed_at)


async def count(redis: Redis) -> int:
    return int(await _one(redis, "hlen", DEAD_LETTERS))


async def replay_letter(arq: ArqRedis, letter: DeadLetter) -> bool:
    """Enqueue the job again under its own id; True when it was queued (False: a job of that
    id is already queued or running, which will do the same work)."""
    async with arq.pipeline(transaction=True) as pipe:
        pipe.delete(result_key_prefix + letter.job_id, retry_key_prefix + letter.job_id)
        await pipe.execute()
    job = await arq.enqueue_job(
        letter.function,
        *letter.args,
        _job_id=letter.job_id,
        _queue_name=letter.lane,
        **letter.kwargs,
    )
    return job is not None


async def replay(arq: ArqRedis, ids: list[str] | None = None) -> list[str]:
    """Replay the given dead letters (all when `ids` is None); the ids replayed. Each is
    removed once enqueued; if it fails every try again it comes back."""
    letters = await all_letters(arq)
    wanted = [d for d in letters if ids is None or d.job_id in ids]
    missing = set(ids or ()) - {d.job_id for d in wanted}
    if missing:
        raise KeyError(f"no dead letter {', '.join(sorted(missing))}")
    done = []
    for letter in wanted:
        await replay_letter(arq, letter)
        await _one(arq, "hdel", DEAD_LETTERS, letter.job_id)
        done.append(letter.job_id)
    return done


def _line(d: DeadLetter) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(d.failed_at))
    call = f"{d.function}({', '.join(json.dumps(a) for a in d.args)})"
    return f"{d.job_id}\t{when}Z\ttries={d.tries}\t{call}\t{d.error}"


async def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.dead_letters", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="one line per dead letter: id, time, tries, call, error")
    rp = sub.add_parser("replay", help="enqueue dead letters again")
    rp.add_argument("ids", nargs="*", metavar="ID")
    rp.add_argument("--all", action="store_true")
    args = parser.parse_args(argv)
    arq = await arq_pool(get_settings())
    try:
        if args.command == "list":
            letters = await all_letters(arq)
            for letter in letters:
                print(_line(letter))
            print(f"{len(letters)} dead letter(s)", file=sys.stderr)
            return 0
        if not args.all and not args.ids:
            parser.error("replay needs IDs or --all")
        try:
            replayed = await replay(arq, None if args.all else args.ids)
        except KeyError as exc:
            print(exc.args[0], file=sys.stderr)
            return 1
        for job_id in replayed:
            print(f"replayed {job_id}")
        return 0
    finally:
        await arq.aclose()


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
