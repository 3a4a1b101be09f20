"""The log starts empty in every test here: a timed flush of the previous test's rows that
was already under way when the tables were truncated lands before this one starts, and is
truncated again."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import sql


@pytest.fixture(autouse=True)
async def empty_log(clean: None, state: Any) -> None:
    await state.engagement.close()  # waits for flushes in flight, writes what is buffered
    await sql("TRUNCATE engagement_events, author_quality")
