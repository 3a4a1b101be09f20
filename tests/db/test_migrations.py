"""Every schema change is an Alembic migration: the models match head, and head goes down
and up again cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from app.config import PROJECT_ROOT
from devtools.provision import create_database, drop_database
from tests.conftest import BASE_DATABASE_URL, TEST_DATABASE_URL


def _alembic(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
    )


def test_models_match_the_migrations() -> None:
    result = _alembic(TEST_DATABASE_URL, "check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_downgrade_to_base_and_back() -> None:
    name = f"migrate_{uuid.uuid4().hex[:8]}"
    url = create_database(BASE_DATABASE_URL, name)
    try:
        for step in (("upgrade", "head"), ("downgrade", "base"), ("upgrade", "head")):
            result = _alembic(url, *step)
            assert result.returncode == 0, (step, result.stderr)
    finally:
        drop_database(BASE_DATABASE_URL, name)
