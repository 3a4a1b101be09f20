"""The probe's tests' fixtures: the write path's processes and the metrics folder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import PROJECT_ROOT
from tests.servers import stop_process


@pytest.fixture(scope="module")
def write_path(test_database: str) -> Iterator[None]:
    """The relay and the workers `make run` starts; the workers read injected faults."""
    env = {**os.environ, "JOB_FAULT_HOOK": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", *argv],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for argv in (
            ["jobs.relay"],
            ["arq", "jobs.worker.WorkerSettings"],
            ["arq", "jobs.worker.BigLaneWorkerSettings"],
        )
    ]
    yield
    for proc in procs:
        stop_process(proc)


@pytest.fixture
def metrics_dir(tmp_path: Path) -> Path:
    """Where the API and the probe keep their metrics (PROMETHEUS_MULTIPROC_DIR)."""
    path = tmp_path / "prometheus"
    path.mkdir()
    return path
