"""One hub per API process: a single Redis pub/sub connection multiplexed to every socket.

Why one connection and per-user channels: Redis routes a notification only to the processes
that hold a socket of that user (a PUBLISH nobody listens to is a dict lookup), and a process
pays one connection whatever its socket count. Pull-mode authors publish once per post on
their own channel; a process subscribes to it only while one of its users follows them.

Why a one-slot queue per subscriber: updates carry the running count, so a newer one makes
an older one worthless. The slot is overwritten (coalesced), never grows, and the hub never
awaits a socket: a client whose socket stops draining keeps one pending update and is dropped
after `stall_seconds`, while everyone else is served as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Protocol

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import SSLConnection
from redis.exceptions import RedisError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.models import Visibility
from app.realtime import counts, keys, queries
from app.realtime.counts import FeedCount
from app.realtime.leases import Hold, Leases
from app.realtime.metrics import COALESCED, DROPPED, RECEIVED, SUBSCRIBERS, frame_delivered
from app.redis_scripts import AnyRedis
from app.timelines.store import TimelineStore

log = logging.getLogger("app.realtime")

# Close codes (RFC 6455): the client should reconnect later / the server is going away.
CLOSE_TOO_SLOW = 1013
CLOSE_GOING_AWAY = 1001
CONFIRM_TIMEOUT = 5.0  # seconds to wait for Redis to confirm a SUBSCRIBE
MAX_AUTHOR_BACKLOG = 1000  # pull-mode posts waiting for delivery; beyond it they are skipped
DELIVER_SLICE = 1000  # followers of one pull-mode post checked and counted in one slice, at most
SLICE_WEIGHTS = (1, 2, 4, 5)  # above it, the slices' relative sizes (delivery_slices)
SLICES_IN_FLIGHT = len(SLICE_WEIGHTS)  # slices checked at once (a pooled session each)
ADMIT_BATCH = 500  # subscribers set up together at most (one SQL query covers them all)
UPKEEP_MAX_WAIT = 2.0  # seconds one upkeep pass waits for broadcasts to end, in all
_NO_TRANSACTION = {"isolation_level": "AUTOCOMMIT"}  # the hub's reads (Hub._reads)

OnDrop = Callable[[int, str], Awaitable[None]]


class FrameSink(Protocol):
    """Where a subscriber's frames go when the hub writes them itself (app.api.fast.live_frames)."""

    def send(self, state: FeedCount) -> asyncio.Future[None] | None:
        """Write one frame: None when it went out at once, else the pending write."""
        ...


