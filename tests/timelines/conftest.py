"""Shared by the timeline store's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from tests.conftest import TEST_REDIS_URL


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    """A client on this run's test Redis db."""
    client = Redis.from_url(TEST_REDIS_URL)
    try:
        yield client
    finally:
        await client.aclose()
