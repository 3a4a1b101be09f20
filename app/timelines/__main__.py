"""Operators' view of the timeline keyspace, on the Redis that REDIS_URL names.

    python -m app.timelines show <user_id> [--limit 20] [--author]
        one timeline (or `posts:{author}` index), newest first, with each post's creation
        time, its size and MEMORY USAGE (a zset not yet converted is named as such);
    python -m app.timelines convert [--batch 500] [--pause-ms 5] [--dry-run]
        the one-way upgrade from the zset layout of earlier releases: SCANs `tl:{*}` and
        `posts:{*}` and rewrites every zset as a packed timeline, one atomic script call per
        key, pipelined per batch of keys, pausing between batches; safe to run while the
        service runs, to interrupt and to run again. There is no way back to zsets.

docs/redis-keys.md describes the layout; docs/operations.md ("Upgrading from zset
timelines") the upgrade; docs/decisions/0034-zset-timelines-retired.md why.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from datetime import UTC, datetime

from app.config import get_settings
from app.redis_client import make_client
from app.timelines.convert import convert_zsets, count_zsets
from app.timelines.store import (
    AUTHOR_POSTS_PATTERN,
    TIMELINE_PATTERN,
    TimelineStore,
    author_posts_key,
    timeline_key,
)


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


async def show(store: TimelineStore, user_id: int, limit: int, author: bool) -> int:
    key = author_posts_key(user_id) if author else timeline_key(user_id)
    bound = store.author_posts_max if author else store.timeline_max
    raw = await store.inspect(key, bound)
    if raw.layout == "none":
        print(f"{key}: missing (rebuilt from PostgreSQL on the owner's next read)")
        return 1
    if raw.layout != "packed":
        print(
            f"{key}: a {raw.layout}, MEMORY USAGE {raw.memory_bytes or 0:,} B: no timeline to "
            "this release (read as missing); `python -m app.timelines convert` rewrites zsets"
        )
        return 1
    size = len(raw.entries)
    per_entry = f", {raw.memory_bytes / size:.1f} B/entry" if raw.memory_bytes and size else ""
    hidden = f" (+{raw.hidden} past the bound, dropped at the next trim)" if raw.hidden else ""
    empty = " (known empty)" if not size else ""
    print(
        f"{key}: {raw.layout}, {size} of at most {bound} entries{hidden}{empty}, "
        f"MEMORY USAGE {raw.memory_bytes or 0:,} B{per_entry}"
    )
    shown = raw.entries if limit <= 0 else raw.entries[:limit]
    if shown:
        print(f"{'post id':>19}  created (UTC)")
        for post_id, ms in shown:
            print(f"{post_id:>19}  {_when(ms)}")
    if len(shown) < size:
        print(f"... {size - len(shown)} older (--limit 0 shows all)")
    return 0


async def convert(store: TimelineStore, batch: int, pause_ms: float, dry_run: bool) -> int:
    families = (
        (TIMELINE_PATTERN, store.timeline_max),
        (AUTHOR_POSTS_PATTERN, store.author_posts_max),
    )
    for pattern, bound in families:
        scanned = converted = 0
        started = time.monotonic()
        async for keys in store.scan_keys(pattern, count=batch):
            scanned += len(keys)
            if dry_run:
                converted += await count_zsets(store.redis, keys)
            else:
                converted += await convert_zsets(store.redis, keys, bound)
                await asyncio.sleep(pause_ms / 1000)
        verb = "to convert" if dry_run else "converted"
        print(
            f"{pattern}: {scanned:,} keys scanned, {converted:,} {verb} to packed "
            f"in {time.monotonic() - started:.1f} s"
        )
    return 0


async def main_async(args: argparse.Namespace) -> int:
    settings = get_settings()
    redis = make_client(settings, settings.redis_role_url("timelines"))
    try:
        store = TimelineStore(redis, settings.timeline_max, settings.author_posts_max)
        if args.command == "show":
            return await show(store, args.user_id, args.limit, args.author)
        return await convert(store, args.batch, args.pause_ms, args.dry_run)
    finally:
        await redis.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.timelines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_show = sub.add_parser("show", help="one timeline, newest first, with creation times")
    p_show.add_argument("user_id", type=int)
    p_show.add_argument("--limit", type=int, default=20, help="entries shown (0: all)")
    p_show.add_argument("--author", action="store_true", help="the posts:{author} index instead")
    p_conv = sub.add_parser("convert", help="rewrite zset timelines as packed (one-way)")
    p_conv.add_argument("--batch", type=int, default=500, help="keys per SCAN page and call")
    p_conv.add_argument("--pause-ms", type=float, default=5.0, help="pause between batches")
    p_conv.add_argument("--dry-run", action="store_true", help="count only")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
