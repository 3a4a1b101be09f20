"""The fan-out's fused write composed for real (decision 0070): the timeline store's insert
with the live counts' tail (app.realtime) and the job's tracking tail (jobs.tracking), in
one script call against the real Redis. Each tail reads only its own keys and arguments, at
offsets the store computes, so a tail whose layout changes moves no other tail: here the
real tails run in either order and beside tails of other sizes, and answer the same."""

from __future__ import annotations

from typing import Any

import pytest

from app.posts.ids import created_ms
from app.realtime import batch_counts, counts
from app.realtime.keys import count_key
from app.timelines.tails import Tail, TailProgram
from jobs import tracking
from tests.helpers import post_id_at, timeline_ids

FANS = [101, 102, 103, 104]

# A tail of the test's own, of any size: it answers its keys, then its arguments after the
# first two (how many keys, how many arguments), exactly as it was handed them.
ECHO = TailProgram(
    "echo",
    """
local nk, na = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
local out = {}
for i = 1, nk do out[#out + 1] = KEYS[k + i] end
for i = 3, na do out[#out + 1] = ARGV[a + i] end
return out
""",
)


def _echo(n_keys: int, n_args: int) -> Tail:
    keys = [f"echo:{{x}}:{i}" for i in range(n_keys)]
    args = [n_keys, n_args + 2, *(f"arg{i}" for i in range(n_args))]
    return Tail(ECHO, keys, args)


async def _setup(state: Any, ms: int) -> tuple[int, str]:
    """A post, every fan's timeline known-empty, fans 0 and 2 online, the post's job owed
    beside another; (post id, job id)."""
    for fan in FANS:
        await state.timelines.rebuild(fan, [])
    await counts.mark_online(state.redis, [FANS[0], FANS[2]], state.settings)
    post_id = post_id_at(ms)
    job = f"fb:{post_id}:{FANS[0]}"
    await tracking.owe(state.redis, post_id, [job, "fb:other"], ttl=60)
    return post_id, job


def _tails(state: Any, post_id: int, job: str, author_id: int) -> tuple[Tail, Tail]:
    count = batch_counts.count_tail(
        state.redis, post_id, created_ms(post_id), FANS, [FANS[0]], state.settings,
        author_id=author_id, counting=True,
    )  # fmt: skip
    progress = tracking.settle_tail(post_id, job, tracking.Progress(written=len(FANS)), ttl=60)
    return count, progress


async def _check(state: Any, post_id: int, count: Tail, progress: Tail) -> None:
    """What the one call did: every timeline, fan 0's count (fan 2 online, not guessed, is
    handed back), the job's step (counted, not done, first visible)."""
    assert batch_counts.counted(count, FANS) == (1, [FANS[2]])
    assert list(progress.reply) == [1, 0, 1, 0]
    assert await state.redis.smembers(tracking.pending_key(post_id)) == {b"fb:other"}
    assert await state.redis.hget(tracking.state_key(post_id), "written") == b"4"
    assert post_id in [int(m) for m in await state.redis.zrange(count_key(FANS[0]), 0, -1)]
    assert await state.redis.zrange(count_key(FANS[2]), 0, -1) == []
    for fan in FANS:
        assert post_id in await timeline_ids(state, fan)


@pytest.mark.parametrize("counts_first", [True, False])
async def test_the_real_tails_ride_the_store_write_in_either_order(
    state: Any, counts_first: bool
) -> None:
    assert state.timelines.runs_tails_with(state.redis)
    post_id, job = await _setup(state, counts.now_ms() - 1000)
    count, progress = _tails(state, post_id, job, author_id=7)
    order = [count, progress] if counts_first else [progress, count]
    gained = await state.timelines.push_with_tails(post_id, created_ms(post_id), FANS, order)
    assert gained == len(FANS)
    await _check(state, post_id, count, progress)


@pytest.mark.parametrize("sizes", [((0, 0), (0, 0)), ((2, 3), (0, 5)), ((5, 0), (1, 1))])
async def test_a_tail_of_another_layout_moves_no_other_tail(
    state: Any, sizes: tuple[tuple[int, int], tuple[int, int]]
) -> None:
    post_id, job = await _setup(state, counts.now_ms() - 1000)
    count, progress = _tails(state, post_id, job, author_id=7)
    before, between = _echo(*sizes[0]), _echo(*sizes[1])
    tails = [before, count, between, progress]
    gained = await state.timelines.push_with_tails(post_id, created_ms(post_id), FANS, tails)
    assert gained == len(FANS)
    for echo in (before, between):
        expected = [*echo.keys, *echo.args[2:]]
        assert [x.decode() for x in echo.reply] == expected
    await _check(state, post_id, count, progress)
    # A replay: nothing gained, nobody counted twice, the job's step counted once.
    count, progress = _tails(state, post_id, job, author_id=7)
    again = await state.timelines.push_with_tails(
        post_id, created_ms(post_id), FANS, [count, progress]
    )
    assert again == 0
    assert batch_counts.counted(count, FANS) == (0, [FANS[2]])
    assert list(progress.reply) == [0, 0, 0, 0]
