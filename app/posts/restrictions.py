"""Regional restrictions: an operator withholds a post in named regions (decision 0088).

What a restriction does is the visibility rule's (app.posts.visibility: nobody judged in a
restricted region sees the post but its author); this module keeps the record. Each
restriction is a `post_restrictions` row (post, region, reason, who, when), mirrored onto the
post's own `restricted_regions` (what the rule reads, so the filter joins no table), and
every restrict or unrestrict adds a `post_restriction_audit` row (operator, reason, time,
regions), all in one transaction with a `PostRestricted` outbox event: its `post_changed` job
takes the post out of its followers' live counts, as a narrowing to PRIVATE does (decision
0022). Read paths judge every id against the current rows, so feeds, sessions already
built, `post(id)`, profiles and comments apply it from the commit on; the in-process
verified windows (FEED_AUTHZ_TTL_SECONDS, used only while PostgreSQL is away) age out as
they do for any narrowing.

Operators use `python -m app.moderation` (restrict, unrestrict, list); this module knows no
command line and no GraphQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.models import Post, PostRestriction, PostRestrictionAudit
from app.db.watermarks import Watermarks, record_narrowing
from app.errors import BadInput, NotFound, WrongRegion
from app.outbox import events
from app.posts.regions import MAX_REGIONS, check_region

# Characters of a reason and of an operator's name (the columns' own bounds: text, 64).
MAX_REASON_CHARS = 2000
MAX_OPERATOR_CHARS = 64


@dataclass(frozen=True, slots=True)
class Restriction:
    post_id: int
    region: str
    reason: str
    restricted_by: str
    restricted_at: datetime


@dataclass(frozen=True, slots=True)
class AuditEntry:
    post_id: int
    action: str
    regions: list[str]
    reason: str
    operator: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Change:
    """What a restrict or unrestrict did: the post's author (whose readers' caches a
    narrowing concerns) and the post's restricted regions afterwards."""

    post_id: int
    author_id: int
    regions: list[str]
    restricted_in: list[str]


def parse_regions(text: str, known: Sequence[str] = ()) -> list[str]:
    """`eu,us` as checked, deduplicated names (in the order given), else BadInput."""
    names = [n.strip() for n in text.split(",")]
    if not any(names):
        raise BadInput("Name at least one region (--regions eu,us).")
    if "" in names:
        raise BadInput(f"Empty region name in {text!r}.")
    checked = list(dict.fromkeys(check_region(n, known) for n in names))
    if len(checked) > MAX_REGIONS:
        raise BadInput(f"At most {MAX_REGIONS} regions at once.")
    return checked


def _check_reason(reason: str | None) -> str:
    cleaned = (reason or "").strip()
    if not cleaned:
        raise BadInput('A reason is required (--reason "..."): it goes into the audit trail.')
    if len(cleaned) > MAX_REASON_CHARS:
        raise BadInput(f"The reason is over {MAX_REASON_CHARS} characters.")
    return cleaned


def _check_operator(operator: str) -> str:
    cleaned = operator.strip()
    if not cleaned or len(cleaned) > MAX_OPERATOR_CHARS:
        raise BadInput(f"The operator's name must be 1-{MAX_OPERATOR_CHARS} characters.")
    return cleaned


# The post's author, its home region's name and number (the id's low bits, decision 0087)
# and this database's region number (0: one region).
LOCK_POST = text(
    "SELECT p.author_id, u.home_region, p.id & 15 AS home, region_number() AS here "
    "FROM posts p JOIN users u ON u.id = p.author_id WHERE p.id = :id FOR UPDATE OF p"
)


async def _lock_post(session: AsyncSession, post_id: int) -> int:
    """The post's author, its row locked (restrictions of one post change one at a time).
    In a region other than the post's home, WRONG_REGION: restriction rows replicate from
    the home region only (decision 0087), so one written here would never reach the others."""
    row = (await session.execute(LOCK_POST, {"id": post_id})).first()
    if row is None:
        raise NotFound(f"No post {post_id}.")
    if row.here != 0 and row.home != row.here:
        raise WrongRegion(
            f"Post {post_id} is homed in region {row.home_region}: restrict it there "
            f"(DATABASE_URL of {row.home_region}'s database); it replicates from there.",
            row.home_region,
            "",
        )
    return int(row.author_id)


async def _mirror(session: AsyncSession, post_id: int) -> list[str]:
    """Copy the post's restriction rows onto `posts.restricted_regions` (NULL when none)."""
    regions = list(
        await session.scalars(
            select(PostRestriction.region)
            .where(PostRestriction.post_id == post_id)
            .order_by(PostRestriction.region)
        )
    )
    await session.execute(
        update(Post).where(Post.id == post_id).values(restricted_regions=regions or None)
    )
    return regions