class Subscriber:
    """One `feedUpdates` subscription: a one-slot queue that merges updates.

    With a sink, the hub writes frames itself: an update goes out inline when the interval
    allows, else a timer sends the newest pending one at the interval's end. Without one,
    the subscription's own task takes updates with `next()`.
    """

    __slots__ = (
        "_inflight",
        "_interval",
        "_last_frame",
        "_pending",
        "_timer",
        "_wake",
        "dropped",
        "on_drop",
        "pending_since",
        "sink",
        "user_id",
        "waiting",
    )

    def __init__(
        self,
        user_id: int,
        on_drop: OnDrop,
        interval: float,
        sink: FrameSink | None = None,
        waiting: set[Subscriber] | None = None,
    ) -> None:
        self.user_id = user_id
        # The hub's set of subscribers holding an update (its stall sweep reads only these).
        self.waiting = waiting
        self.on_drop = on_drop
        self.sink = sink
        self.dropped = False
        self.pending_since = 0.0
        self._interval = interval
        self._pending: FeedCount | None = None
        self._last_frame = 0.0
        # Only a subscriber without a sink is woken (its task calls `next`): an Event (with
        # its waiter deque) per socket was ~0.6 KB of every prepared-frame socket.
        self._wake: asyncio.Event | None = asyncio.Event() if sink is None else None
        self._timer: asyncio.TimerHandle | None = None
        self._inflight: asyncio.Future[None] | None = None

    @property
    def pending(self) -> FeedCount | None:
        return self._pending

    def offer(self, state: FeedCount, now: float | None = None) -> None:
        """Never blocks: replaces an update the socket has not taken yet. `now` (monotonic)
        lets a broadcast read the clock once for all its subscribers."""
        if self.dropped:
            return
        if now is None:
            now = time.monotonic()
        sink = self.sink
        if (
            sink is not None
            and self._pending is None
            and self._timer is None
            and self._inflight is None
            and self._last_frame + self._interval - now <= 0
        ):
            # A broadcast's common case, `_pump`'s without the pending slot: the frame goes
            # out now, so the subscriber never joins `waiting` (nor the stall sweep's walk).
            self._last_frame = now
            frame_delivered(state.published_ms)
            waiting = sink.send(state)
            if waiting is not None:
                self._inflight = waiting
                waiting.add_done_callback(self._sent)
            return
        if self._pending is None:
            self.pending_since = now
            if self.waiting is not None:
                self.waiting.add(self)
        else:
            COALESCED.inc()
        self._pending = state
        if self._wake is not None:
            self._wake.set()
        else:
            self._pump(now)

    def offer_initial(self, state: FeedCount, read_at_ms: float) -> None:
        """The count read at subscribe time, unless a notification published after the read
        already arrived (it is newer)."""
        if self._pending is None or self._pending.published_ms < read_at_ms:
            self._pending = None
            self.offer(state)

    def mark_dropped(self) -> None:
        self.dropped = True
        self._pending = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._wake is not None:
            self._wake.set()

    def _pump(self, now: float | None = None) -> None:
        """Send the pending update now if the interval and the socket allow it."""
        if self._pending is None or self._timer is not None or self._inflight is not None:
            return
        if now is None:
            now = time.monotonic()
        delay = self._last_frame + self._interval - now
        if delay > 0:
            self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)
            return
        state, self._pending = self._pending, None
        self._last_frame = now
        _observe(state)
        assert self.sink is not None
        waiting = self.sink.send(state)
        if waiting is not None:
            self._inflight = waiting
            waiting.add_done_callback(self._sent)

    def _on_timer(self) -> None:
        self._timer = None
        if not self.dropped:
            self._pump()

    def _sent(self, done: asyncio.Future[None]) -> None:
        self._inflight = None
        if not done.cancelled():
            done.exception()  # retrieved: a failed write ends with the socket's close
        if not self.dropped:
            self._pump()

    async def next(self) -> FeedCount:
        """The next update to send; at most one per interval (a burst becomes one frame).

        Once dropped it waits until cancelled: the hub is closing the socket, and ending the
        stream here would race a 'complete' message against that close.
        """
        wake = self._wake
        assert wake is not None, "a subscriber with a sink is not read with next()"
        while True:
            await wake.wait()
            delay = self._last_frame + self._interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.dropped:
                await asyncio.get_running_loop().create_future()
            state, self._pending = self._pending, None
            wake.clear()
            if state is None:
                continue
            self._last_frame = time.monotonic()
            _observe(state)
            return state


def _observe(state: FeedCount) -> None:
    frame_delivered(state.published_ms)  # counted at the end of the loop turn


