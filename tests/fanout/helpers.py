"""Shared steps for write-path tests: users, follows and posts made through GraphQL."""

from __future__ import annotations

import asyncpg

from tests.conftest import TEST_DATABASE_URL
from tests.graphql_client import gql


async def make_user(client, handle: str) -> tuple[str, int]:
    data = (await gql(client, "SignUp", {"handle": handle, "password": "password123"})).ok()
    return data["signUp"]["token"], int(data["signUp"]["user"]["id"])


async def follow(client, token: str, handle: str) -> None:
    (await gql(client, "Follow", {"handle": handle}, token=token)).ok()


async def unfollow(client, token: str, handle: str) -> None:
    (await gql(client, "Unfollow", {"handle": handle}, token=token)).ok()


async def post(client, token: str, body: str, visibility: str = "PUBLIC") -> int:
    data = (
        await gql(client, "CreatePost", {"body": body, "visibility": visibility}, token=token)
    ).ok()
    return int(data["createPost"]["id"])


async def sql(query: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


async def timeline_ids(state, user_id: int) -> list[int]:
    return [pid for pid, _ in await state.timelines.latest(user_id, 1000)]


async def fanout_mode(client, handle: str) -> str:
    data = (await gql(client, "UserProfile", {"handle": handle})).ok()
    return str(data["user"]["fanoutMode"])