async def _audit(
    session: AsyncSession, post_id: int, action: str, regions: list[str], reason: str, by: str
) -> None:
    session.add(
        PostRestrictionAudit(
            post_id=post_id, action=action, regions=regions, reason=reason, operator=by
        )
    )
    await events.record(session, events.POST_RESTRICTED, {"post_id": post_id, "action": action})


async def restrict(
    session: AsyncSession,
    post_id: int,
    regions: list[str],
    reason: str | None,
    operator: str,
) -> Change:
    """Withhold the post in `regions` (checked names, `parse_regions`), in the caller's
    transaction. A region it is already restricted in gets the new reason, operator and
    time. NotFound for an unknown post, BadInput for a missing reason."""
    why, by = _check_reason(reason), _check_operator(operator)
    if not regions:
        raise BadInput("Name at least one region.")
    author = await _lock_post(session, post_id)
    statement = insert(PostRestriction).values(
        [{"post_id": post_id, "region": r, "reason": why, "restricted_by": by} for r in regions]
    )
    await session.execute(
        statement.on_conflict_do_update(
            index_elements=["post_id", "region"],
            set_={"reason": why, "restricted_by": by, "restricted_at": func.now()},
        )
    )
    restricted_in = await _mirror(session, post_id)
    await _audit(session, post_id, "restrict", regions, why, by)
    return Change(post_id, author, regions, restricted_in)


async def unrestrict(
    session: AsyncSession,
    post_id: int,
    regions: list[str],
    reason: str | None,
    operator: str,
) -> Change:
    """Lift the post's restriction in `regions`; BadInput when it is not restricted in one
    of them (nothing changes then), NotFound for an unknown post."""
    why, by = _check_reason(reason), _check_operator(operator)
    if not regions:
        raise BadInput("Name at least one region.")
    author = await _lock_post(session, post_id)
    current = set(
        await session.scalars(
            select(PostRestriction.region).where(PostRestriction.post_id == post_id)
        )
    )
    missing = [r for r in regions if r not in current]
    if missing:
        raise BadInput(f"Post {post_id} is not restricted in {', '.join(missing)}.")
    await session.execute(
        delete(PostRestriction).where(
            PostRestriction.post_id == post_id, PostRestriction.region.in_(regions)
        )
    )
    restricted_in = await _mirror(session, post_id)
    await _audit(session, post_id, "unrestrict", regions, why, by)
    return Change(post_id, author, regions, restricted_in)


async def narrowed(change: Change, marks: Watermarks | None) -> None:
    """After a restriction committed: the author's replica watermark (decision 0086), so no
    replica answers a page with the post until it has replayed the restriction. Nothing else
    is needed here: live counts are lowered by the outbox event's job, and every read path
    judges against the current rows."""
    await record_narrowing(marks, authors=[change.author_id])


async def change_restriction(
    sessions: async_sessionmaker[AsyncSession],
    post_id: int,
    regions: list[str],
    reason: str | None,
    operator: str,
    *,
    lift: bool = False,
    marks: Watermarks | None = None,
) -> Change:
    """Restrict (or, `lift`, unrestrict) in its own transaction, then `narrowed` once it
    committed (a restriction only: lifting one widens, which needs no watermark)."""
    async with sessions.begin() as session:
        apply = unrestrict if lift else restrict
        change = await apply(session, post_id, regions, reason, operator)
    if not lift:
        await narrowed(change, marks)
    return change


async def restrictions(
    session: AsyncSession, post_id: int | None = None, region: str | None = None
) -> list[Restriction]:
    """Restrictions in force (of one post, in one region, or all), newest first."""
    query = select(PostRestriction).order_by(
        PostRestriction.restricted_at.desc(), PostRestriction.post_id, PostRestriction.region
    )
    if post_id is not None:
        query = query.where(PostRestriction.post_id == post_id)
    if region is not None:
        query = query.where(PostRestriction.region == region)
    return [
        Restriction(r.post_id, r.region, r.reason, r.restricted_by, r.restricted_at)
        for r in await session.scalars(query)
    ]


async def audit_trail(session: AsyncSession, post_id: int) -> list[AuditEntry]:
    """The post's restricts and unrestricts, oldest first."""
    rows = await session.scalars(
        select(PostRestrictionAudit)
        .where(PostRestrictionAudit.post_id == post_id)
        .order_by(PostRestrictionAudit.id)
    )
    return [
        AuditEntry(r.post_id, r.action, list(r.regions), r.reason, r.operator, r.at) for r in rows
    ]
