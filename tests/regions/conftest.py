"""Two regions on loopback (tests/regions/topology.py), started once for tests/regions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.regions.topology import Region, start_regions


@pytest.fixture(scope="package")
async def regions(test_database: str) -> AsyncIterator[tuple[Region, Region]]:
    """Stopped after the last test of tests/regions. Tests use handles of their own and never
    truncate: a TRUNCATE is not replicated, and the regions' rows must stay alike."""
    async with start_regions() as pair:
        yield pair


@pytest.fixture(autouse=True)
async def clean() -> None:
    """Replaces the session's `clean` (tests/conftest.py): the regions have servers of their
    own, which the tests share (unique handles), and nothing here touches the session's."""
