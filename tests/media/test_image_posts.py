"""Image posts through GraphQL over HTTP (issue 36): upload, PUT, createPost with media, the
image in a follower's feed with a URL that serves the stripped bytes, and every refusal on
the way (type, size, pixel bomb, budgets, someone else's upload, too many images, alt text)."""

from __future__ import annotations

import hashlib
import time

from app.media import hydrate
from app.media.checks import check_image
from tests.helpers import app_client, author_with_fans, counting_statements, gql, make_user, sql
from tests.media.images import HTML, SVG, image_bytes, pixel_bomb
from tests.media.steps import (
    create_post,
    create_upload,
    feed_media,
    image_post,
    max_age,
    post_media,
    put,
    upload,
)

BIG = 10**9


async def test_an_image_post_reaches_a_followers_feed_stripped(client, pipeline, state) -> None:
    token, _, [(fan, _)] = await author_with_fans(client, 1)
    png = image_bytes("PNG", size=(40, 30))
    upload_id = await upload(client, token, png, "image/png")
    staged = (await sql("SELECT staging_key FROM uploads WHERE id = $1", upload_id))[0][0]
    assert await state.media_store.exists(staged)
    made = await create_post(client, token, [{"uploadId": upload_id, "alt": "red"}])
    post = made.ok()["createPost"]
    assert post["body"] == ""  # a post with an image may have no text
    await pipeline.settle()

    [media] = (await feed_media(client, fan))[int(post["id"])]
    assert (media["width"], media["height"], media["contentType"], media["alt"]) == (
        40,
        30,
        "image/png",
        "red",
    )
    response = await client.get(media["url"])
    assert response.status_code == 200
    assert response.content == check_image(png, "image/png", BIG, BIG).data != png  # no GPS
    assert response.headers["content-type"] == "image/png"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == "default-src 'none'"
    scope, age = max_age(response)
    window = state.settings.media_public_url_seconds
    assert scope == "public" and window <= age <= 2 * window
    # The same URL for every viewer within the window (a CDN caches one copy).
    assert (await post_media(client, None, int(post["id"])))[0]["url"] == media["url"]
    assert not await state.media_store.exists(staged)  # the staged copy is gone
    assert len(await sql("SELECT 1 FROM media_objects")) == 1


async def test_each_format_is_accepted(client) -> None:
    token, _ = await make_user(client, "author")
    for fmt, content_type in (("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")):
        data = image_bytes(fmt, size=(21, 12))
        post_id = await image_post(client, token, data, content_type)
        [media] = await post_media(client, token, post_id)
        assert (media["width"], media["height"], media["contentType"]) == (21, 12, content_type)
        response = await client.get(media["url"])
        assert response.headers["content-type"] == content_type
        assert response.content == check_image(data, content_type, BIG, BIG).data


async def test_svg_or_html_declared_as_png_is_refused(client) -> None:
    token, _ = await make_user(client, "author")
    for body in (SVG, HTML):
        upload_id = await upload(client, token, body, "image/png")
        refused = await create_post(client, token, [{"uploadId": upload_id}], "look")
        assert (
            refused.codes == ["BAD_USER_INPUT"] and "not image/png" in refused.errors[0]["message"]
        )
    for declared in ("image/svg+xml", "text/html"):
        refused = await create_upload(client, token, declared, len(SVG))
        assert refused.codes == ["BAD_USER_INPUT"]
    assert await sql("SELECT 1 FROM media_objects") == []
    assert await sql("SELECT 1 FROM posts") == []  # the post went with its refusal


async def test_sizes_are_bounded_at_create_upload_and_at_the_put(client, state) -> None:
    token, _ = await make_user(client, "author")
    cap = state.settings.media_max_bytes
    assert (await create_upload(client, token, "image/png", cap + 1)).codes == ["BAD_USER_INPUT"]
    assert (await create_upload(client, token, "image/png", 0)).codes == ["BAD_USER_INPUT"]
    data = image_bytes("PNG", gps=False)
    made = (await create_upload(client, token, "image/png", len(data))).ok()["createUpload"]
    # A body longer than declared: refused, with a header that says so or one that lies.
    longer = data + b"\x00" * 100
    assert (
        await put(client, made, longer, **{"Content-Length": str(len(longer))})
    ).status_code == 400
    assert (await put(client, made, longer)).status_code == 413
    # Another type than the signed one, or a forged length in the URL.
    assert (await put(client, made, data, **{"Content-Type": "text/html"})).status_code == 400
    forged = dict(made, url=made["url"].replace(f"len={len(data)}", f"len={len(longer)}"))
    assert (
        await put(client, forged, longer, **{"Content-Length": str(len(longer))})
    ).status_code == 403
    # The declared bytes go in once; a second PUT to the same URL is refused.
    assert (await put(client, made, data)).status_code == 200
    assert (await put(client, made, data)).status_code == 409


async def test_a_pixel_bomb_is_refused_cheaply(client) -> None:
    token, _ = await make_user(client, "author")
    bomb = pixel_bomb()  # 1x1 pixel data under a header claiming 50000x50000
    upload_id = await upload(client, token, bomb, "image/png")
    started = time.process_time()
    refused = await create_post(client, token, [{"uploadId": upload_id}], "boom")
    assert refused.codes == ["BAD_USER_INPUT"] and "pixels" in refused.errors[0]["message"]
    # A decode of 2.5 gigapixels would take seconds of CPU and gigabytes; the header, nothing.
    assert time.process_time() - started < 1.0


