"""Image posts end to end on the S3 store: `uvicorn app.web:app` with MEDIA_STORE=s3 against
moto's S3 server (a real S3 HTTP API on a port of this module's own). The client PUTs to the
bucket's presigned URL (checked by the SigV4 gate, as S3 would: moto does not), the service
reads and checks the staged bytes from the bucket at createPost, writes the stripped object,
and a follower's feed hands out a presigned GET of it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiobotocore.session import get_session

from app.media.checks import check_image
from tests.helpers import eventually, follow, make_user
from tests.media.images import image_bytes
from tests.media.sigv4_gate import SigV4Gate
from tests.media.steps import create_post, create_upload, feed_media, put
from tests.servers import ApiServer

BUCKET = "media-flow"
REGION = "eu-west-1"
ACCESS_KEY_ID = "AKIAMEDIAFLOW"
SECRET_ACCESS_KEY = "media-flow-secret"


@pytest.fixture(scope="module")
async def api(test_database: str, moto_url: str) -> AsyncIterator[ApiServer]:
    async with get_session().create_client(
        "s3",
        region_name=REGION,
        endpoint_url=moto_url,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
    ) as s3:
        await s3.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
    env = {
        "MEDIA_STORE": "s3",
        "MEDIA_S3_BUCKET": BUCKET,
        "MEDIA_S3_REGION": REGION,
        "MEDIA_S3_ENDPOINT_URL": moto_url,
        "MEDIA_S3_ACCESS_KEY_ID": ACCESS_KEY_ID,
        "MEDIA_S3_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        "MEDIA_S3_ADDRESSING_STYLE": "path",
        "MEDIA_S3_KEY_PREFIX": "media/",
    }
    async with ApiServer(env=env) as server:
        yield server


async def test_upload_post_and_the_followers_feed_on_the_bucket(
    api: ApiServer, moto_url: str
) -> None:
    data = image_bytes("JPEG", size=(320, 200), gps=True)
    async with (
        api.http() as http,
        httpx.AsyncClient(transport=SigV4Gate(SECRET_ACCESS_KEY)) as bucket,
    ):
        author, _ = await make_user(http, "author")
        reader, _ = await make_user(http, "reader")
        await follow(http, reader, "author")
        made = (await create_upload(http, author, "image/jpeg", len(data))).ok()["createUpload"]
        assert made["url"].startswith(f"{moto_url}/{BUCKET}/media/")
        # The bucket takes the bytes as signed, and nothing else (the gate stands for S3).
        assert (await put(bucket, made, data, **{"Content-Type": "text/html"})).status_code == 403
        assert (await put(bucket, made, data)).status_code == 200
        post = await create_post(http, author, [{"uploadId": made["id"], "alt": "on S3"}], "hi")
        post_id = int(post.ok()["createPost"]["id"])

        async def in_feed() -> list[dict[str, Any]]:
            return (await feed_media(http, reader)).get(post_id, [])

        found: list[dict[str, Any]] = await eventually(in_feed, 15.0, 0.1, "the post's image")
        [media] = found
        assert media["url"].startswith(f"{moto_url}/{BUCKET}/media/m-")
        assert (media["width"], media["height"], media["alt"]) == (320, 200, "on S3")
        served = await bucket.get(media["url"])
    assert served.status_code == 200
    stripped = check_image(data, "image/jpeg", 10**9, 10**9).data
    assert served.content == stripped and served.content != data  # the GPS block is gone
    assert served.headers["content-type"] == "image/jpeg"
    assert served.headers["cache-control"] == "public, immutable"
