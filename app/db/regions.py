"""Regions (issue 37, decision 0087): which region a user's writes belong to, and the
PostgreSQL set-up that makes each region's database the writer of its home users' rows and a
reader of the others'.

- Ids are region-coded: the low 4 bits of a user, comment or outbox id are the number of the
  region whose database made it (sequences stepping by 16 from that number), and a post id
  carries it in the low bits of its sequence field (migration 0017's next_post_id). A user's
  home region is therefore read off the id, with no lookup: `check_home` answers a write
  reaching the wrong region with WRONG_REGION naming the home region and its URL.
- Logical replication carries the rows: in each database three publications (`region_rows`:
  users, posts and the graph and engagement rows homed here, filtered by the id bits, with
  the region-local counters left out of the column lists; `region_events`: the outbox and
  revoked tokens, inserts only, so the other region's relay fans out the same events into
  its own Redis; `region_priority`: post tombstones, blocks and regional restrictions), and
  in each region two subscriptions per peer (bulk: rows and events; priority: tombstones,
  blocks and restrictions, its own apply worker, so a delete never waits behind a backlog
  of posts), all `origin = none` so nothing comes back to where it started.

CLI (DATABASE_URL names this region's database):
    python -m app.db.regions setup NAME NUMBER        # once, before any user signs up
    python -m app.db.regions link PEER DSN            # after both regions ran setup
    python -m app.db.regions pause|resume PEER [bulk|priority]
    python -m app.db.regions status
    python -m app.db.regions prune DAYS                # tombstones older than DAYS days
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import re
import sys
from dataclasses import dataclass
from functools import cache

import asyncpg

from app.config import Settings, asyncpg_url, get_settings
from app.errors import WrongRegion

log = logging.getLogger("app.db.regions")

REGION_BITS = 4
REGION_MASK = (1 << REGION_BITS) - 1
# Sequences whose ids are region-coded (post ids are coded inside next_post_id).
CODED_SEQUENCES = ("users", "comments", "outbox", "post_restriction_audit")

# Columns each region keeps for itself: counters (each region counts the rows it holds, the
# replicated ones by migration 0017's ENABLE REPLICA triggers), the fan-out mode its own
# control plane chose for its own Redis, and reads' activity.
USERS_COLUMNS = (
    "id, handle, password_hash, display_name, created_at, recommendations_enabled, "
    "token_version, canary, home_region"
)
POSTS_COLUMNS = (
    "id, author_id, created_at, body, visibility, version, edited_at, deleted_at, "
    "restricted_regions"
)

# (table, column list or "", the id column whose low bits are the home region).
ROW_TABLES = (
    ("users", USERS_COLUMNS, "id"),
    ("posts", POSTS_COLUMNS, "id"),
    ("follows", "", "follower_id"),
    ("likes", "", "user_id"),
    ("comments", "", "id"),
    ("post_widenings", "", "post_id"),
    ("hidden_posts", "", "user_id"),
    ("mutes", "", "muter_id"),
    ("feed_feedback", "", "user_id"),
)
PRIORITY_TABLES = (
    ("post_tombstones", "post_id"),
    ("blocks", "blocker_id"),
    ("post_restrictions", "post_id"),
    ("region_heartbeats", "number"),
)
# Inserts only, made by the region itself (origin = none): no row filter needed.
EVENT_TABLES = ("outbox", "revoked_tokens", "post_restriction_audit")
KINDS = ("bulk", "priority")


@dataclass(frozen=True)
class Peer:
    name: str
    number: int
    url: str


@cache
def _peers(raw: str) -> dict[int, Peer]:
    peers: dict[int, Peer] = {}
    for item in filter(None, raw.split(",")):
        name, number, url = item.split(":", 2)
        peers[int(number)] = Peer(name, int(number), url)
    return peers


def peers(settings: Settings) -> dict[int, Peer]:
    """REGION_PEERS by number (parsed once per value)."""
    return _peers(settings.region_peers)


def home_number(row_id: int) -> int:
    """The region number a region-coded id carries (0: made before regions, or one region)."""
    return row_id & REGION_MASK


def check_home(settings: Settings, user_id: int) -> None:
    """Refuse here a write of a user homed in another region: WRONG_REGION with where to send
    it. Free: the home region is the id's low bits. A user of no known region (an id made
    before regions, or a region missing from REGION_PEERS) writes where it is."""
    if settings.region_number == 0:
        return
    home = home_number(user_id)
    if home == settings.region_number:
        return
    peer = peers(settings).get(home)
    if peer is None:
        return
    raise WrongRegion(
        f"Your account's home region is {peer.name}: send writes to {peer.url}.",
        peer.name,
        peer.url,
    )


# -- set-up --------------------------------------------------------------------------------


def _ident(name: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", name):
        raise ValueError(f"not a plain identifier: {name!r}")
    return name


async def setup(conn: asyncpg.Connection, name: str, number: int, confirm_ms: int = 3000) -> None:
    """Name and number this region's database; region-code its sequences (each restarts at
    the first value above its table's ids that carries `number`); make its publications.
    `confirm_ms`: how late a peer's heartbeat may be before its posts are not served here."""
    if not 1 <= number <= REGION_MASK:
        raise ValueError("a region number is 1-15")
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO region_identity (one, name, number, confirm_ms) VALUES (true, $1, $2, $3)"
            " ON CONFLICT (one) DO UPDATE SET name = EXCLUDED.name, number = EXCLUDED.number,"
            " confirm_ms = EXCLUDED.confirm_ms",
            name,
            number,
            confirm_ms,
        )
        await conn.execute(
            "INSERT INTO region_heartbeats (number, at) VALUES ($1, now()) "
            "ON CONFLICT (number) DO NOTHING",
            number,
        )
        for table in CODED_SEQUENCES:
            top = await conn.fetchval(f"SELECT coalesce(max(id), 0) FROM {table}")
            start = (top // 16 + 1) * 16 + number
            await conn.execute(
                f"ALTER SEQUENCE {table}_id_seq INCREMENT BY 16 MINVALUE 1 "
                f"START WITH {number} RESTART WITH {start}"
            )
        await conn.execute("DROP PUBLICATION IF EXISTS region_rows, region_events, region_priority")
        rows = ", ".join(
            f"TABLE {table}{f' ({columns})' if columns else ''} WHERE (({key} & 15) = {number})"
            for table, columns, key in ROW_TABLES
        )
        await conn.execute(
            f"CREATE PUBLICATION region_rows FOR {rows} WITH (publish = 'insert, update, delete')"
        )
        await conn.execute(
            f"CREATE PUBLICATION region_events FOR TABLE {', '.join(EVENT_TABLES)} "
            "WITH (publish = 'insert')"
        )
        priority = ", ".join(
            f"TABLE {table} WHERE (({key} & 15) = {number})" for table, key in PRIORITY_TABLES
        )
        await conn.execute(
            f"CREATE PUBLICATION region_priority FOR {priority} "
            "WITH (publish = 'insert, update, delete')"
        )


def subscription(peer: str, kind: str) -> str:
    return _ident(f"from_{peer.replace('-', '_')}_{kind}")


async def link(
    conn: asyncpg.Connection, me: str, peer: str, dsn: str, peer_number: int | None = None
) -> None:
    """Subscribe this region to `peer`'s rows (two subscriptions: bulk and priority). Both
    start at the peer's current position (copy_data = false): link before users sign up.
    The peer's heartbeat row starts here at -infinity: its posts are served once its first
    heartbeat arrives."""
    if peer_number is None:
        remote = await asyncpg.connect(dsn)
        try:
            peer_number = int(await remote.fetchval("SELECT region_number()"))
        finally:
            await remote.close()
    await conn.execute(
        "INSERT INTO region_heartbeats (number, at) VALUES ($1, '-infinity') "
        "ON CONFLICT (number) DO NOTHING",
        peer_number,
    )
    publications = {"bulk": "region_rows, region_events", "priority": "region_priority"}
    for kind in KINDS:
        name = subscription(peer, kind)
        slot = _ident(f"{peer.replace('-', '_')}_to_{me.replace('-', '_')}_{kind}")
        await conn.execute(
            f"CREATE SUBSCRIPTION {name} CONNECTION '{dsn.replace(chr(39), '')}' "
            f"PUBLICATION {publications[kind]} "
            f"WITH (origin = none, copy_data = false, slot_name = '{slot}')"
        )


async def set_enabled(
    conn: asyncpg.Connection, peer: str, enabled: bool, kinds: tuple[str, ...] = KINDS
) -> None:
    """Pause or resume replication from `peer` (the peer keeps its WAL in the slot meanwhile)."""
    for kind in kinds:
        verb = "ENABLE" if enabled else "DISABLE"
        await conn.execute(f"ALTER SUBSCRIPTION {subscription(peer, kind)} {verb}")


HEARTBEAT = "UPDATE region_heartbeats SET at = now() WHERE number = region_number()"


async def heartbeat(conn: asyncpg.Connection) -> None:
    """This region's heartbeat (the relay's, every REGION_HEARTBEAT_MS): a peer applying it
    knows every tombstone committed here before it has been applied there too."""
    await conn.execute(HEARTBEAT)


async def heartbeats(dsn: str, interval: float, stop: asyncio.Event) -> None:
    """`heartbeat` every `interval` seconds until `stop`; a failed one (PostgreSQL away) is
    retried at the next beat: peers stop serving this region's posts meanwhile."""
    conn: asyncpg.Connection | None = None
    while not stop.is_set():
        try:
            if conn is None or conn.is_closed():
                conn = await asyncpg.connect(dsn)
            await heartbeat(conn)
        except (OSError, asyncpg.PostgresError):
            log.warning("region heartbeat failed; retrying", exc_info=True)
            conn = None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
    if conn is not None:
        await conn.close()


PRUNE = "DELETE FROM post_tombstones WHERE at < now() - make_interval(days => $1)"


async def prune(conn: asyncpg.Connection, days: int) -> int:
    """Forget tombstones older than `days` (the home region's delete replicates; a region
    whose bulk stream is further behind than that could show a deleted post again, so keep
    `days` well past the longest cut a slot's WAL can ride out). The number removed."""
    if days < 1:
        raise ValueError("keep tombstones for a day at least")
    status = await conn.execute(PRUNE, days)
    return int(status.split()[-1])


STATUS = """
SELECT s.subname, s.subenabled, st.pid IS NOT NULL AS running,
       st.latest_end_lsn::text AS lsn, st.last_msg_receipt_time AS last_message
FROM pg_subscription s LEFT JOIN pg_stat_subscription st
  ON st.subid = s.oid AND st.relid IS NULL
ORDER BY s.subname
"""


async def status(conn: asyncpg.Connection) -> list[dict[str, object]]:
    return [dict(row) for row in await conn.fetch(STATUS)]


async def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m app.db.regions", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    one = commands.add_parser("setup", help="name and number this region's database")
    one.add_argument("name")
    one.add_argument("number", type=int)
    two = commands.add_parser("link", help="subscribe to a peer region's database")
    two.add_argument("peer")
    two.add_argument("dsn")
    for verb in ("pause", "resume"):
        cmd = commands.add_parser(verb, help=f"{verb} replication from a peer")
        cmd.add_argument("peer")
        cmd.add_argument("kind", nargs="?", choices=KINDS)
    commands.add_parser("status", help="this region's subscriptions")
    pruning = commands.add_parser("prune", help="forget tombstones older than DAYS days")
    pruning.add_argument("days", type=int)
    args = parser.parse_args(argv)
    settings = get_settings()
    conn = await asyncpg.connect(asyncpg_url(settings.database_url))
    try:
        if args.command == "setup":
            await setup(conn, args.name, args.number)
        elif args.command == "link":
            me = await conn.fetchval("SELECT region_name()")
            await link(conn, me, args.peer, args.dsn)
        elif args.command in ("pause", "resume"):
            kinds = (args.kind,) if args.kind else KINDS
            await set_enabled(conn, args.peer, args.command == "resume", kinds)
        elif args.command == "prune":
            print(f"{await prune(conn, args.days)} tombstones removed")
        else:
            for row in await status(conn):
                print(row)
    finally:
        await conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
