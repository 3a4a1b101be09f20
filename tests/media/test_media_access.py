"""Visibility holds for media (issue 36): a FOLLOWERS-only post's image gets short-lived
private URLs for those who may see the post only; a forged URL is refused; a blocked viewer
loses the image within the private URL lifetime; a deleted post's object is removed by the
job; orphan uploads are collected; the compiled fast path serves Post.media (one query per page)."""

from __future__ import annotations

from typing import Any

from app.fanout import lanes
from app.media import hydrate
from app.media.checks import check_image
from jobs.media import CLEANUP
from tests.helpers import (
    app_client,
    author_with_fans,
    block,
    counting_statements,
    eventually,
    gql,
    make_user,
    sql,
)
from tests.media.images import image_bytes
from tests.media.steps import (
    FEED,
    altered,
    create_upload,
    feed_media,
    image_post,
    max_age,
    post_media,
    put,
)


async def _cleanup(pipeline: Any) -> dict[str, int]:
    """The media cleanup enqueued by name and run by a real worker; its result."""
    job = await pipeline.arq.enqueue_job(CLEANUP, _queue_name=lanes.DEFAULT)
    await pipeline.settle()
    return dict(await job.result(timeout=10))


async def test_a_followers_only_image_is_for_followers_only(client, pipeline, state) -> None:
    token, _, [(fan, _)] = await author_with_fans(client, 1)
    stranger, _ = await make_user(client, "stranger")
    data = image_bytes("PNG")
    post_id = await image_post(client, token, data, visibility="FOLLOWERS")
    await pipeline.settle()

    [media] = (await feed_media(client, fan))[post_id]
    response = await client.get(media["url"])
    assert response.status_code == 200
    assert response.content == check_image(data, "image/png", 10**9, 10**9).data
    scope, age = max_age(response)
    assert scope == "private" and 0 < age <= state.settings.media_private_url_seconds
    # The stranger never sees the post, so never gets a URL for its image.
    assert await post_media(client, stranger, post_id) is None
    assert await post_media(client, None, post_id) is None
    assert post_id not in await feed_media(client, stranger)


async def test_a_forged_or_altered_url_is_refused(client) -> None:
    token, _ = await make_user(client, "author")
    post_id = await image_post(client, token, image_bytes("PNG"), visibility="PRIVATE")
    [media] = await post_media(client, token, post_id)
    url = media["url"]
    assert (await client.get(url)).status_code == 200
    signature = url.rsplit("sig=", 1)[1]
    forged = [
        altered(url, sig=("0" if signature[0] != "0" else "1") + signature[1:]),
        altered(url, ct="text/html"),  # another type under the same signature
        altered(url, ct="image/svg+xml"),
        altered(url, cc="public"),  # made cacheable by a CDN
        altered(url, exp=str(int(url.split("exp=")[1].split("&")[0]) + 3600)),  # made to live
        url.split("?")[0],  # no signature at all
    ]
    for bad in forged:
        response = await client.get(bad)
        assert response.status_code == 403, bad
        assert "image" not in response.headers["content-type"]
    # A made-up key (another object's, a path) is no better.
    assert (await client.get("/media/m-" + "0" * 64 + url[url.index("?") :])).status_code == 403
    assert (await client.get("/media/..%2Fsecret_key")).status_code == 404


async def test_a_blocked_viewer_loses_the_image_within_the_private_lifetime(state) -> None:
    lifetime = 2  # MEDIA_PRIVATE_URL_SECONDS, shortened
    async with app_client(state, media_private_url_seconds=lifetime) as client:
        token, _, [(fan, _)] = await author_with_fans(client, 1)
        post_id = await image_post(client, token, image_bytes("PNG"), visibility="FOLLOWERS")
        [media] = await post_media(client, fan, post_id)
        assert (await client.get(media["url"])).status_code == 200
        await block(client, token, "fan0")
        # No new URL: the post is gone for the fan (by id and in feeds)...
        assert await post_media(client, fan, post_id) is None
        assert post_id not in await feed_media(client, fan)

        # ...and the one handed out stops working when it expires, within the lifetime.
        async def refused() -> bool:
            return (await client.get(media["url"])).status_code == 403

        await eventually(refused, within=lifetime + 2, interval=0.2, what="URL expired")


async def test_a_deleted_posts_object_is_removed_by_the_job(client, pipeline, state) -> None:
    token, _ = await make_user(client, "author")
    post_id = await image_post(client, token, image_bytes("PNG"))
    [media] = await post_media(client, token, post_id)
    [(key,)] = await sql("SELECT key FROM media_objects")
    assert (await client.get(media["url"])).status_code == 200
    (await gql(client, "DeletePost", {"id": str(post_id)}, token=token)).ok()
    # Within the grace the object stays (an attach may be committing).
    assert (await _cleanup(pipeline))["objects_deleted"] == 0
    assert await state.media_store.exists(key)
    grace = state.settings.media_unreferenced_grace_seconds
    await sql(
        "UPDATE media_objects SET last_attached_at = now() - make_interval(secs => $1)",
        float(grace + 1),
    )
    assert (await _cleanup(pipeline))["objects_deleted"] == 1
    assert not await state.media_store.exists(key)
    assert await sql("SELECT 1 FROM media_objects") == []
    assert (await client.get(media["url"])).status_code == 404


