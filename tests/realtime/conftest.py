"""Uvicorn processes shared by the realtime tests (starting one costs ~1 s)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator

import pytest

from tests.conftest import TEST_DB
from tests.realtime.live import ApiServer

# Pub/sub channels ignore Redis databases: another test run on the same server must not
# reach our sockets. Set before any settings object is built (the servers inherit it).
os.environ["REALTIME_NAMESPACE"] = TEST_DB


@pytest.fixture(scope="session")
async def server(test_database: str) -> AsyncIterator[ApiServer]:
    api = await ApiServer().ready()
    yield api
    api.stop()


@pytest.fixture(scope="session")
async def server2(test_database: str) -> AsyncIterator[ApiServer]:
    api = await ApiServer().ready()
    yield api
    api.stop()
