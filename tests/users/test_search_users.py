"""Query.searchUsers through GraphQL: handle or display-name prefix in any case, LIKE
wildcards taken literally, typed errors, blocks; and its plan on a table big enough for the
planner to prefer an index (docs/decisions/0009-user-search.md)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from app.users.search import escape_like, search_sql
from tests.helpers import block, gql, make_user, sign_up, sql


async def _search(
    client, prefix: str, token: str | None = None, first: int | None = None
) -> list[str]:
    variables: dict[str, object] = {"prefix": prefix}
    if first is not None:
        variables["first"] = first
    data = (await gql(client, "SearchUsers", variables, token=token)).ok()
    return [u["handle"] for u in data["searchUsers"]]


async def test_handle_or_display_name_prefix_in_any_case(client) -> None:
    await make_user(client, "alice", "Wonder Woman")
    await make_user(client, "alfred", "Butler")
    await make_user(client, "bob", "Alien Visitor")
    await make_user(client, "carol", "ÉLODIE Martin")
    # Handle matches first (in handle order), then display-name matches.
    assert await _search(client, "al") == ["alfred", "alice", "bob"]
    assert await _search(client, "AL") == ["alfred", "alice", "bob"]
    assert await _search(client, "  @Ali ") == ["alice"]  # @ and spaces around are fine
    assert await _search(client, "wonder w") == ["alice"]
    assert await _search(client, "élodie") == ["carol"]  # non-ASCII case folding
    assert await _search(client, "Butler") == ["alfred"]
    assert await _search(client, "zed") == []
    assert await _search(client, "al", first=2) == ["alfred", "alice"]
    # A user matching by handle and by name is listed once.
    await make_user(client, "wonder", "Wonderful")
    assert await _search(client, "wonder") == ["wonder", "alice"]
    data = (await gql(client, "SearchUsers", {"prefix": "ali"})).ok()
    assert data["searchUsers"][0]["displayName"] == "Wonder Woman"


async def test_like_wildcards_are_taken_literally(client) -> None:
    await make_user(client, "al_x", "Plain")
    await make_user(client, "alxx", "Plainer")
    await make_user(client, "pct", "100% real")
    await make_user(client, "pct2", "1000 real")
    await make_user(client, "slash", "back\\slash")
    await make_user(client, "slash2", "backslash")
    assert await _search(client, "al_") == ["al_x"]
    assert await _search(client, "100%") == ["pct"]
    assert await _search(client, "%") == []
    assert await _search(client, "_") == []
    assert await _search(client, "back\\") == ["slash"]
    assert await _search(client, "back") == ["slash", "slash2"]  # byte order: \\ < s


async def test_bad_prefixes_and_sizes_are_typed_errors(client) -> None:
    await sign_up(client, "alice")
    for prefix in ("", "   ", "@", " @ ", "x" * 81):
        result = await gql(client, "SearchUsers", {"prefix": prefix})
        assert result.codes == ["BAD_USER_INPUT"], prefix
    assert await _search(client, "x" * 80) == []
    for first in (0, 101, -5):
        result = await gql(client, "SearchUsers", {"prefix": "al", "first": first})
        assert result.codes == ["BAD_USER_INPUT"], first
    assert await _search(client, "al", first=100) == ["alice"]


async def test_users_across_a_block_are_hidden(client) -> None:
    viewer = await sign_up(client, "viewer")
    await make_user(client, "sam_a", "Sam A")
    sam_b = await sign_up(client, "sam_b", name="Sam B")
    await make_user(client, "other", "Sam C")
    await block(client, viewer, "sam_a")
    await block(client, sam_b, "viewer")
    assert await _search(client, "sam", viewer) == ["other"]
    assert await _search(client, "sam") == ["sam_a", "sam_b", "other"]
    assert await _search(client, "sam", sam_b) == ["sam_a", "sam_b", "other"]


@pytest.fixture
async def many_users() -> None:
    """20,000 users and fresh statistics: enough rows for a sequential scan to lose."""
    await sql(
        "INSERT INTO users (handle, password_hash, display_name)"
        " SELECT 'gen' || g, 'x', (ARRAY['Alice','Bob','Carol','Dave','Eve'])[g % 5 + 1]"
        " || ' ' || md5(g::text) FROM generate_series(1, 20000) g"
    )
    await sql("ANALYZE users")


@pytest.mark.parametrize("plan_cache_mode", ["auto", "force_generic_plan"])
async def test_the_search_reads_the_prefix_indexes(
    state, client, many_users, plan_cache_mode: str
) -> None:
    """The plan of the exact query the service runs, as the driver sends it (bound
    parameters): both halves are index range scans, none a sequential scan; also as a
    cached generic plan, where only the explicit range bounds the scan."""
    token, _ = await make_user(client, "viewer")
    prefix = "gen1234"
    params = {
        "handle": prefix,
        "handle_pattern": escape_like(prefix) + "%",
        "name": "Bob 1",
        "name_pattern": escape_like("Bob 1") + "%",
        "n": 10,
        "viewer": 1,
    }
    async with state.sessions() as session:
        await session.execute(text(f"SET LOCAL plan_cache_mode = {plan_cache_mode}"))
        rows = await session.execute(text("EXPLAIN " + search_sql(viewer=True)), params)
        plan = "\n".join(r[0] for r in rows)
    assert "Seq Scan on users" not in plan, plan
    lines = plan.splitlines()
    for index in ("users_handle_prefix_idx", "users_display_name_prefix_idx"):
        # "Index Scan using <index>" or "Bitmap Index Scan on <index>", bounded by a range.
        at = [
            i
            for i, line in enumerate(lines)
            if f"Index Scan using {index} " in line
            or line.endswith(f"Index Scan on {index}")
            or f"Index Scan on {index} " in line
        ]
        assert at, f"{index} unused:\n{plan}"
        assert "Index Cond" in lines[at[0] + 1] and "~>=~" in lines[at[0] + 1], plan
    # And the API answers from that table as it should.
    found = await _search(client, prefix, token)
    assert found == ["gen1234", *(f"gen1234{d}" for d in range(9))]
