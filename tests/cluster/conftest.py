"""The scale-out topology (tests/cluster/scaled.py), started once for tests/cluster.

The failover tests (test_failover.py, collected after test_e2e.py) kill a master: they leave
the cluster with a promoted replica, which the tests after them accept.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.cluster.scaled import Scaled, start_scaled


@pytest.fixture(scope="package")
async def scaled(test_database: str) -> AsyncIterator[Scaled]:
    """Stopped after the last test of tests/cluster: its processes take no part in others."""
    async with start_scaled() as topology:
        yield topology


@pytest.fixture(autouse=True)
async def clean(scaled: Scaled) -> None:
    """Every test starts from an empty cluster, queue and database. This replaces the
    session's `clean` (tests/conftest.py): the topology's processes use a database of their
    own, on the replicated primary, not the session's."""
    await scaled.cluster.flush()
    await scaled.queue.flushdb()
    await scaled.truncate()
    await scaled.trust_marks()