async def test_a_declared_sha256_must_match(client) -> None:
    token, _ = await make_user(client, "author")
    data = image_bytes("PNG")
    wrong = hashlib.sha256(b"other bytes").hexdigest()
    made = (await create_upload(client, token, "image/png", len(data), wrong)).ok()["createUpload"]
    assert (await put(client, made, data)).status_code == 200
    refused = await create_post(client, token, [{"uploadId": made["id"]}])
    assert refused.codes == ["BAD_USER_INPUT"] and "sha256" in refused.errors[0]["message"]
    assert (await create_upload(client, token, "image/png", 10, "xyz")).codes == ["BAD_USER_INPUT"]
    good = await upload(client, token, data, with_sha256=True)
    assert (await create_post(client, token, [{"uploadId": good}])).ok()


async def test_the_same_file_from_two_users_is_stored_once(client, state) -> None:
    ann, _ = await make_user(client, "ann")
    bob, _ = await make_user(client, "bob")
    data = image_bytes("JPEG")
    first = await image_post(client, ann, data, "image/jpeg")
    second = await image_post(client, bob, data, "image/jpeg")
    assert len(await sql("SELECT 1 FROM media_objects")) == 1
    [a], [b] = await post_media(client, ann, first), await post_media(client, bob, second)
    assert a["url"].split("?")[0] == b["url"].split("?")[0]
    # One file in the store besides nothing staged.
    assert [p.name[:2] for p in state.media_store.directory.iterdir()] == ["m-"]


async def test_another_users_upload_is_not_found(client) -> None:
    ann, _ = await make_user(client, "ann")
    mallory, _ = await make_user(client, "mallory")
    upload_id = await upload(client, ann, image_bytes("PNG"))
    stolen = await create_post(client, mallory, [{"uploadId": upload_id}], "mine")
    unknown = await create_post(client, mallory, [{"uploadId": "no-such-upload"}], "mine")
    assert stolen.codes == unknown.codes == ["NOT_FOUND"]
    assert stolen.errors[0]["message"] == unknown.errors[0]["message"]  # nothing told apart
    assert (await create_post(client, ann, [{"uploadId": upload_id}])).ok()
    # Used once: attaching it again is NOT_FOUND too.
    again = await create_post(client, ann, [{"uploadId": upload_id}])
    assert again.codes == ["NOT_FOUND"]


async def test_at_most_four_images_in_order(client) -> None:
    token, _ = await make_user(client, "author")
    colors = [(10 * i, 0, 0) for i in range(5)]
    ids = [await upload(client, token, image_bytes("PNG", color=c, gps=False)) for c in colors]
    refused = await create_post(client, token, [{"uploadId": i} for i in ids])
    assert refused.codes == ["BAD_USER_INPUT"]
    made = await create_post(
        client, token, [{"uploadId": i, "alt": f"n{n}"} for n, i in enumerate(ids[:4])]
    )
    assert [m["alt"] for m in made.ok()["createPost"]["media"]] == ["n0", "n1", "n2", "n3"]


async def test_alt_text_is_bounded(client, state) -> None:
    token, _ = await make_user(client, "author")
    limit = state.settings.media_alt_max_chars
    upload_id = await upload(client, token, image_bytes("PNG"))
    refused = await create_post(client, token, [{"uploadId": upload_id, "alt": "a" * (limit + 1)}])
    assert refused.codes == ["BAD_USER_INPUT"]
    made = await create_post(client, token, [{"uploadId": upload_id, "alt": "a" * limit}])
    assert made.ok()["createPost"]["media"][0]["alt"] == "a" * limit


async def test_upload_budgets_per_day(state) -> None:
    async with app_client(state, media_uploads_per_day=2, media_upload_bytes_per_day=5000) as c:
        token, _ = await make_user(c, "author")
        assert (await create_upload(c, token, "image/png", 3000)).ok()
        assert (await create_upload(c, token, "image/png", 2001)).codes == ["RATE_LIMITED"]
        assert (await create_upload(c, token, "image/png", 2000)).ok()
        refused = await create_upload(c, token, "image/png", 1)  # the count, now
        assert refused.codes == ["RATE_LIMITED"]
        assert refused.errors[0]["extensions"]["retryAfter"] > 0
        other, _ = await make_user(c, "other")  # per user
        assert (await create_upload(c, other, "image/png", 100)).ok()
        # A day later the window has moved on.
        await sql("UPDATE uploads SET created_at = created_at - interval '25 hours'")
        assert (await create_upload(c, token, "image/png", 4000)).ok()


async def test_an_empty_post_without_images_is_still_refused(client) -> None:
    token, _ = await make_user(client, "author")
    result = await gql(client, "CreatePost", {"body": "   "}, token=token)
    assert result.codes == ["BAD_USER_INPUT"]


async def test_a_pages_media_cost_one_query_whatever_the_number_of_posts(
    client, pipeline, state
) -> None:
    token, _, [(fan, _)] = await author_with_fans(client, 1)
    data = [image_bytes("PNG", color=(i, 0, 0), gps=False) for i in range(8)]
    for n in range(3):  # 3 posts of 4, 4 and 0 images
        ids = [await upload(client, token, d) for d in data[4 * n : 4 * n + 4]] if n < 2 else []
        media = [{"uploadId": i} for i in ids]
        (await create_post(client, token, media, f"post {n}")).ok()
    await pipeline.settle()
    hydrate.forget_local()  # the posts' images as a process that has not read them yet
    with counting_statements(state) as seen:
        found = await feed_media(client, fan)
    assert sorted(len(m) for m in found.values()) == [0, 4, 4]
    assert len([s for s in seen if "post_media" in s]) == 1
    with counting_statements(state) as seen:  # read before: the process knows them
        assert await feed_media(client, fan) == found
    assert not [s for s in seen if "post_media" in s]
