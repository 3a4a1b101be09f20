"""Regional restrictions of posts (docs/decisions/0088-regional-restrictions.md), on the
PostgreSQL that DATABASE_URL names.

    python -m app.moderation restrict POST_ID --regions eu,us --reason "..." [--by NAME]
        withholds the post in those regions: nobody served there sees it but its author;
        one audit row;
    python -m app.moderation unrestrict POST_ID --regions eu --reason "..." [--by NAME]
        lifts it there (each region must be restricted); one audit row;
    python -m app.moderation list [POST_ID] [--region R]
        the restrictions in force (of one post, with its audit trail).

In a numbered region (decision 0087) a post is restricted in its home region's database
(the post id's region bits): elsewhere the command is refused, naming the home region, and
the restriction reaches the other regions on the priority path.

Region names are checked (lower-case letters, digits and '-'; among POLICY_REGIONS when that
is set). --by defaults to the login running the command. Exit 0 on success, 2 on bad input
(an unknown post, a bad region name, a missing reason), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import sys

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings, get_settings
from app.db.engine import make_engine, make_sessionmaker
from app.db.watermarks import Watermarks
from app.errors import AppError
from app.posts import restrictions as policy
from app.posts.regions import check_region
from app.redis_client import make_roles

# The exit status of a refused command (argparse's own for bad usage).
BAD_INPUT = 2


def _operator() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (a container's bare uid)
        return "operator"


async def change(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    args: argparse.Namespace,
) -> int:
    regions = policy.parse_regions(args.regions, settings.policy_region_names())
    lift = args.command == "unrestrict"
    marks, roles = None, None
    if settings.replica_dsns:  # replicas must not answer with the post (decision 0086)
        roles = make_roles(settings)
        marks = Watermarks(roles.sessions, engine, settings.database_replica_watermark_ttl_seconds)
    try:
        done = await policy.change_restriction(
            sessions,
            args.post_id,
            regions,
            args.reason,
            args.by or _operator(),
            lift=lift,
            marks=marks,
        )
    finally:
        if roles is not None:
            await roles.aclose()
    verb = "unrestricted" if lift else "restricted"
    now = ", ".join(done.restricted_in) or "none"
    print(f"post {done.post_id}: {verb} in {', '.join(done.regions)}; restricted in: {now}")
    return 0


async def show(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], args: argparse.Namespace
) -> int:
    region = check_region(args.region, settings.policy_region_names()) if args.region else None
    async with sessions() as session:
        found = await policy.restrictions(session, args.post_id, region)
        trail = await policy.audit_trail(session, args.post_id) if args.post_id else []
    for r in found:
        print(
            f"{r.post_id}\t{r.region}\t{r.restricted_at.isoformat(timespec='seconds')}"
            f"\t{r.restricted_by}\t{r.reason}"
        )
    if not found:
        print("no restrictions", file=sys.stderr)
    for a in trail:
        print(
            f"audit\t{a.at.isoformat(timespec='seconds')}\t{a.action}\t{','.join(a.regions)}"
            f"\t{a.operator}\t{a.reason}"
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m app.moderation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, what in (("restrict", "withhold a post in regions"), ("unrestrict", "lift it")):
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("post_id", type=int)
        cmd.add_argument("--regions", required=True, help="comma-separated region names")
        cmd.add_argument("--reason", required=True, help="why (kept in the audit trail)")
        cmd.add_argument("--by", default="", help="the operator (default: the login)")
    listing = sub.add_parser("list", help="restrictions in force")
    listing.add_argument("post_id", type=int, nargs="?")
    listing.add_argument("--region", default="")
    return parser


async def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    settings = get_settings()
    engine = make_engine(settings, pool_size=1)
    sessions = make_sessionmaker(engine)
    try:
        if args.command == "list":
            return await show(settings, sessions, args)
        return await change(settings, engine, sessions, args)
    except AppError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return BAD_INPUT
    finally:
        await engine.dispose()


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
