"""The synthetic network, written with COPY: a Zipf follow graph with planted big authors.

Ids are laid out so that the planted users are known without a lookup:
1 the celebrity (`Scale.celebrity` followers), 2 the "50k" author (`Scale.big`), then the
fan-out curve's authors (`Scale.ladder`), the read curve's pool of authors and its viewers
(viewer k follows exactly the pool's first k authors), then the ordinary users. Ordinary users
follow a log-normal number of followees drawn with Zipf weights (rank + offset) ** -s over a
random order of the ordinary users; the offset is fitted so that the most-followed generated
author has about `natural_top` x `big` followers (below the planted ones). A share of users
(1 - active_share) has not been active within ACTIVE_DAYS: fan-out skips them, and they hold
no timeline. Planted users are all active.

Follows go in as binary COPY built by numpy (about 38 bytes a row) with the table's indexes
dropped and rebuilt after, foreign-key triggers off (checked by construction, as devtools.seed
does). A small table, bench_report_meta, records which scale made the network, so `--reuse`
keeps a network only when it was generated with the same parameters.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import numpy as np
from tqdm import tqdm

from benchmarks.report.scales import Scale
from devtools.seed.common import connect, skip_fk_triggers, sync_user_sequence

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
COPY_TRAILER = b"\xff\xff"
FOLLOW_ROW = np.dtype(
    [("n", ">i2"), ("l1", ">i4"), ("f", ">i8"), ("l2", ">i4"), ("e", ">i8"), ("l3", ">i4"),
     ("t", ">i8")]
)  # fmt: skip
COPY_CHUNK = 1_000_000
ACTIVE_DAYS = 30  # the service's default ACTIVE_DAYS


@dataclass(frozen=True)
class Layout:
    """Where the planted users are (ids), from the scale alone."""

    celebrity: int
    big: int
    ladder: dict[int, int]  # author id -> planted followers
    pool: list[int]  # the read curve's authors
    viewers: dict[int, int]  # followees k -> viewer id
    first_ordinary: int
    users: int

    @classmethod
    def of(cls, scale: Scale) -> Layout:
        ladder = {3 + i: n for i, n in enumerate(scale.ladder)}
        nxt = 3 + len(ladder)
        pool_size = max(scale.read_ladder, default=0)
        pool = list(range(nxt, nxt + pool_size))
        nxt += pool_size
        viewers = {k: nxt + i for i, k in enumerate(scale.read_ladder)}
        nxt += len(viewers)
        return cls(1, 2, ladder, pool, viewers, nxt, scale.users)


def fingerprint(scale: Scale) -> str:
    keep = asdict(scale)
    for k in list(keep):  # what the graph does not depend on
        if k.startswith(("stream", "burst", "sweep", "reads", "read_clients", "workers")):
            keep.pop(k)
    keep.pop("name")
    keep.pop("pull_threshold")
    keep.pop("push_threshold")
    keep.pop("extra")
    return json.dumps(keep, sort_keys=True)


async def existing(dsn: str, scale: Scale) -> bool:
    """The database already holds a network made with these parameters."""
    conn = await asyncpg.connect(dsn)
    try:
        if await conn.fetchval("SELECT to_regclass('public.bench_report_meta') IS NULL"):
            return False
        found = await conn.fetchval("SELECT value FROM bench_report_meta WHERE key = 'scale'")
        return found == fingerprint(scale)
    finally:
        await conn.close()


def _zipf_offset(ranks: int, edges: int, top: float, s: float) -> float:
    """The offset r0 for which rank 1 expects about `top` of `edges` draws."""
    r = np.arange(1, ranks + 1, dtype=np.float64)

    def expected_top(r0: float) -> float:
        w = (r + r0) ** -s
        return float(edges * w[0] / w.sum())

    lo, hi = 0.0, float(ranks)
    if expected_top(lo) <= top:
        return lo
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_top(mid) > top else (lo, mid)
    return hi


def follow_edges(scale: Scale, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(follower, followee) int64 arrays, unique, no self-follows, sorted by follower."""
    layout = Layout.of(scale)
    ordinary = np.arange(layout.first_ordinary, scale.users + 1, dtype=np.int64)
    n = len(ordinary)
    mu = math.log(scale.avg_following) - 0.5  # log-normal, sigma 1: mean avg_following
    degree = np.clip(np.rint(rng.lognormal(mu, 1.0, n)), 1, max(1, n // 2)).astype(np.int64)
    total = int(degree.sum())
    r0 = _zipf_offset(n, total, scale.natural_top * scale.big, scale.zipf_exponent)
    weights = (np.arange(1, n + 1, dtype=np.float64) + r0) ** -scale.zipf_exponent
    cum = np.cumsum(weights)
    cum /= cum[-1]
    by_rank = rng.permutation(ordinary)
    parts_f, parts_e = [], []
    start = 0
    step = 2_000_000
    with tqdm(total=total, desc="graph     ", unit="edge", unit_scale=True) as bar:
        while start < n:
            stop = start
            acc = 0
            # Users whose edges fit in one chunk (a user's edges stay in one chunk).
            ends = np.searchsorted(np.cumsum(degree[start:]), step, side="right")
            stop = min(n, start + max(1, int(ends)))
            d = degree[start:stop]
            acc = int(d.sum())
            f = np.repeat(ordinary[start:stop], d)
            e = by_rank[np.searchsorted(cum, rng.random(acc), side="right").clip(0, n - 1)]
            parts_f.append(f)
            parts_e.append(e)
            bar.update(acc)
            start = stop
    planted_f, planted_e = [], []
    for author, count in (
        (layout.celebrity, scale.celebrity),
        (layout.big, scale.big),
        *layout.ladder.items(),
    ):
        chosen = rng.choice(ordinary, size=min(count, n), replace=False)
        planted_f.append(chosen)
        planted_e.append(np.full(len(chosen), author, dtype=np.int64))
    for k, viewer in layout.viewers.items():
        planted_f.append(np.full(k, viewer, dtype=np.int64))
        planted_e.append(np.asarray(layout.pool[:k], dtype=np.int64))
    f = np.concatenate(parts_f + planted_f)
    e = np.concatenate(parts_e + planted_e)
    keys = np.unique(f * (1 << 32) + e)
    f, e = keys >> 32, keys & ((1 << 32) - 1)
    keep = f != e
    return f[keep], e[keep]


async def _follow_copy(f: np.ndarray, e: np.ndarray, at: datetime) -> AsyncIterator[bytes]:
    micros = int((at - PG_EPOCH).total_seconds() * 1_000_000)
    yield COPY_HEADER
    with tqdm(total=len(f), desc="follows   ", unit="row", unit_scale=True) as bar:
        for i in range(0, len(f), COPY_CHUNK):
            rows = np.empty(min(COPY_CHUNK, len(f) - i), dtype=FOLLOW_ROW)
            rows["n"], rows["l1"], rows["l2"], rows["l3"] = 3, 8, 8, 8
            rows["f"] = f[i : i + COPY_CHUNK]
            rows["e"] = e[i : i + COPY_CHUNK]
            rows["t"] = micros
            yield rows.tobytes()
            bar.update(len(rows))
    yield COPY_TRAILER


async def generate(dsn: str, scale: Scale) -> dict[str, float]:
    """Fill the empty, migrated database `dsn`; returns the phases' seconds and counts."""
    started = time.perf_counter()
    rng = np.random.default_rng(scale.seed)
    layout = Layout.of(scale)
    f, e = follow_edges(scale, rng)
    graph_s = time.perf_counter() - started
    followers = np.bincount(e, minlength=scale.users + 1)
    following = np.bincount(f, minlength=scale.users + 1)
    active = rng.random(scale.users + 1) < scale.active_share
    active[: layout.first_ordinary] = True
    now = datetime.now(UTC).replace(microsecond=0)
    seen_days = rng.random(scale.users + 1)
    conn = await connect(dsn)
    phases: dict[str, float] = {"graph": graph_s}
    try:
        await skip_fk_triggers(conn)
        t = time.perf_counter()
        width = len(str(scale.users))
        records = []
        for uid in tqdm(range(1, scale.users + 1), desc="users     ", unit="user", unit_scale=True):
            if active[uid]:
                seen: datetime | None = now - timedelta(days=seen_days[uid] * (ACTIVE_DAYS - 2))
            elif seen_days[uid] < 0.5:
                seen = now - timedelta(days=ACTIVE_DAYS + 1 + seen_days[uid] * 600)
            else:
                seen = None  # signed up, never came back
            records.append(
                (uid, f"b{uid:0{width}d}", "!", f"User {uid}", now - timedelta(days=400), seen,
                 int(followers[uid]), int(following[uid]))
            )  # fmt: skip
        await conn.copy_records_to_table(
            "users",
            records=records,
            columns=("id", "handle", "password_hash", "display_name", "created_at",
                     "last_active_at", "follower_count", "following_count"),
        )  # fmt: skip
        del records
        await sync_user_sequence(conn)
        phases["users"] = time.perf_counter() - t
        t = time.perf_counter()
        indexes = await conn.fetch(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'follows'"
        )
        pkey = await conn.fetchrow(
            "SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint "
            "WHERE conrelid = 'follows'::regclass AND contype = 'p'"
        )
        await conn.execute(f"ALTER TABLE follows DROP CONSTRAINT {pkey['conname']}")
        for row in indexes:
            if row["indexname"] != pkey["conname"]:
                await conn.execute(f"DROP INDEX {row['indexname']}")
        await conn.copy_to_table(
            "follows",
            source=_follow_copy(f, e, now - timedelta(days=200)),
            columns=("follower_id", "followee_id", "created_at"),
            format="binary",
        )
        phases["follows_copy"] = time.perf_counter() - t
        t = time.perf_counter()
        statements = [f"ALTER TABLE follows ADD CONSTRAINT {pkey['conname']} {pkey['def']}"]
        statements += [r["indexdef"] for r in indexes if r["indexname"] != pkey["conname"]]
        for sql in tqdm(statements, desc="indexes   ", unit="index"):
            await conn.execute(sql)
        phases["follows_indexes"] = time.perf_counter() - t
        t = time.perf_counter()
        await conn.execute("VACUUM (ANALYZE) users")
        await conn.execute("VACUUM (ANALYZE) follows")
        phases["analyze"] = time.perf_counter() - t
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_report_meta (key text PRIMARY KEY, value text)"
        )
        await conn.execute(
            "INSERT INTO bench_report_meta VALUES ('scale', $1) ON CONFLICT (key) DO UPDATE "
            "SET value = excluded.value",
            fingerprint(scale),
        )
    finally:
        await conn.close()
    phases["total"] = time.perf_counter() - started
    phases["follows"] = float(len(f))
    phases["active_users"] = float(active[1:].sum())
    return phases
