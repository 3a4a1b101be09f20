"""Two regions on loopback (tests/regions/topology.py), started once for tests/regions."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.helpers import eventually, make_user, post
from tests.regions.topology import WAIT, Region, start_regions


async def warm_up(a: Region, b: Region) -> None:
    """A post each way, waited for until the other region's relay published its event: the
    first test's figures are not the processes' first requests and connections."""
    for here, there in ((a, b), (b, a)):
        async with here.http() as http:
            token, _ = await make_user(http, f"warm{here.name}")
            post_id = await post(http, token, "warming up")

        async def relayed(region: Region = there, post_id: int = post_id) -> bool:
            query = (
                "SELECT 1 FROM outbox WHERE payload->>'post_id' = $1 AND published_at IS NOT NULL"
            )
            return bool(await region.sql(query, str(post_id)))

        await eventually(relayed, WAIT, 0.05, f"warm-up post relayed in {there.name}")


@pytest.fixture(scope="package")
async def regions(test_database: str) -> AsyncIterator[tuple[Region, Region]]:
    """Stopped after the last test of tests/regions. Tests use handles of their own and never
    truncate: a TRUNCATE is not replicated, and the regions' rows must stay alike."""
    async with start_regions() as pair:
        await warm_up(*pair)
        yield pair


@pytest.fixture(autouse=True)
async def clean() -> None:
    """Replaces the session's `clean` (tests/conftest.py): the regions have servers of their
    own, which the tests share (unique handles), and nothing here touches the session's."""
