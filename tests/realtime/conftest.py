"""Uvicorn processes shared by the realtime tests (starting one costs ~1 s)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.servers import ApiServer


@pytest.fixture(scope="session")
async def server(test_database: str) -> AsyncIterator[ApiServer]:
    async with ApiServer() as api:
        yield api


@pytest.fixture(scope="session")
async def server2(test_database: str) -> AsyncIterator[ApiServer]:
    """A second API process: sockets on two processes, one Redis."""
    async with ApiServer() as api:
        yield api
