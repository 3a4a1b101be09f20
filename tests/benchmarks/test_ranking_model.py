"""benchmarks/ranking_model.py runs (one call per figure): every figure present and the model
used, not a fallback (a stage 2 that failed would cost nothing and look cheap)."""

from __future__ import annotations

import logging

import pytest

from benchmarks.ranking_model import KS, synthetic


def test_the_micro_benchmark_measures_both_stages(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="app.ranking.stages"):
        figures = synthetic(repeat=1)
    assert not caplog.records, "stage 2 fell back during the benchmark"
    for k in KS:
        assert figures[f"two-stage K={k}"] > 0 and figures[f"inference {k}"] > 0
    assert figures["formula"] > 0 and figures["trees"] == 30