async def test_an_object_a_live_post_uses_stays(client, pipeline, state) -> None:
    ann, _ = await make_user(client, "ann")
    bob, _ = await make_user(client, "bob")
    data = image_bytes("PNG")
    first = await image_post(client, ann, data)
    await image_post(client, bob, data)  # the same bytes: one object, two posts
    (await gql(client, "DeletePost", {"id": str(first)}, token=ann)).ok()
    await sql("UPDATE media_objects SET last_attached_at = now() - interval '30 days'")
    assert (await _cleanup(pipeline))["objects_deleted"] == 0
    [(key,)] = await sql("SELECT key FROM media_objects")
    assert await state.media_store.exists(key)


async def test_an_orphan_upload_is_collected(client, pipeline, state) -> None:
    token, _ = await make_user(client, "author")
    data = image_bytes("PNG")
    keys = []
    for _ in range(2):
        made = (await create_upload(client, token, "image/png", len(data))).ok()["createUpload"]
        assert (await put(client, made, data)).status_code == 200
        keys.append(
            (
                made["id"],
                (await sql("SELECT staging_key FROM uploads WHERE id = $1", made["id"]))[0][0],
            )
        )
    (old_id, old_key), (new_id, new_key) = keys
    ttl = state.settings.media_upload_ttl_seconds
    await sql(
        "UPDATE uploads SET created_at = created_at - make_interval(secs => $2),"
        " expires_at = expires_at - make_interval(secs => $2) WHERE id = $1",
        old_id,
        float(ttl + 86_400 + 1),
    )
    done = await _cleanup(pipeline)
    assert done["uploads_expired"] == 1 and done["uploads_deleted"] == 1
    assert not await state.media_store.exists(old_key)
    assert [r[0] for r in await sql("SELECT id FROM uploads")] == [new_id]
    assert await state.media_store.exists(new_key)  # the fresh one stays


async def test_the_compiled_path_serves_post_media_in_one_query(client, pipeline, state) -> None:
    from app.api.fast.compiled_http import COMPILED
    from app.api.fast.text_plans import TEXT_LABEL

    def compiled() -> float:
        return COMPILED.labels(TEXT_LABEL)._value.get()

    token, _, [(fan, _)] = await author_with_fans(client, 1)
    posts = {}
    for i, visibility in enumerate(("PUBLIC", "FOLLOWERS", "PUBLIC", "FOLLOWERS")):
        data = image_bytes("PNG", color=(10 * i, 20, 30))
        posts[await image_post(client, token, data, visibility=visibility)] = visibility
    await pipeline.settle()

    async def send(query: str) -> dict[str, Any]:
        response = await client.post(
            "/graphql",
            json={"query": query, "variables": {"first": 10}},
            headers={"Authorization": f"Bearer {fan}"},
        )
        assert response.status_code == 200
        body: dict[str, Any] = response.json()
        assert "errors" not in body, body
        return body

    for _ in range(2):  # a text is planned on its second sighting (decision 0045)
        await send(FEED)
    before = compiled()
    for _ in range(3):
        hydrate.forget_local()  # as a process that has not read these posts' images yet
        with counting_statements(state) as seen:
            body = await send(FEED)
        edges = body["data"]["feed"]["edges"]
        assert {int(e["node"]["id"]) for e in edges} == set(posts)
        for edge in edges:
            [media] = edge["node"]["media"]
            scope = "public" if posts[int(edge["node"]["id"])] == "PUBLIC" else "private"
            assert f"cc={scope}" in media["url"] and media["width"] == 64
            response = await client.get(media["url"])
            assert response.status_code == 200 and response.content.startswith(b"\x89PNG")
        # The page's media: one query for its four posts, not one per post.
        assert len([q for q in seen if "post_media" in q]) == 1, seen
    assert compiled() - before == 3  # every answer from the compiled path


async def test_narrowing_a_post_makes_its_urls_private_and_stops_strangers(client) -> None:
    token, _, [(fan, _)] = await author_with_fans(client, 1)
    stranger, _ = await make_user(client, "stranger")
    post_id = await image_post(client, token, image_bytes("PNG"))
    [public] = await post_media(client, stranger, post_id)
    assert "cc=public" in public["url"]
    variables = {"id": str(post_id), "visibility": "FOLLOWERS"}
    (await gql(client, "SetPostVisibility", variables, token=token)).ok()
    assert await post_media(client, stranger, post_id) is None  # no new URL for them
    [private] = await post_media(client, fan, post_id)
    assert "cc=private" in private["url"]
    response = await client.get(private["url"])
    assert max_age(response)[0] == "private"
