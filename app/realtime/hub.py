"""One hub per API process: a single Redis pub/sub connection multiplexed to every socket.

Why one connection and per-user channels: Redis routes a notification only to the processes
that hold a socket of that user (a PUBLISH nobody listens to is a dict lookup), and a process
pays one connection whatever its socket count. Pull-mode authors publish once per post on
their own channel; a process subscribes to it only while one of its users follows them.

The hub is the routing: which local subscribers a channel's message reaches, which channels
its users need, and the upkeep loops over them. Its parts are apart: the subscriber's
one-slot queue (`subscriber`), the pub/sub connection (`pubsub`), the SQL-backed counting
before a frame (`delivery`), the collector policy (`heap`), its numbers (`constants`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import Visibility
from app.realtime import counts, delivery, keys, queries
from app.realtime.constants import (
    ADMIT_BATCH,
    CLOSE_GOING_AWAY,
    CLOSE_TIMEOUT,
    CLOSE_TOO_SLOW,
    MAX_AUTHOR_BACKLOG,
    RENEWALS_PER_LEASE,
    STOP_TIMEOUT,
    SWEEP_PERIOD,
    SWEEPS_PER_STALL,
    UPKEEP_BATCH,
    UPKEEP_MAX_WAIT,
)
from app.realtime.counts import FeedCount
from app.realtime.delivery import PullPost
from app.realtime.follows import PullFollows
from app.realtime.heap import CollectorPause, HeapFreezer
from app.realtime.leases import Hold, Leases
from app.realtime.metrics import DROPPED, RECEIVED, SUBSCRIBERS
from app.realtime.pubsub import make_listener
from app.realtime.subscriber import FrameSink, OnDrop, Subscriber
from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore

log = logging.getLogger("app.realtime")


class Hub:
    """Routes pub/sub notifications to this process's subscribers."""

    def __init__(
        self,
        redis: AnyRedis,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        timelines: TimelineStore,
        leases_redis: AnyRedis | None = None,
    ) -> None:
        """`redis`: the pubsub role (channels and live counts); `leases_redis`: the limits
        role, where the socket leases live (default: `redis`)."""
        self.redis = redis
        self.sessions = sessions
        self.settings = settings
        self.timelines = timelines
        self.channels = keys.Channels.for_redis(redis, self.settings.realtime_namespace)
        self._user_prefix = self.channels.user_prefix.encode()
        self._author_prefix = self.channels.author_prefix.encode()
        self._subs: dict[int, set[Subscriber]] = {}
        # Sockets and subscriptions held per account and address, across processes.
        self.leases = Leases(leases_redis or redis, self.settings.realtime_lease_seconds)
        self.follows = PullFollows()
        self._followers = self.follows.followers  # pull-mode author -> local users
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._author_sem = asyncio.Semaphore(self.settings.realtime_author_concurrency)
        self._arrivals: list[tuple[Subscriber, asyncio.Future[None]]] = []
        self._waiting: set[Subscriber] = set()  # subscribers holding an undelivered update
        self._admitting: asyncio.Task[None] | None = None
        self._author_backlog = 0
        # Set while no pull-mode post is being delivered: upkeep waits for it (_upkeep_pause).
        self._no_broadcast = asyncio.Event()
        self._no_broadcast.set()
        self.listener = make_listener(
            redis,
            self.channels.hub,
            self._wanted,
            self._handle,
            lambda: self._spawn(self._resync()),  # messages were lost: re-read every count
        )
        self._running = False
        self._count = 0  # subscribers held
        self.heap = HeapFreezer(self.settings.realtime_gc_freeze_subscribers)
        self._gc_pause = CollectorPause()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Never fails for Redis being down: the API serves feeds without live updates and
        the read loop connects when Redis is back."""
        self.listener.open()
        self._running = True
        try:
            await self.listener.join(self.channels.hub, wait=False)
        except (RedisError, OSError):
            log.warning("Redis unavailable at start: live updates wait for it", exc_info=True)
        self._loops = [
            asyncio.create_task(self.listener.read_loop(), name="realtime-read"),
            asyncio.create_task(self._sweep_loop(), name="realtime-sweep"),
            asyncio.create_task(self._refresh_loop(), name="realtime-refresh"),
            asyncio.create_task(self._lease_loop(), name="realtime-leases"),
        ]

    async def stop(self) -> None:
        """Close every socket still subscribed (1001), then the pub/sub connection."""
        self._running = self.listener.running = False
        for sub in [s for subs in self._subs.values() for s in subs]:
            self.drop(sub, CLOSE_GOING_AWAY, "server shutting down", reason="shutdown")
        for task in self._loops:
            task.cancel()
        self.heap.thaw()
        pending = [*self._loops, *self._tasks]
        if pending:
            await asyncio.wait(pending, timeout=STOP_TIMEOUT)
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await asyncio.wait_for(self.leases.release_all(), STOP_TIMEOUT)
        await self.listener.close()

    @property
    def subscriber_count(self) -> int:
        return self._count

    # -- subscribers ----------------------------------------------------------------------

    async def subscribe(
        self, user_id: int, on_drop: OnDrop, sink: FrameSink | None = None
    ) -> Subscriber:
        """Register a subscriber and queue the user's current count as its first update."""
        if not self._running:
            raise RuntimeError("the realtime hub is not running")
        sub = Subscriber(
            user_id, on_drop, self.settings.realtime_coalesce_ms / 1000, sink, self._waiting
        )
        self._subs.setdefault(user_id, set()).add(sub)
        self._count += 1
        SUBSCRIBERS.inc()
        admitted = asyncio.get_running_loop().create_future()
        self._arrivals.append((sub, admitted))
        if self._admitting is None:
            self._admitting = asyncio.create_task(self._admit_arrivals(), name="realtime-admit")
        try:
            await admitted
        except BaseException:
            self.unsubscribe(sub)
            raise
        return sub

    async def _admit_arrivals(self) -> None:
        """Admit subscribers in batches: whoever arrived while the last batch was being
        set up goes in the next one. One subscriber alone pays no wait; a reconnect storm
        pays one SUBSCRIBE, one pipeline per Redis step and one query per SQL step per
        batch instead of per socket (measured: ~13 ms of server CPU per socket before)."""
        try:
            while self._arrivals:
                batch = self._arrivals[:ADMIT_BATCH]
                del self._arrivals[:ADMIT_BATCH]
                batch = [(sub, fut) for sub, fut in batch if not fut.done()]
                if not batch:
                    continue
                try:
                    await self._admit([sub for sub, _ in batch])
                except Exception as exc:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(exc)
                else:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_result(None)
                    self.heap.admitted += len(batch)
        finally:
            self._admitting = None

    async def _admit(self, subs: list[Subscriber]) -> None:
        """Join the users' channels and queue each one's current count as its first update."""
        users = sorted({sub.user_id for sub in subs if not sub.dropped})
        if not users:
            return
        await self.listener.join_many([self.channels.user(u) for u in users])
        # Before they count as online: no fan-out batch counts a muted author's post for them.
        await delivery.keep_mutes(self.redis, self.sessions, self.settings, users)
        await counts.mark_online(self.redis, users, self.settings)
        authors = await self._learn_follows(users)
        read_at = counts.now_ms()
        states = await delivery.first_counts(
            self.redis, self.sessions, self.timelines, self.settings, users, authors
        )
        for sub in subs:
            if not sub.dropped:
                sub.offer_initial(states[sub.user_id], read_at)

    def unsubscribe(self, sub: Subscriber) -> None:
        """Forget a subscriber (idempotent); channels nobody needs any more are left."""
        sub.mark_dropped()  # no frame after this, even one already timed
        subs = self._subs.get(sub.user_id)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        self._count -= 1
        SUBSCRIBERS.dec()
        self.heap.dropped += 1
        if subs:
            return
        del self._subs[sub.user_id]
        channels = [self.channels.user(sub.user_id)]
        channels += map(self.channels.author, self.follows.forget(sub.user_id))
        self._spawn(self.listener.leave(channels))

    def release_soon(self, hold: Hold) -> None:
        """Give a socket's or subscription's lease back without waiting (idempotent)."""
        if not hold.released:
            self._spawn(hold.release())

    def drop(self, sub: Subscriber, code: int, message: str, *, reason: str) -> None:
        """Stop serving a subscriber and close its socket in the background."""
        if sub.dropped:
            return
        sub.mark_dropped()
        self.unsubscribe(sub)
        DROPPED.labels(reason).inc()
        self._spawn(self._close(sub, code, message))

    async def _close(self, sub: Subscriber, code: int, message: str) -> None:
        # A stuck socket may never accept the close frame; the server's websocket keep-alive
        # (ping timeout) ends the connection then. Do not hold a task forever meanwhile.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sub.on_drop(code, message), timeout=CLOSE_TIMEOUT)

    # -- routing ---------------------------------------------------------------------------

    def _wanted(self, channel: str) -> bool:
        users, authors = self.channels.user_prefix, self.channels.author_prefix
        if channel.startswith(users):
            return self.channels.id_in(channel, len(users)) in self._subs
        if channel.startswith(authors):
            return self.channels.id_in(channel, len(authors)) in self._followers
        return True

    def _handle(self, message: dict[str, Any]) -> None:
        """A published message (the listener's `on_message`): a user's new count goes to
        that user's subscribers here; a pull-mode post is delivered in the background."""
        if message["type"] != "message":
            return
        channel = message["channel"]
        if channel.startswith(self._user_prefix):
            RECEIVED.labels("user").inc()
            subs = self._subs.get(self.channels.id_in(channel, len(self._user_prefix)))
            if subs:
                state = counts.decode_count(message["data"])
                for sub in subs:
                    sub.offer(state)
        elif channel.startswith(self._author_prefix):
            RECEIVED.labels("author").inc()
            if self._author_backlog >= MAX_AUTHOR_BACKLOG:
                log.warning("pull-mode notification backlog full; skipping one")
                return
            author_id = self.channels.id_in(channel, len(self._author_prefix))
            post = PullPost.parse(author_id, message["data"])
            self._author_backlog += 1
            self._no_broadcast.clear()
            self._spawn(self._deliver_author(post))

    def _offer(self, states: dict[int, FeedCount], now: float | None = None) -> None:
        """Each user's new count to that user's subscribers in this process."""
        for user_id, state in states.items():
            for sub in self._subs.get(user_id, ()):
                sub.offer(state, now)

    async def _deliver_author(self, post: PullPost) -> None:
        """A pull-mode post: check follows and blocks now, count it, offer it locally
        (`delivery.deliver_pull_post`), at most `realtime_author_concurrency` at once."""
        try:
            async with self._author_sem:
                local = sorted(self._followers.get(post.author_id, ()))
                if not local or post.visibility == Visibility.PRIVATE:
                    return
                # Only with the heap freezer on: REALTIME_GC_FREEZE_SUBSCRIBERS=0 leaves the
                # collector as Python runs it, everywhere.
                paused = self.heap.min_subscribers > 0
                with self._gc_pause if paused else contextlib.nullcontext():
                    await delivery.deliver_pull_post(
                        self.redis, self.sessions, self.settings, post, local, self._offer
                    )
        except Exception:
            log.warning(
                "pull-mode notification for author %d failed", post.author_id, exc_info=True
            )
        finally:
            self._author_backlog -= 1
            if not self._author_backlog:
                self._no_broadcast.set()

    # -- background upkeep ----------------------------------------------------------------

    async def _learn_follows(self, user_ids: list[int]) -> dict[int, set[int]]:
        """Re-read which pull-mode authors these local users follow; (un)subscribe authors."""
        async with delivery.reads(self.sessions) as session:
            found = await queries.pull_followees(session, user_ids)
        joined: list[int] = []
        left: list[int] = []
        for user_id in user_ids:
            if user_id not in self._subs:
                continue  # gone while we were reading
            first, last = self.follows.set(user_id, found.get(user_id, set()))
            joined += first
            left += last
        for author in joined:
            await self.listener.join(self.channels.author(author))
        if left:
            await self.listener.leave([self.channels.author(a) for a in left])
        return found

    def _upkeep_pause(self) -> Callable[[], Awaitable[None]]:
        """For one upkeep pass: awaited before each of its batches, it waits until no
        pull-mode post is being delivered, UPKEEP_MAX_WAIT in all over the pass.

        Why: the upkeep loops (lease renewal, follow refresh, resync) run every 20-30 s over
        every socket, and a batch that runs inside a broadcast shares the event loop, Redis
        and the database with its frames (decision 0062). Nothing in them is urgent to the
        second; the budget is per pass, not per batch, so a steady stream of posts delays a
        renewal of 20,000 sockets' 40 batches by 2 s, not 80 (the lease is 60 s)."""
        deadline = time.monotonic() + UPKEEP_MAX_WAIT

        async def pause() -> None:
            left = deadline - time.monotonic()
            if left > 0 and not self._no_broadcast.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._no_broadcast.wait(), left)

        return pause

    async def _refresh_loop(self) -> None:
        """New follows of pull-mode authors and mode switches reach live sockets this late;
        the users' mutes are planted again (`delivery.keep_mutes`)."""
        while True:
            await asyncio.sleep(self.settings.realtime_refresh_seconds)
            users = list(self._subs)
            pause = self._upkeep_pause()
            for i in range(0, len(users), UPKEEP_BATCH):
                await pause()
                batch = users[i : i + UPKEEP_BATCH]
                try:
                    await delivery.keep_mutes(self.redis, self.sessions, self.settings, batch)
                    await counts.mark_online(self.redis, batch, self.settings)
                    await self._learn_follows(batch)
                except Exception:
                    log.warning("realtime follow refresh failed", exc_info=True)

    async def _lease_loop(self) -> None:
        """Keep this process's sockets and subscriptions counted (app.realtime.leases)."""
        while True:
            await asyncio.sleep(self.settings.realtime_lease_seconds / RENEWALS_PER_LEASE)
            try:
                await self.leases.renew(self._upkeep_pause())
            except Exception:
                log.warning("realtime lease renewal failed", exc_info=True)

    async def _sweep_loop(self) -> None:
        """Drop subscribers whose socket has not taken an update for `stall_seconds`. Only
        those holding an update are looked at: with 20,000 idle sockets a walk over all of
        them every second was a tenth of the process's idle CPU."""
        stall = self.settings.realtime_stall_seconds
        while True:
            await asyncio.sleep(min(SWEEP_PERIOD, stall / SWEEPS_PER_STALL))
            if self._no_broadcast.is_set():  # a freeze or thaw is a pause: not in a broadcast
                self.heap.tick(self.subscriber_count)
            now = time.monotonic()
            for sub in list(self._waiting):
                if sub.pending is None or sub.dropped:
                    self._waiting.discard(sub)
                elif now - sub.pending_since > stall:
                    self._waiting.discard(sub)
                    self.drop(sub, CLOSE_TOO_SLOW, "too slow: reconnect", reason="slow")

    async def _resync(self) -> None:
        users = list(self._subs)
        pause = self._upkeep_pause()
        for i in range(0, len(users), UPKEEP_BATCH):
            await pause()
            try:
                states = await counts.add_for_users(
                    self.redis, users[i : i + UPKEEP_BATCH], [], self.settings
                )
            except (RedisError, OSError):
                return
            self._offer(states)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
