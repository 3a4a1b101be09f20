"""A fan-out batch page's live counts, riding in its timeline write (decisions 0049, 0070).

The timeline store owns the write (`TimelineStore.push_with_tails`); the counts attach a tail
(`count_tail`, Lua `COUNT_TAIL`) that counts the post for the page's online recipients right
after the insert, in the same call: one round trip per page, and atomic, so a user marked
online before the call is counted there and one marked after finds the post in the timeline.
Which recipients' count keys to declare is a guess (`OnlineUsers`); the tail checks every
recipient against the online key itself and hands back the ones it could not count.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio.cluster import RedisCluster

from app.config import Settings
from app.realtime import constants, keys
from app.realtime.count_scripts import COUNT_NODE_TAIL, COUNT_TAIL
from app.realtime.counts import count_head, now_ms, user_keys
from app.realtime.metrics import PUBLISHED
from app.redis_scripts import AnyRedis
from app.timelines.tails import Tail


class OnlineUsers:
    """A worker's recent copy of the online set (`fu:<ns>:online`), refreshed at most every
    `refresh_seconds`: which recipients of a batch to declare count keys for in the count
    tail. Only a guess: the tail checks every recipient against the online key itself, and a
    user online but not guessed (connected since the refresh) comes back to be counted
    apart, so a stale copy costs a round trip, never a count."""

    def __init__(self, refresh_seconds: float = constants.ONLINE_REFRESH_SECONDS) -> None:
        self.refresh_seconds = refresh_seconds
        self._users: frozenset[int] = frozenset()
        self._fetched = -math.inf
        self._lock = asyncio.Lock()

    async def guess(self, redis: AnyRedis, settings: Settings) -> frozenset[int]:
        if time.monotonic() - self._fetched < self.refresh_seconds:
            return self._users
        async with self._lock:
            if time.monotonic() - self._fetched >= self.refresh_seconds:
                key = keys.Channels.for_redis(redis, settings.realtime_namespace).online_key
                cutoff = now_ms() - settings.realtime_online_grace_seconds * 1000
                found = cast(list[bytes], await redis.zrangebyscore(key, cutoff, "+inf"))
                self._users = frozenset(int(u) for u in found)
                self._fetched = time.monotonic()
        return self._users


def count_tail(
    redis: AnyRedis,
    post_id: int,
    score_ms: int,
    user_ids: Sequence[int],
    guessed: Sequence[int],
    settings: Settings,
    *,
    author_id: int,
    counting: bool,
) -> Tail:
    """The tail counting one pushed post for the online ones of `user_ids` (the page's
    recipients, in the order of the write's timelines). `guessed`: the users whose count
    keys are declared (those `OnlineUsers` believes online); `counting` off (the post no
    longer reaches followers): nobody is counted, the online ones are only reported.
    `counted` reads its answer."""
    position = {int(u): i for i, u in enumerate(user_ids, 1)}
    mine = [u for u in dict.fromkeys(int(g) for g in guessed) if u in position] if counting else []
    online_key = keys.Channels.for_redis(redis, settings.realtime_namespace).online_key
    cutoff = now_ms() - int(settings.realtime_online_grace_seconds * 1000)
    head = count_head(redis, [(post_id, score_ms)], "p", settings, author_id)
    args = [cutoff, 1 if counting else 0, *head, len(mine), *(position[u] for u in mine)]
    split = None
    if isinstance(redis, RedisCluster):
        ids = [int(u) for u in user_ids]
        split = CountSplit(ids, set(mine), counting, online_key, cutoff, head)
    return Tail(COUNT_TAIL, [online_key, *user_keys(mine)], args, split=split)


@dataclass
class CountSplit:
    """A page's count tail cut by cluster node (`COUNT_NODE_TAIL`, decision 0089): each
    node's call counts the guessed users it serves; the online key's node, called after
    every other, checks the others against the online set. `merge` answers as COUNT_TAIL
    would: (publishes, 1-based positions of the online users not counted), the users whose
    timelines a moved slot sent elsewhere included (not counted in any call; the caller
    checks them and counts the online ones after the same write)."""

    user_ids: list[int]
    guessed: set[int]
    counting: bool
    online_key: str
    cutoff: int
    head: list[Any]

    @property
    def last_key(self) -> Any:
        return self.online_key

    def _checked(self) -> list[int]:
        """Positions (0-based) the online key's node checks: those not counted by guess."""
        if not self.counting:
            return list(range(len(self.user_ids)))
        return [i for i, u in enumerate(self.user_ids) if u not in self.guessed]

    def part(self, positions: Sequence[int], last: bool) -> Tail:
        ids = self.user_ids
        mine = [(j, ids[i]) for j, i in enumerate(positions, 1) if ids[i] in self.guessed]
        mine = mine if self.counting else []
        keys_ = user_keys([u for _, u in mine])
        args: list[Any] = [1 if self.counting else 0, *self.head, len(mine), *(j for j, _ in mine)]
        if last:
            checked = [ids[i] for i in self._checked()]
            keys_.append(self.online_key)
            args += [1, self.cutoff, len(checked), *checked]
        else:
            args.append(0)
        return Tail(COUNT_NODE_TAIL, keys_, args)

    def merge(self, parts: Sequence[tuple[Sequence[int], Tail]], redo: Sequence[int]) -> Any:
        published = sum(int(tail.reply[0]) for _, tail in parts)
        checked = self._checked()
        missed: set[int] = set(redo)
        for _, tail in parts:
            missed.update(checked[int(j) - 1] for j in tail.reply[1])
        return [published, [i + 1 for i in sorted(missed)]]


def counted(tail: Tail, user_ids: Sequence[int]) -> tuple[int, list[int]]:
    """A ridden count tail's answer: (users notified, online users it did not count: not
    guessed, or counting off), `user_ids` as given to `count_tail`."""
    published, missed = tail.reply
    if published:
        PUBLISHED.labels("user").inc(int(published))
    return int(published), [int(user_ids[int(i) - 1]) for i in missed]
