"""The idempotency contract of every creating mutation that takes a key (`createPost`,
`addComment`; issue 33), through GraphQL over HTTP and the real ARQ worker:

- a replay of a key whose created object has since been deleted answers NOT_FOUND, the same
  way for both, and creates nothing;
- a key expires IDEMPOTENCY_KEY_TTL_SECONDS (24 h) after its first use: the same key then
  creates a new object;
- expired keys are pruned by the worker's housekeeping job (bounded deletes).
"""

from __future__ import annotations

from typing import Any

from app.fanout import lanes
from tests.helpers import create_post, gql, post, sign_up, sql

# The documented default of IDEMPOTENCY_KEY_TTL_SECONDS, 24 h: keys are aged past it.
AGED = "interval '25 hours'"
PRUNE_JOB = "prune_expired_keys"


async def _comment(client: Any, token: str, post_id: int | str, key: str) -> Any:
    variables = {"postId": str(post_id), "body": "a comment", "idempotencyKey": key}
    return await gql(client, "AddComment", variables, token=token)


async def _replay_post(client: Any, token: str, key: str) -> Any:
    return await gql(client, "CreatePost", {"body": "again", "idempotencyKey": key}, token=token)


async def _posts_of(handle: str) -> int:
    rows = await sql(
        "SELECT count(*) AS n FROM posts p JOIN users u ON u.id = p.author_id WHERE u.handle = $1",
        handle,
    )
    return int(rows[0]["n"])


async def test_a_replayed_key_of_a_deleted_object_answers_not_found_for_every_mutation(
    client,
) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    made = await create_post(client, alice, "once", idempotencyKey="post-key")
    (await gql(client, "DeletePost", {"id": made["id"]}, token=alice)).ok()

    replay = await _replay_post(client, alice, "post-key")
    assert replay.codes == ["NOT_FOUND"], replay.errors  # not the tombstone as if live
    assert replay.data is None or replay.data.get("createPost") is None
    assert await _posts_of("alice") == 1  # nothing created either

    # addComment, the same case: its comment deleted.
    target = await post(client, alice, "a post")
    comment = (await _comment(client, bob, target, "comment-key")).ok()["addComment"]
    (await gql(client, "DeleteComment", {"id": comment["id"]}, token=bob)).ok()
    again = await _comment(client, bob, target, "comment-key")
    assert again.codes == ["NOT_FOUND"]

    # addComment whose comment stands but whose post was deleted: deleted with it.
    other = await post(client, alice, "deleted later")
    (await _comment(client, bob, other, "on-deleted-post")).ok()
    (await gql(client, "DeletePost", {"id": str(other)}, token=alice)).ok()
    gone = await _comment(client, bob, other, "on-deleted-post")
    assert gone.codes == ["NOT_FOUND"]

    # One contract: the same code and the same shape of message for both.
    messages = [r.errors[0]["message"] for r in (replay, again, gone)]
    assert all("idempotency key" in m and "deleted" in m for m in messages), messages


async def test_a_key_expires_after_its_ttl_and_then_creates_anew(client) -> None:
    alice = await sign_up(client, "alice")
    bob = await sign_up(client, "bob")
    first = await create_post(client, alice, "first", idempotencyKey="k")
    assert (await create_post(client, alice, "first", idempotencyKey="k"))["id"] == first["id"]
    deleted = await create_post(client, alice, "deleted", idempotencyKey="gone")
    (await gql(client, "DeletePost", {"id": deleted["id"]}, token=alice)).ok()
    comment = (await _comment(client, bob, first["id"], "ck")).ok()["addComment"]

    await sql(f"UPDATE idempotency_keys SET created_at = created_at - {AGED}")
    await sql(f"UPDATE comment_idempotency_keys SET created_at = created_at - {AGED}")

    # Past the TTL the key is forgotten: a new post, a new comment, and the fresh key holds.
    later = await create_post(client, alice, "later", idempotencyKey="k")
    assert later["id"] != first["id"]
    assert (await create_post(client, alice, "later", idempotencyKey="k"))["id"] == later["id"]
    renewed = await create_post(client, alice, "renewed", idempotencyKey="gone")
    assert renewed["id"] != deleted["id"]
    new_comment = (await _comment(client, bob, first["id"], "ck")).ok()["addComment"]
    assert new_comment["id"] != comment["id"]
    assert await _posts_of("alice") == 4


async def test_expired_keys_are_pruned_by_the_worker(client, pipeline) -> None:
    alice = await sign_up(client, "alice")
    for i in range(5):
        await create_post(client, alice, f"old {i}", idempotencyKey=f"old-{i}")
    target = await post(client, alice, "post")
    for i in range(3):
        (await _comment(client, alice, target, f"old-c-{i}")).ok()
    await sql(f"UPDATE idempotency_keys SET created_at = created_at - {AGED}")
    await sql(f"UPDATE comment_idempotency_keys SET created_at = created_at - {AGED}")
    await create_post(client, alice, "fresh", idempotencyKey="fresh")
    (await _comment(client, alice, target, "fresh-c")).ok()

    await pipeline.settle()
    job = await pipeline.arq.enqueue_job(PRUNE_JOB, _queue_name=lanes.DEFAULT)
    assert job is not None
    await pipeline.settle()
    assert await job.result(timeout=5) == 8  # keys deleted
    keys = await sql("SELECT key FROM idempotency_keys")
    assert [r["key"] for r in keys] == ["fresh"]
    comment_keys = await sql("SELECT key FROM comment_idempotency_keys")
    assert [r["key"] for r in comment_keys] == ["fresh-c"]
    # A fresh key still replays.
    again = await create_post(client, alice, "fresh", idempotencyKey="fresh")
    assert again["body"] == "fresh"