def delivery_slices(users: list[int]) -> list[list[int]]:
    """A pull-mode post's local followers cut into slices checked at once: one slice up to
    DELIVER_SLICE, else SLICES_IN_FLIGHT slices growing as SLICE_WEIGHTS (1:2:4:5).

    Why all at once: with 5,000 followers in five slices of 1,000 and four in flight, the
    fifth slice's SQL and Redis round trips started only when a first slice was back,
    and ran while the loop wrote the other slices' frames: that slice's frames were the
    round's last, 39-52 ms after the fourth's (docs/benchmarks.md, "Live sockets, round
    3"). Why growing: the count script runs one slice after another in Redis, and the
    first frame waited for the first slice's SQL and script (25 ms of a 125 ms round for
    1,250 users). A small first slice starts the writes early; each next slice's script
    (~8 us a user) ends while the slices before it are written (~16-20 us a frame) as
    long as each slice is at most ~2.5x the users before it (decision 0062)."""
    n = len(users)
    if n <= DELIVER_SLICE:
        return [users] if users else []
    total = sum(SLICE_WEIGHTS)
    bounds, acc = [0], 0
    for weight in SLICE_WEIGHTS:
        acc += weight
        bounds.append(n * acc // total)
    return [users[a:b] for a, b in itertools.pairwise(bounds) if b > a]


class HeapFreezer:
    """Keeps the sockets' objects out of the garbage collector's full walks (decision 0039).

    Why: every socket holds a few hundred GC-tracked objects for hours; a full collection
    walks all of them (1.5 M objects at 5,000 sockets: 0.5-1.8 s on this machine's cores),
    and it lands inside whatever runs, a broadcast included: the worst round's last frame
    was 3-8x the median's. `gc.freeze()` moves every object alive now into a generation
    the collector never walks; objects still die by reference counting as before.

    The price: a reference cycle among frozen objects (a closed socket's handler, tasks
    and frames) is not collected while frozen. So the heap is thawed and collected once
    (one pause, after churn, not in every broadcast) when the subscribers dropped since the
    last thaw reach a quarter of those frozen.
    """

    THAW_FRACTION = 0.25

    def __init__(self, min_subscribers: int) -> None:
        self.min_subscribers = min_subscribers
        self.frozen_for = 0  # subscribers at the last freeze (0: nothing frozen by us)
        self.admitted = 0  # subscribers admitted since the last freeze
        self.dropped = 0  # subscribers gone since the last thaw

    def tick(self, subscribers: int) -> None:
        """Called about once a second by the hub."""
        if self.min_subscribers <= 0:
            return
        if self.frozen_for and self.dropped >= max(1, self.THAW_FRACTION * self.frozen_for):
            self.thaw()
            gc.collect()
        if subscribers >= self.min_subscribers and (self.admitted or not self.frozen_for):
            gc.collect(1)  # the young generations' garbage is not frozen (cheap)
            gc.freeze()
            self.frozen_for = max(self.frozen_for, subscribers)
            self.admitted = 0

    def thaw(self) -> None:
        if self.frozen_for:
            gc.unfreeze()
            self.frozen_for = 0
            self.dropped = 0


class CollectorPause:
    """The garbage collector held off while broadcasts are being written (nested: the
    last one to end turns it back on), when HeapFreezer is on.

    Why: a broadcast to 5,000 sockets allocates ~10,000 tracked objects (states, replies,
    coroutines), which set off 6-20 young collections inside the round; timed in the
    server they added 2-18 ms to a round (one 17.7 ms, descheduled mid-walk on a loaded
    machine). Held off, the same garbage is collected by the first allocation after the
    round, once, after the last frame (decision 0062). Only reference cycles wait: the
    rest is freed by reference counting as always."""

    def __init__(self) -> None:
        self.depth = 0
        self._disabled = False

    def __enter__(self) -> None:
        if self.depth == 0 and gc.isenabled():
            gc.disable()
            self._disabled = True
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0 and self._disabled:
            self._disabled = False
            gc.enable()


def _pubsub_client(redis: AnyRedis, avoid: Redis | None = None) -> Redis:
    """Classic pub/sub on a cluster reaches every node, so any one node will do (redis-py's
    asyncio cluster client has no pubsub of its own; decision 0040): a known node other than
    `avoid` (the one whose connection was lost), else a seed node (before the client has
    met the cluster)."""
    if isinstance(redis, Redis):
        return redis
    nodes = [*redis.get_nodes()] or [*redis.nodes_manager.startup_nodes.values()]
    if avoid is not None:
        kwargs = avoid.connection_pool.connection_kwargs
        lost = (kwargs.get("host"), int(kwargs.get("port", 0)))
        nodes = [n for n in nodes if (n.host, int(n.port)) != lost] or nodes
    node = random.choice(nodes)
    return Redis(
        host=node.host,
        port=int(node.port),
        health_check_interval=30,
        socket_keepalive=True,
        socket_connect_timeout=2.0,
        **_node_credentials(redis),
    )


def _node_credentials(cluster: RedisCluster) -> dict[str, Any]:
    """The cluster client's credentials and TLS settings, for a plain connection to one of
    its nodes (no read timeout: a subscriber waits for messages)."""
    given = cluster.connection_kwargs
    out = {k: given[k] for k in ("username", "password", "credential_provider") if given.get(k)}
    if issubclass(given.get("connection_class", object), SSLConnection):
        out["ssl"] = True
        out.update({k: v for k, v in given.items() if k.startswith("ssl_") and v is not None})
    return out


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
        self._follows: dict[int, set[int]] = {}  # local user -> pull-mode authors followed
        self._followers: dict[int, set[int]] = {}  # pull-mode author -> local users
        self._joined: set[str] = set()  # channels SUBSCRIBE was sent for
        self._confirm: dict[bytes, asyncio.Future[None]] = {}
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
        self._pubsub: PubSub | None = None
        self._pubsub_redis: Redis | None = None
        # PubSub.connect() is not safe to race: two first callers would each take a
        # connection, and one would hear confirmations nobody reads.
        self._send_lock = asyncio.Lock()
        self._running = False
        self._count = 0  # subscribers held
        self.heap = HeapFreezer(self.settings.realtime_gc_freeze_subscribers)
        self._gc_pause = CollectorPause()

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Never fails for Redis being down: the API serves feeds without live updates and
        the read loop connects when Redis is back."""
        self._pubsub_redis = _pubsub_client(self.redis)
        self._pubsub = self._pubsub_redis.pubsub()
        self._running = True
        try:
            await self._join(self.channels.hub, wait=False)
        except (RedisError, OSError):
            log.warning("Redis unavailable at start: live updates wait for it", exc_info=True)
        self._loops = [
            asyncio.create_task(self._read_loop(), name="realtime-read"),
            asyncio.create_task(self._sweep_loop(), name="realtime-sweep"),
            asyncio.create_task(self._refresh_loop(), name="realtime-refresh"),
            asyncio.create_task(self._lease_loop(), name="realtime-leases"),
        ]

    async def stop(self) -> None:
        """Close every socket still subscribed (1001), then the pub/sub connection."""
        self._running = False
        for sub in [s for subs in self._subs.values() for s in subs]:
            self.drop(sub, CLOSE_GOING_AWAY, "server shutting down", reason="shutdown")
        for task in self._loops:
            task.cancel()
        self.heap.thaw()
        pending = [*self._loops, *self._tasks]
        if pending:
            await asyncio.wait(pending, timeout=2.0)
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            await asyncio.wait_for(self.leases.release_all(), 2.0)
        if self._pubsub is not None:
            with contextlib.suppress(RedisError, OSError):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
                if self._pubsub_redis is not None and self._pubsub_redis is not self.redis:
                    await self._pubsub_redis.aclose()
            self._pubsub = None

    @property
    def subscriber_count(self) -> int:
        return self._count

    @contextlib.asynccontextmanager
    async def _reads(self) -> AsyncIterator[AsyncSession]:
        """A session for the hub's reads, outside a transaction (autocommit): each is one
        SELECT, or two independent ones, which READ COMMITTED gives a snapshot of its own
        anyway. BEGIN and ROLLBACK were two of such a read's three round trips: 3-8% of the
        connects' CPU, and two waits before a pull-mode post's first frame (issue 24)."""
        async with self.sessions() as session:
            await session.connection(execution_options=_NO_TRANSACTION)
            yield session

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
        await self._join_many([self.channels.user(u) for u in users])
        await counts.mark_online(self.redis, users, self.settings)
        authors = await self._learn_follows(users)
        read_at = counts.now_ms()
        # Posts that arrived while a user was away (no count was kept for them while
        # offline): pushed ones from the timeline, pull-mode ones from Postgres; only those
        # the user may be told about now (the timeline may still hold an unfollowed or
        # blocked author's posts), with their authors so the pairs' stop marks apply.
        # Counting them again is idempotent.
        since = await counts.reset_marks(self.redis, users, self.settings)
        limit = self.settings.realtime_count_max
        latest = await self.timelines.latest_many(users, limit)
        found = {u: [(p, ms) for p, ms in latest[u] if ms > since[u]] for u in users}
        pulling = [u for u in users if authors.get(u)]
        async with self._reads() as session:
            if pulling:
                pulled = await queries.posts_since_each(
                    session,
                    sorted({a for u in pulling for a in authors[u]}),
                    min(since[u] for u in pulling),
                    limit,
                )
                for u in pulling:
                    mine = [e for a in authors[u] for e in pulled.get(a, ()) if e[1] > since[u]]
                    found[u] += sorted(mine, key=lambda e: e[1], reverse=True)[:limit]
            entries = await queries.countable_entries_many(
                session, {u: found[u] for u in users if found[u]}
            )
        states = await counts.add_each(
            self.redis, {u: entries.get(u, []) for u in users}, self.settings
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
        for author in self._follows.pop(sub.user_id, set()):
            followers = self._followers.get(author)
            if followers is not None:
                followers.discard(sub.user_id)
                if not followers:
                    del self._followers[author]
                    channels.append(self.channels.author(author))
        self._spawn(self._leave(channels))

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
            await asyncio.wait_for(sub.on_drop(code, message), timeout=30)

    # -- pub/sub --------------------------------------------------------------------------

    async def _join(self, channel: str, *, wait: bool = True) -> None:
        await self._join_many([channel], wait=wait)

    async def _join_many(self, channels: list[str], *, wait: bool = True) -> None:
        """SUBSCRIBE once per channel, all new ones in one command; wait for Redis to confirm
        each so nothing published after this returns is missed."""
        assert self._pubsub is not None
        waits: list[asyncio.Future[None]] = []
        new: list[str] = []
        for channel in channels:
            raw = channel.encode()
            if channel in self._joined:
                fut = self._confirm.get(raw)
            else:
                self._joined.add(channel)
                fut = asyncio.get_running_loop().create_future()
                self._confirm[raw] = fut
                new.append(channel)
            if fut is not None:
                waits.append(fut)
        if new:
            try:
                async with self._send_lock:
                    await self._pubsub.subscribe(*new)
            except BaseException:
                for channel in new:
                    self._joined.discard(channel)
                    self._confirm.pop(channel.encode(), None)
                raise
        if wait and waits:
            await asyncio.wait_for(asyncio.shield(asyncio.gather(*waits)), CONFIRM_TIMEOUT)

    async def _leave(self, channels: list[str]) -> None:
        assert self._pubsub is not None
        gone = [c for c in channels if c in self._joined and not self._wanted(c)]
        for c in gone:
            self._joined.discard(c)
            self._confirm.pop(c.encode(), None)
        if gone and self._running:
            with contextlib.suppress(RedisError, OSError):
                async with self._send_lock:
                    await self._pubsub.unsubscribe(*gone)

    def _wanted(self, channel: str) -> bool:
        users, authors = self.channels.user_prefix, self.channels.author_prefix
        if channel.startswith(users):
            return int(channel[len(users) :]) in self._subs
        if channel.startswith(authors):
            return int(channel[len(authors) :]) in self._followers
        return True

    async def _repoint(self) -> None:
        """On a cluster, listen on another node after the connection to one was lost (a node
        stopped, a failover): every channel joined so far is joined there. A plain server's
        PubSub reconnects to its one address by itself."""
        if isinstance(self.redis, Redis) or self._pubsub is None:
            return
        old, old_client = self._pubsub, self._pubsub_redis
        async with self._send_lock:
            client = _pubsub_client(self.redis, avoid=old_client)
            pubsub = client.pubsub()
            joined = sorted(self._joined)
            try:
                if joined:
                    await pubsub.subscribe(*joined)
            except BaseException:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                    await client.aclose()
                raise
            self._pubsub, self._pubsub_redis = pubsub, client
        log.warning("realtime pub/sub moved to cluster node %s", client.connection_pool)
        with contextlib.suppress(Exception):
            await old.aclose()  # type: ignore[no-untyped-call]
            if old_client is not None:
                await old_client.aclose()

    async def _read_loop(self) -> None:
        assert self._pubsub is not None
        backoff = 0.1
        resync = False
        while True:
            try:
                if self.channels.hub not in self._joined:
                    await self._join(self.channels.hub, wait=False)
                message = await self._pubsub.get_message(timeout=None)
            except (RedisError, OSError):
                log.warning("realtime pub/sub connection lost; retrying", exc_info=True)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                resync = True
                with contextlib.suppress(RedisError, OSError):
                    await self._repoint()
                continue
            backoff = 0.1
            if resync:
                resync = False  # messages were lost while disconnected: re-read every count
                self._spawn(self._resync())
            if message is not None:
                try:
                    self._handle(message)
                except Exception:  # one bad message must not stop the process's live updates
                    log.exception("bad realtime message on %r", message.get("channel"))

    def _handle(self, message: dict[str, Any]) -> None:
        kind, channel = message["type"], message["channel"]
        if kind == "subscribe":
            fut = self._confirm.pop(channel, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
            return
        if kind != "message":
            return
        if channel.startswith(self._user_prefix):
            RECEIVED.labels("user").inc()
            subs = self._subs.get(int(channel[len(self._user_prefix) :]))
            if subs:
                state = counts.decode_count(message["data"])
                for sub in subs:
                    sub.offer(state)
        elif channel.startswith(self._author_prefix):
            RECEIVED.labels("author").inc()
            if self._author_backlog >= MAX_AUTHOR_BACKLOG:
                log.warning("pull-mode notification backlog full; skipping one")
                return
            post_id, created, visibility, published = message["data"].split(b":")
            self._author_backlog += 1
            self._no_broadcast.clear()
            self._spawn(
                self._deliver_author(
                    int(channel[len(self._author_prefix) :]),
                    int(post_id),
                    int(created),
                    visibility.decode(),
                    float(published),
                )
            )

    async def _deliver_author(
        self, author_id: int, post_id: int, created: int, visibility: str, published: float
    ) -> None:
        """A pull-mode post: check follows and blocks now, count it, offer it locally.

        In at most SLICES_IN_FLIGHT slices, all checked at once (`delivery_slices`): the
        first frames leave while later slices are still being checked, and the last frame
        waits for one slice's SQL and Redis round trips, not for every slice's in turn."""
        try:
            async with self._author_sem:
                local = sorted(self._followers.get(author_id, ()))
                if not local or visibility == Visibility.PRIVATE:
                    return

                async def deliver(users: list[int]) -> None:
                    async with self._reads() as session:
                        allowed = await queries.allowed_recipients(session, author_id, users)
                    states = await counts.add_for_users(
                        self.redis,
                        sorted(allowed),
                        [(post_id, created)],
                        self.settings,
                        author_id=author_id,
                        published_ms=published,
                    )
                    now = time.monotonic()
                    for user_id, state in states.items():
                        for sub in self._subs.get(user_id, ()):
                            sub.offer(state, now)

                slices = delivery_slices(local)
                # Only with the heap freezer on: REALTIME_GC_FREEZE_SUBSCRIBERS=0 leaves the
                # collector as Python runs it, everywhere.
                paused = self.heap.min_subscribers > 0
                with self._gc_pause if paused else contextlib.nullcontext():
                    outcomes = await asyncio.gather(*map(deliver, slices), return_exceptions=True)
                failed = [o for o in outcomes if isinstance(o, BaseException)]
                if failed:
                    raise failed[0]
        except Exception:
            log.warning("pull-mode notification for author %d failed", author_id, exc_info=True)
        finally:
            self._author_backlog -= 1
            if not self._author_backlog:
                self._no_broadcast.set()

    # -- background upkeep ----------------------------------------------------------------

    async def _learn_follows(self, user_ids: list[int]) -> dict[int, set[int]]:
        """Re-read which pull-mode authors these local users follow; (un)subscribe authors."""
        async with self._reads() as session:
            found = await queries.pull_followees(session, user_ids)
        joined: list[str] = []
        left: list[str] = []
        for user_id in user_ids:
            if user_id not in self._subs:
                continue  # gone while we were reading
            new = found.get(user_id, set())
            old = self._follows.get(user_id, set())
            for author in new - old:
                followers = self._followers.setdefault(author, set())
                if not followers:
                    joined.append(self.channels.author(author))
                followers.add(user_id)
            for author in old - new:
                followers = self._followers.get(author, set())
                followers.discard(user_id)
                if not followers:
                    self._followers.pop(author, None)
                    left.append(self.channels.author(author))
            if new:
                self._follows[user_id] = new
            else:
                self._follows.pop(user_id, None)
        for channel in joined:
            await self._join(channel)
        if left:
            await self._leave(left)
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
        """New follows of pull-mode authors and mode switches reach live sockets this late."""
        while True:
            await asyncio.sleep(self.settings.realtime_refresh_seconds)
            users = list(self._subs)
            pause = self._upkeep_pause()
            for i in range(0, len(users), 1000):
                await pause()
                try:
                    await counts.mark_online(self.redis, users[i : i + 1000], self.settings)
                    await self._learn_follows(users[i : i + 1000])
                except Exception:
                    log.warning("realtime follow refresh failed", exc_info=True)

    async def _lease_loop(self) -> None:
        """Keep this process's sockets and subscriptions counted (app.realtime.leases)."""
        while True:
            await asyncio.sleep(self.settings.realtime_lease_seconds / 3)
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
            await asyncio.sleep(min(1.0, stall / 4))
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
        for i in range(0, len(users), 1000):
            await pause()
            try:
                states = await counts.add_for_users(
                    self.redis, users[i : i + 1000], [], self.settings
                )
            except (RedisError, OSError):
                return
            for user_id, state in states.items():
                for sub in self._subs.get(user_id, ()):
                    sub.offer(state)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
