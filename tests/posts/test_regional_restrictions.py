"""Regional restrictions (issue 37 part 3, decision 0088) through GraphQL: a post restricted in
region R is gone for every reader judged in R (served there, or named by a trusted edge's
header) from the feed (a session already built too), `post(id)`, the author's profile,
comments and recommendations, and stays for its author and for readers elsewhere; an
unrestrict brings it back; every change leaves an audit row; the operator command refuses
bad input with a message and a nonzero exit."""

from __future__ import annotations

from typing import Any

import pytest

from app.moderation.__main__ import main as moderation
from app.posts.ids import encode_post_id
from tests.helpers import (
    add_comment,
    app_client,
    clients_at,
    gql,
    quick_users,
    run_module,
    sql,
)

HEADER = "X-Viewer-Region"


async def _op(client, name: str, token: str | None, **variables: Any) -> dict:
    return (await gql(client, name, variables, token=token)).ok()


async def _feed(client, token: str, mode: str = "CHRONOLOGICAL", **variables: Any) -> dict:
    return (await _op(client, "FeedWithReasons", token, first=50, mode=mode, **variables))["feed"]


def _ids(feed: dict) -> set[int]:
    return {int(e["node"]["id"]) for e in feed["edges"]}


async def _world(client, state, pipeline) -> dict[str, Any]:
    """viewer follows author and fan; author posts `p` (commented on) and `q`; stranger's
    `r` is liked by fan, so it is recommended to the viewer."""
    handles = ["viewer", "author", "fan", "stranger"]
    users = dict(zip(handles, await quick_users(state, handles), strict=True))
    tok = {h: t for h, (t, _) in users.items()}
    for followee in ("author", "fan"):
        await _op(client, "Follow", tok["viewer"], handle=followee)
    await pipeline.settle()
    posts = {}
    for name, who in (("p", "author"), ("q", "author"), ("r", "stranger")):
        data = await _op(client, "CreatePost", tok[who], body=f"post {name}")
        posts[name] = int(data["createPost"]["id"])
    await add_comment(client, tok["author"], posts["p"], "a comment")
    await _op(client, "LikePost", tok["fan"], id=encode_post_id(posts["r"]))
    await pipeline.settle()
    state.feed.recommendations.cache.clear()
    return {"tok": tok, "posts": posts}


async def _restrict(*argv: str) -> int:
    return await moderation(list(argv))


async def _sees(client, world: dict, who: str = "viewer", *, headers=None) -> dict[str, bool]:
    """Where the restricted post `p` (and the recommended `r`) shows for `who`."""
    tok, p, r = world["tok"][who], world["posts"]["p"], world["posts"]["r"]
    pid = encode_post_id(p)
    h = {"Authorization": f"Bearer {tok}", **(headers or {})}

    async def ask(operation: str, **variables: Any) -> dict:
        from app.operation_documents import operations

        body = {"query": operations()[operation], "variables": variables}
        response = await client.post(
            "/graphql", json={**body, "operationName": operation}, headers=h
        )
        payload = response.json()
        assert not payload.get("errors"), payload
        return payload["data"]

    chrono = _ids((await ask("FeedWithReasons", first=50, mode="CHRONOLOGICAL"))["feed"])
    ranked = _ids((await ask("FeedWithReasons", first=50, mode="RANKED"))["feed"])
    by_id = (await ask("Post", id=pid))["post"]
    profile = (await ask("UserProfile", handle="author"))["user"]["posts"]
    comments = (await ask("PostComments", id=pid))["post"]
    return {
        "feed": p in chrono and p in ranked,
        "post": by_id is not None,
        "profile": p in {int(e["node"]["id"]) for e in profile["edges"]},
        "comments": comments is not None and len(comments["comments"]["edges"]) == 1,
        "recommended": r in ranked,
    }


EVERYWHERE = {"feed": True, "post": True, "profile": True, "comments": True, "recommended": True}
NOWHERE = dict.fromkeys(EVERYWHERE, False)


async def test_restricted_in_a_region_is_gone_there_only_and_comes_back(
    client, state, pipeline, capsys
) -> None:
    world = await _world(client, state, pipeline)
    p, r = world["posts"]["p"], world["posts"]["r"]
    async with app_client(state, region="eu") as eu:
        assert await _sees(eu, world) == EVERYWHERE
        argv = ["restrict", str(p), "--regions", "eu,us", "--reason", "court order"]
        assert await _restrict(*argv, "--by", "ops1") == 0
        assert await _restrict("restrict", str(r), "--regions", "eu", "--reason", "law") == 0
        assert f"post {p}: restricted in eu, us" in capsys.readouterr().out
        state.feed.recommendations.cache.clear()

        assert await _sees(eu, world) == NOWHERE  # followers too
        assert await _sees(client, world) == EVERYWHERE  # served in "local"
        anonymous = await gql(eu, "Post", {"id": encode_post_id(p)})
        assert anonymous.ok()["post"] is None
        # The author still sees it in the restricted region (decision 0088).
        mine = await _sees(eu, world, "author")
        assert mine["post"] and mine["profile"] and mine["comments"]
        # Liking or commenting is as for any post one may not see.
        like = await gql(eu, "LikePost", {"id": encode_post_id(p)}, token=world["tok"]["viewer"])
        assert like.codes == ["NOT_FOUND"]

        argv = ["unrestrict", str(p), "--regions", "eu", "--reason", "appeal won"]
        assert await _restrict(*argv) == 0
        assert await _restrict("unrestrict", str(r), "--regions", "eu", "--reason", "lifted") == 0
        state.feed.recommendations.cache.clear()
        assert await _sees(eu, world) == EVERYWHERE
        async with app_client(state, region="us") as us:
            assert (await _sees(us, world))["post"] is False  # still restricted in us

    audit = await sql(
        "SELECT action, regions, reason, operator FROM post_restriction_audit"
        " WHERE post_id = $1 ORDER BY id",
        p,
    )
    assert [tuple(a) for a in audit] == [
        ("restrict", ["eu", "us"], "court order", "ops1"),
        ("unrestrict", ["eu"], "appeal won", audit[1]["operator"]),
    ]
    assert audit[1]["operator"]  # the login by default
    kept = await sql("SELECT region, reason, restricted_by FROM post_restrictions")
    assert [tuple(k) for k in kept] == [("us", "court order", "ops1")]
    assert (await sql("SELECT restricted_regions FROM posts WHERE id = $1", p))[0][0] == ["us"]
    events = await sql("SELECT count(*) FROM outbox WHERE event_type = 'PostRestricted'")
    assert events[0][0] == 4


