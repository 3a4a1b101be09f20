"""The fresh-machine path: provisioned Postgres and Redis answer, and scratch databases work.

Under `make test` the launcher has already exported DATABASE_URL/REDIS_URL (embedded servers on a
fresh machine), so these tests check exactly what the rest of the suite will use.
"""

from __future__ import annotations

import socket
import uuid

import asyncpg
import pytest
import redis.asyncio as aioredis

from app.config import asyncpg_url
from devtools import provision


async def test_services_answer() -> None:
    env = provision.ensure_services()
    conn = await asyncpg.connect(asyncpg_url(env["DATABASE_URL"]))
    try:
        assert await conn.fetchval("SELECT 1") == 1
    finally:
        await conn.close()
    client = aioredis.Redis.from_url(env["REDIS_URL"])
    try:
        assert await client.ping()
    finally:
        await client.aclose()


def test_ensure_services_is_idempotent() -> None:
    assert provision.ensure_services() == provision.ensure_services()


def test_urls_from_environment_are_used_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql+asyncpg://u:p@db.example:5432/x")
    monkeypatch.setenv("REDIS_URL", "redis://cache.example:6379/3")
    assert provision.ensure_services() == {
        "DATABASE_URL": "postgresql+asyncpg://u:p@db.example:5432/x",
        "REDIS_URL": "redis://cache.example:6379/3",
    }


async def test_create_migrate_clone_and_drop_database() -> None:
    server = provision.ensure_services()["DATABASE_URL"]
    name = f"t_provision_{uuid.uuid4().hex[:10]}"
    clone = name + "_clone"
    url = await provision.acreate_database(server, name)
    try:
        assert url.endswith("/" + name)
        provision.migrate(url)
        clone_url = await provision.acreate_database(server, clone, template=name)
        conn = await asyncpg.connect(asyncpg_url(clone_url))
        try:
            assert await conn.fetchval("SELECT current_database()") == clone
            assert await conn.fetchval("SELECT count(*) FROM users") == 0
        finally:
            await conn.close()
    finally:
        await provision.adrop_database(server, clone)
        await provision.adrop_database(server, name)
    conn = await asyncpg.connect(asyncpg_url(server))
    try:
        left = await conn.fetchval(
            "SELECT count(*) FROM pg_database WHERE datname = ANY($1::text[])", [name, clone]
        )
    finally:
        await conn.close()
    assert left == 0


def test_sync_helpers_and_name_check() -> None:
    server = provision.ensure_services()["DATABASE_URL"]
    name = f"t_provision_{uuid.uuid4().hex[:10]}"
    assert provision.create_database(server, name, replace=True).endswith("/" + name)
    provision.drop_database(server, name)
    provision.drop_database(server, name)  # absent: no error
    with pytest.raises(ValueError):
        provision.create_database(server, 'x"; DROP DATABASE postgres; --')


def test_a_busy_preferred_port_is_named_with_the_one_used(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The docs name the preferred ports; when one is taken the log says which one is used."""
    with socket.socket() as taken:
        taken.bind((provision.HOST, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        port = provision.free_port_from(busy, "API")
    assert port > busy
    assert f"port {busy} busy: API on {port}" in capsys.readouterr().err
