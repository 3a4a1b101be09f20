"""The image-post flow through the public interface: createUpload, the PUT to its URL with its
headers (httpx), createPost with media, Post.media in a feed or by id, GETting a media URL."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from tests.helpers import Result, gql

MEDIA_FIELDS = "media { url width height contentType alt }"
CREATE_UPLOAD = """
mutation ($contentType: String!, $byteSize: Int!, $sha256: String) {
  createUpload(contentType: $contentType, byteSize: $byteSize, sha256: $sha256) {
    id url headers { name value } expiresAt
  }
}"""
CREATE_POST = f"""
mutation ($body: String!, $visibility: Visibility, $media: [MediaInput!]) {{
  createPost(body: $body, visibility: $visibility, media: $media) {{ id body {MEDIA_FIELDS} }}
}}"""
FEED = f"""
query ($first: Int) {{
  feed(first: $first, mode: CHRONOLOGICAL) {{ edges {{ node {{ id {MEDIA_FIELDS} }} }} }}
}}"""
POST = f"query ($id: ID!) {{ post(id: $id) {{ id {MEDIA_FIELDS} }} }}"


async def create_upload(
    client: httpx.AsyncClient,
    token: str,
    content_type: str,
    byte_size: int,
    sha256: str | None = None,
) -> Result:
    variables = {"contentType": content_type, "byteSize": byte_size, "sha256": sha256}
    return await gql(client, "", variables, token=token, query=CREATE_UPLOAD)


async def put(
    client: httpx.AsyncClient, upload: dict[str, Any], data: bytes, **headers: str
) -> httpx.Response:
    """PUT `data` to the upload's URL with the headers it gave (some replaced by `headers`)."""
    sent = {h["name"]: h["value"] for h in upload["headers"]} | headers
    return await client.put(upload["url"], content=data, headers=sent)


async def upload(
    client: httpx.AsyncClient,
    token: str,
    data: bytes,
    content_type: str = "image/png",
    with_sha256: bool = False,
) -> str:
    """An upload with `data` PUT to it; its id."""
    sha = hashlib.sha256(data).hexdigest() if with_sha256 else None
    made = (await create_upload(client, token, content_type, len(data), sha)).ok()["createUpload"]
    response = await put(client, made, data)
    assert response.status_code == 200, response.text
    return str(made["id"])


async def create_post(
    client: httpx.AsyncClient,
    token: str,
    media: list[dict[str, Any]],
    body: str = "",
    visibility: str = "PUBLIC",
) -> Result:
    variables = {"body": body, "visibility": visibility, "media": media}
    return await gql(client, "", variables, token=token, query=CREATE_POST)


async def image_post(
    client: httpx.AsyncClient,
    token: str,
    data: bytes,
    content_type: str = "image/png",
    visibility: str = "PUBLIC",
    alt: str | None = "a red square",
) -> int:
    upload_id = await upload(client, token, data, content_type)
    made = await create_post(client, token, [{"uploadId": upload_id, "alt": alt}], "", visibility)
    return int(made.ok()["createPost"]["id"])


async def feed_media(client: httpx.AsyncClient, token: str) -> dict[int, list[dict[str, Any]]]:
    """Post id -> its media, for the viewer's first CHRONOLOGICAL page."""
    data = (await gql(client, "", {"first": 50}, token=token, query=FEED)).ok()
    return {int(e["node"]["id"]): e["node"]["media"] for e in data["feed"]["edges"]}


async def post_media(
    client: httpx.AsyncClient, token: str | None, post_id: int
) -> list[dict[str, Any]] | None:
    """The post's media by id for the viewer; None when the viewer cannot see the post."""
    found = await gql(client, "", {"id": str(post_id)}, token=token, query=POST)
    post = (found.data or {}).get("post")
    return None if post is None else list(post["media"])


def altered(url: str, **params: str) -> str:
    """`url` with some query parameters changed (a forgery)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | params
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


def max_age(response: httpx.Response) -> tuple[str, int]:
    scope, _, age = response.headers["cache-control"].partition(", max-age=")
    return scope, int(age)
