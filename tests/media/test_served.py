"""The upload flow against `uvicorn app.web:app` over real sockets (tests.servers.ApiServer):
the PUT streamed through the server to the local store, a body past the declared size cut
off, the image served with its headers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.media.checks import check_image
from tests.helpers import make_user
from tests.media.images import image_bytes
from tests.media.steps import create_post, create_upload, post_media, put
from tests.servers import ApiServer


@pytest.fixture(scope="module")
async def api(test_database: str) -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


async def test_upload_post_and_get_over_real_sockets(api: ApiServer) -> None:
    async with api.http() as http:
        token, _ = await make_user(http, "author")
        data = image_bytes("JPEG", size=(320, 200))
        made = (await create_upload(http, token, "image/jpeg", len(data))).ok()["createUpload"]

        async def trickle() -> AsyncIterator[bytes]:  # a streamed body, chunked
            for at in range(0, len(data), 1000):
                yield data[at : at + 1000]

        # Streamed without a Content-Length: not what was signed.
        assert (await http.put(made["url"], content=trickle())).status_code == 400
        assert (await put(http, made, data)).status_code == 200
        post = await create_post(http, token, [{"uploadId": made["id"], "alt": "a photo"}])
        post_id = int(post.ok()["createPost"]["id"])
        [media] = await post_media(http, token, post_id)
        response = await http.get(media["url"])
    assert response.status_code == 200
    assert response.content == check_image(data, "image/jpeg", 10**9, 10**9).data
    assert response.headers["content-type"] == "image/jpeg"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert (media["width"], media["height"]) == (320, 200)


async def test_a_body_longer_than_declared_is_refused_by_the_server(api: ApiServer) -> None:
    async with api.http() as http:
        token, _ = await make_user(http, "author2")
        data = image_bytes("PNG", gps=False)
        made = (await create_upload(http, token, "image/png", len(data))).ok()["createUpload"]
        longer = data + bytes(4096)
        refused = await put(http, made, longer, **{"Content-Length": str(len(longer))})
        assert refused.status_code == 400
        refused = await create_post(http, token, [{"uploadId": made["id"]}], "x")
        assert refused.codes == ["BAD_USER_INPUT"]  # nothing was stored for it
