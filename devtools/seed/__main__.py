"""`python -m devtools.seed bulk|demo`: the seeders at a terminal (docs/seeding.md).

Which database: `--database-url`, else DATABASE_URL, else the embedded dev servers that
`make run` uses (started here when they are not running, and stopped again afterwards). The
schema is brought to head first (`alembic upgrade head`, a no-op when it is). With the
embedded dev servers the dev Redis is emptied after a seed: its timelines, counts and feed
sessions describe the data that was just replaced. A Redis named by REDIS_URL is never touched.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

import redis

from devtools import provision
from devtools.seed.bulk import BULK_PASSWORD, seed_bulk
from devtools.seed.common import SeedError
from devtools.seed.demo import seed_demo


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.seed",
        description="Migrate, then seed: `bulk` for benchmarks, `demo` to click through.",
    )
    parser.add_argument(
        "--database-url",
        help="defaults to DATABASE_URL, else the embedded dev database of `make run`",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    bulk = sub.add_parser("bulk", help="large skewed network for benchmarks")
    bulk.add_argument("--users", type=int, default=100_000)
    bulk.add_argument("--avg-following", type=float, default=50)
    bulk.add_argument("--posts", type=int, default=2_000_000)
    bulk.add_argument("--days", type=float, default=30, help="posts spread over the last N days")
    bulk.add_argument("--active-fraction", type=float, default=0.6)
    bulk.add_argument("--likes-per-post", type=float, default=0.5)
    bulk.add_argument("--comments-per-post", type=float, default=0.1)
    bulk.add_argument("--seed", type=int, default=42)
    bulk.add_argument("--force", action="store_true", help="TRUNCATE existing data first")
    bulk.add_argument("--no-progress", action="store_true")

    demo = sub.add_parser("demo", help="small named network with a celebrity in pull mode")
    demo.add_argument("--if-empty", action="store_true", help="do nothing if users exist")
    demo.add_argument("--force", action="store_true", help="TRUNCATE existing data first")
    return parser


def _seed(args: argparse.Namespace, dsn: str) -> bool:
    """Run the chosen seed and print what it made; False when --if-empty skipped it."""
    if args.command == "bulk":
        stats = asyncio.run(
            seed_bulk(
                dsn,
                args.users,
                args.avg_following,
                args.posts,
                days=args.days,
                active_fraction=args.active_fraction,
                seed=args.seed,
                likes_per_post=args.likes_per_post,
                comments_per_post=args.comments_per_post,
                force=args.force,
                progress=not args.no_progress,
            )
        )
        for key, value in stats.items():
            print(f"{key}: {value}")
        first = f"u{1:0{max(6, len(str(args.users)))}d}"
        print(f"log in as any {first}-style handle with password {BULK_PASSWORD!r}")
        return True
    stats = asyncio.run(seed_demo(dsn, if_empty=args.if_empty, force=args.force))
    if stats.get("skipped"):
        print("demo seed skipped: the database already has users")
        return False
    print(
        f"demo seeded in {stats['seconds']} s: {stats['users']} users "
        f"({stats['fans']} silent fans), {stats['posts']} posts, "
        f"{stats['follows']} follows, {stats['likes']} likes, {stats['comments']} comments"
    )
    print(
        f"celeb: {stats['celeb_followers']} followers, {stats['celeb_mode']} mode "
        f"(threshold {stats['pull_threshold']})"
    )
    print(f"log in as {', '.join(stats['handles'])} with password {stats['password']!r}")
    return True


def _flush(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        client.flushdb()
    finally:
        client.close()
    print(f"emptied the dev Redis ({redis_url}): its timelines belonged to the old data")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    dsn = args.database_url or os.environ.get("DATABASE_URL", "")
    dev_redis: str | None = None
    started: frozenset[str] = frozenset()
    try:
        if not dsn:
            env = provision.ensure_services()
            started = provision.started_services()
            dsn = env["DATABASE_URL"]
            dev_redis = None if os.environ.get("REDIS_URL") else env["REDIS_URL"]
            print(f"no DATABASE_URL: seeding the embedded dev database {dsn}", file=sys.stderr)
        provision.migrate(dsn)
        if _seed(args, dsn) and dev_redis is not None:
            _flush(dev_redis)
    except (SeedError, provision.ProvisionError) as exc:
        print(f"seed: {exc}", file=sys.stderr)
        return 2
    finally:
        provision.stop_services(started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