async def test_a_session_built_before_the_restriction_drops_the_post(
    client, state, pipeline
) -> None:
    world = await _world(client, state, pipeline)
    tok = world["tok"]["viewer"]
    async with app_client(state, region="eu") as eu:
        first = (await _op(eu, "Feed", tok, first=1, mode="RANKED"))["feed"]
        assert first["pageInfo"]["hasNextPage"]
        shown = {int(e["node"]["id"]) for e in first["edges"]}
        p, q = [world["posts"][k] for k in ("p", "q", "r") if world["posts"][k] not in shown][:2]
        await _restrict("restrict", str(p), "--regions", "eu", "--reason", "r")
        after = first["pageInfo"]["endCursor"]
        rest: set[int] = set()
        while after:
            page = (await _op(eu, "Feed", tok, first=1, mode="RANKED", after=after))["feed"]
            rest |= {int(e["node"]["id"]) for e in page["edges"]}
            after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
        assert p not in rest
        assert q in rest


async def test_a_trusted_edge_names_the_region_an_untrusted_peer_cannot(
    state, pipeline, client
) -> None:
    world = await _world(client, state, pipeline)
    for name in ("p", "r"):
        await _restrict("restrict", str(world["posts"][name]), "--regions", "eu", "--reason", "r")
    edge, stranger = "127.0.0.1", "203.0.113.9"
    async with clients_at(state, [edge, stranger], region_header=HEADER) as (trusted, other):
        assert await _sees(trusted, world, headers={HEADER: "eu"}) == NOWHERE
        assert await _sees(trusted, world, headers={HEADER: "us"}) == EVERYWHERE
        assert await _sees(trusted, world) == EVERYWHERE  # no header: REGION ("local")
        assert await _sees(other, world, headers={HEADER: "eu"}) == EVERYWHERE  # ignored
        bad = await trusted.post(
            "/graphql",
            json={"query": '{ post(id: "1") { id } }'},
            headers={HEADER: "EU'; --"},
        )
        assert [e["extensions"]["code"] for e in bad.json()["errors"]] == ["BAD_USER_INPUT"]
    async with clients_at(state, [edge], region_header=HEADER, policy_regions="eu,us,local") as (
        known,
    ):
        unknown = await known.post(
            "/graphql", json={"query": '{ post(id: "1") { id } }'}, headers={HEADER: "mars"}
        )
        assert "Unknown region" in unknown.json()["errors"][0]["message"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["restrict", "999", "--regions", "eu", "--reason", "x"], "No post 999"),
        (["restrict", "{p}", "--regions", "EU", "--reason", "x"], "not a region name"),
        (["restrict", "{p}", "--regions", "eu,,us", "--reason", "x"], "Empty region name"),
        (["restrict", "{p}", "--regions", "eu", "--reason", "  "], "A reason is required"),
        (["unrestrict", "{p}", "--regions", "eu", "--reason", "x"], "not restricted in eu"),
    ],
)
async def test_bad_input_is_refused_with_a_message(client, state, argv, message, capsys) -> None:
    ((token, _),) = await quick_users(state, ["author"])
    p = int((await _op(client, "CreatePost", token, body="x"))["createPost"]["id"])
    code = await _restrict(*(a.format(p=p) for a in argv))
    assert code == 2
    assert message in capsys.readouterr().err
    assert (await sql("SELECT count(*) FROM post_restriction_audit"))[0][0] == 0


async def test_the_command_line(client, state) -> None:
    """`python -m app.moderation` itself: a missing --reason is argparse's usage error, a
    restriction then shows in `list` with its audit trail."""
    ((token, _),) = await quick_users(state, ["author"])
    p = int((await _op(client, "CreatePost", token, body="x"))["createPost"]["id"])
    code, _, err = await run_module("app.moderation", "restrict", str(p), "--regions", "eu")
    assert code == 2 and "--reason" in err
    code, out, err = await run_module(
        "app.moderation", "restrict", str(p), "--regions", "eu", "--reason", "spam", "--by", "kim"
    )
    assert code == 0, err
    code, out, _ = await run_module("app.moderation", "list", str(p))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"{p}\teu\t") and lines[0].endswith("\tkim\tspam")
    assert lines[1].startswith("audit\t") and lines[1].endswith("\trestrict\teu\tkim\tspam")
