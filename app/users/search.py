"""Finding people by the start of their handle or display name, case-insensitive.

Each half is one bounded index range scan in index order (docs/decisions/0009-user-search.md):
`users_handle_prefix_idx` (handle, varchar_pattern_ops) and `users_display_name_prefix_idx`
(lower(display_name), text_pattern_ops), each read only as far as `first` matches; handle
matches come first, then display-name matches, a user once; the synthetic probe's canaries
never (decision 0065). Pattern operator classes and
`ORDER BY ... USING ~<~` let PostgreSQL answer `LIKE 'ab%'` from a btree whatever the
database's collation. Users across a block from the viewer are left out
(app.posts.visibility).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import User
from app.errors import BadInput
from app.posts.visibility import blocked_sql
from app.text_rules import nfc
from app.users.service import DISPLAY_NAME_MAX

PREFIX_MAX = DISPLAY_NAME_MAX  # no longer prefix can match anything


def _hidden(viewer: bool) -> str:
    return f"AND NOT {blocked_sql(':viewer', 'u.id')}" if viewer else ""


def _starts_with(column: str, prefix: str, pattern: str) -> str:
    """`column` starts with the text `prefix` (`pattern`: it LIKE-escaped, with a final %).

    The LIKE is the exact test. The range before it bounds the index scan even in a generic
    plan (a cached prepared statement, where LIKE $1 alone would read the whole index): every
    string starting with p sorts, byte-wise, in [p, p || U+10FFFF] (bar ones that continue
    past a U+10FFFF right after p: a noncharacter no name carries)."""
    return (
        f"{column} ~>=~ {prefix} AND {column} ~<=~ ({prefix} || chr(1114111))"
        f" AND {column} LIKE {pattern} ESCAPE '\\'"
    )


def search_sql(viewer: bool) -> str:
    """The search, for a viewer (`:viewer`) or anonymous: `:handle` and `:name` are the
    prefixes, `:handle_pattern` and `:name_pattern` them as escaped LIKE patterns, `:n` the
    page size (EXPLAINed in a test)."""
    by_handle = _starts_with("u.handle", ":handle", ":handle_pattern")
    by_name = _starts_with("lower(u.display_name)", "lower(:name)", "lower(:name_pattern)")
    return f"""
        WITH by_handle AS (
            SELECT u.id, 0 AS rank, u.handle::text AS key FROM users u
            WHERE {by_handle} AND NOT u.canary {_hidden(viewer)}
            ORDER BY u.handle USING ~<~ LIMIT :n
        ), by_name AS (
            SELECT u.id, 1 AS rank, lower(u.display_name) AS key FROM users u
            WHERE {by_name} AND NOT u.canary {_hidden(viewer)}
            ORDER BY lower(u.display_name) USING ~<~ LIMIT :n
        ), best AS (
            SELECT DISTINCT ON (id) id, rank, key
            FROM (SELECT * FROM by_handle UNION ALL SELECT * FROM by_name) m
            ORDER BY id, rank
        )
        SELECT users.* FROM users JOIN best ON best.id = users.id
        ORDER BY best.rank, best.key COLLATE "C", users.id
        LIMIT :n
    """


def escape_like(value: str) -> str:
    """`value` matched literally by LIKE ... ESCAPE '\\'."""
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def clean_prefix(prefix: str) -> str:
    prefix = nfc(prefix).strip()  # names are stored in NFC (app.text_rules)
    if not prefix or not prefix.lstrip("@"):
        raise BadInput("Type the start of a handle or a display name to search for.")
    if len(prefix) > PREFIX_MAX:
        raise BadInput(f"A search prefix is at most {PREFIX_MAX} characters.")
    return prefix


async def search_users(
    session: AsyncSession, viewer_id: int | None, prefix: str, first: int
) -> list[User]:
    """Up to `first` users whose handle (a leading `@` allowed) or display name starts with
    `prefix`, ignoring case: handle matches first, in handle order, then display names."""
    prefix = clean_prefix(prefix)
    handle = prefix.lstrip("@").lower()
    query = text(search_sql(viewer_id is not None)).bindparams(
        handle=handle,
        handle_pattern=escape_like(handle) + "%",
        name=prefix,
        name_pattern=escape_like(prefix) + "%",
        n=first,
    )
    if viewer_id is not None:
        query = query.bindparams(bindparam("viewer", viewer_id, type_=BigInteger))
    return list(await session.scalars(select(User).from_statement(query)))
