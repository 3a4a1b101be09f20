"""Every numeric setting is bounded, and a value outside its bounds stops the start-up with
the variable's name (decision 0073): 0 or a negative number where neither means anything
(a timeout, a budget, a size) used to start a service that then misbehaved.

Also the rest of the settings' layout that decision keeps: old names still read, retired
ones refused, the launcher's and the test-only fault switches apart from `Settings`, and one
block per concern (a field family is not split across the class)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator

import annotated_types
import pytest
from pydantic.fields import FieldInfo

from app.config import (
    LAUNCHER_VARIABLES,
    PROJECT_ROOT,
    FaultSwitches,
    Settings,
    SettingsError,
    read_settings,
)
from devtools.launcher import LauncherSettings


def _numeric(cls: type[Settings] | type[LauncherSettings]) -> Iterator[tuple[str, FieldInfo]]:
    for name, info in cls.model_fields.items():
        if info.annotation in (int, float):
            yield name, info


def _bounds(info: FieldInfo) -> tuple[float | None, bool, float | None, bool]:
    """(lower bound, whether it is allowed, upper bound, whether it is allowed)."""
    low: float | None = None
    high: float | None = None
    low_in = high_in = True
    for meta in info.metadata:
        if isinstance(meta, annotated_types.Ge):
            low = float(meta.ge)  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Gt):
            low, low_in = float(meta.gt), False  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Le):
            high = float(meta.le)  # type: ignore[arg-type]
        elif isinstance(meta, annotated_types.Lt):
            high, high_in = float(meta.lt), False  # type: ignore[arg-type]
    return low, low_in, high, high_in


def documented_range(info: FieldInfo) -> str:
    """How docs/API.md writes a setting's range: `[1, 100000]`, `(0, 300]`, `[0, 1)`; empty
    for a setting that is not a number."""
    if info.annotation not in (int, float):
        return ""
    low, low_in, high, high_in = _bounds(info)
    if low is None or high is None:
        return "unbounded"

    def number(x: float) -> str:
        return str(int(x)) if x == int(x) else str(x)

    return f"{'[' if low_in else '('}{number(low)}, {number(high)}{']' if high_in else ')'}"


NUMERIC = sorted(_numeric(Settings))


@pytest.mark.parametrize("cls", [Settings, LauncherSettings])
def test_every_numeric_setting_has_both_bounds_around_its_default(
    cls: type[Settings] | type[LauncherSettings],
) -> None:
    problems = []
    for name, info in _numeric(cls):
        low, inclusive, high, _ = _bounds(info)
        if low is None or high is None:
            problems.append(f"{name.upper()}: no {'lower' if low is None else 'upper'} bound")
            continue
        default = info.get_default(call_default_factory=True)
        if not ((low <= default) if inclusive else (low < default)) or default > high:
            problems.append(f"{name.upper()}: default {default} outside [{low}, {high}]")
    assert not problems, problems
    assert cls is LauncherSettings or len(NUMERIC) > 80  # the check sees the fields


@pytest.mark.parametrize(("name", "info"), NUMERIC, ids=[n for n, _ in NUMERIC])
def test_out_of_bounds_values_stop_the_start_up_naming_the_variable(
    name: str, info: FieldInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    low, inclusive, high, _ = _bounds(info)
    assert low is not None and high is not None
    variable = name.upper()
    refused = ["-1", str(high * 10 + 1)]
    if low > 0 or not inclusive:
        refused.append("0")  # 0 means nothing here: a budget, a timeout, a size
    for value in refused:
        monkeypatch.setenv(variable, value)
        with pytest.raises(SettingsError, match=rf"\b{variable}="):
            read_settings()
    if low == 0 and inclusive:  # 0 means "off" / "none" here (docs/API.md says which)
        monkeypatch.setenv(variable, "0")
        try:
            read_settings()
        except SettingsError as exc:  # an invariant with another setting may still refuse it
            assert f"{variable}=" not in str(exc), exc


def test_a_bad_value_stops_a_root_with_the_name_in_its_error() -> None:
    """What an operator sees: the variable, the value and the bound, on stderr."""
    env = {"FEED_SOURCE_TIMEOUT_MS": "0", "PATH": "/usr/bin:/bin"}
    env["SECRET_KEY"] = "k" * 40
    run = subprocess.run(
        [sys.executable, "-c", "from app.config import get_settings; get_settings()"],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
    )
    assert run.returncode != 0
    assert "FEED_SOURCE_TIMEOUT_MS='0': Input should be greater than or equal to 1" in run.stderr


def test_the_old_millisecond_name_is_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_CHECK_CACHE_MS", "300")
    assert read_settings().token_check_cache_seconds == pytest.approx(0.3)
    monkeypatch.setenv("TOKEN_CHECK_CACHE_SECONDS", "2")  # the new name wins
    assert read_settings().token_check_cache_seconds == 2
    monkeypatch.delenv("TOKEN_CHECK_CACHE_SECONDS")
    monkeypatch.setenv("TOKEN_CHECK_CACHE_MS", "61000")  # over the bound in either unit
    with pytest.raises(SettingsError, match="TOKEN_CHECK_CACHE_SECONDS"):
        read_settings()


def test_the_retired_encoding_is_refused_from_the_environment_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIMELINE_ENCODING", "packed")
    read_settings()
    monkeypatch.setenv("TIMELINE_ENCODING", "zset")
    with pytest.raises(SettingsError, match=r"TIMELINE_ENCODING='zset' is no longer supported"):
        read_settings()


def test_launcher_and_fault_switches_live_apart_from_the_service_settings() -> None:
    service = {name.upper() for name in Settings.model_fields}
    launcher = {name.upper() for name in LauncherSettings.model_fields}
    faults = {name.upper() for name in FaultSwitches.model_fields}
    assert launcher == LAUNCHER_VARIABLES
    assert not service & (launcher | faults)
    assert {
        "JOB_FAULT_HOOK",
        "FEED_FAULT_SKIP_FILTER",
        "FEED_FAULT_REPEAT_POST",
        "PASSWORD_HASH_CHEAP",
    } == faults


def test_launcher_names_are_not_mistaken_for_misspelt_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("PORT", "API_WORKERS", "FANOUT_WORKERS", "JOB_FAULT_HOOK"):
        monkeypatch.setenv(name, "1")
    read_settings()


# A family of fields (one prefix) sits in one block of `Settings`, not in four places.
FAMILIES = (
    "database_", "redis_", "token_", "timeline_", "fanout_", "feed_", "impressions_",
    "rate_limit_", "password_hash_", "request_", "compiled_", "job_", "reconcile_",
    "canary_", "realtime_",
)  # fmt: skip


def test_each_family_of_settings_is_one_block() -> None:
    order = list(Settings.model_fields)
    split = []
    for family in FAMILIES:
        places = [i for i, name in enumerate(order) if name.startswith(family)]
        if places and places[-1] - places[0] + 1 != len(places):
            split.append(family)
    assert not split, f"declare these families together in app/config.py: {split}"


def test_every_block_has_a_heading() -> None:
    """Blocks are the `# ---- <concern>` headings of the class body; each holds fields."""
    source = (PROJECT_ROOT / "app" / "config.py").read_text()
    tree = ast.parse(source)
    settings = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    lines = source.splitlines()[settings.lineno - 1 : settings.end_lineno]
    headings = [line for line in lines if line.strip().startswith("# ---- ")]
    assert len(headings) >= 8


def test_every_range_is_documented() -> None:
    """docs/API.md's configuration tables give each number's range as the code bounds it."""
    section = (PROJECT_ROOT / "docs" / "API.md").read_text().split("## Configuration", 1)[1]
    documented = {}
    for line in section.split("\n## ", 1)[0].splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4:
            documented[cells[0].strip("`")] = cells[2]
    wrong = []
    for cls in (Settings, LauncherSettings):
        for name, info in _numeric(cls):
            if documented.get(name.upper()) != documented_range(info):
                wrong.append(f"{name.upper()}: {documented.get(name.upper())!r}")
    assert not wrong, f"docs/API.md '## Configuration', column 'range': {wrong}"


def test_constants_that_mirror_a_setting_default_equal_it() -> None:
    """A few constants stand for a setting's default where the setting is not at hand (a
    caller that does not pass it, the probe that reads no service settings)."""
    from app import constants
    from app.posts import constants as posts
    from app.probe import constants as probe

    defaults = {name: info.default for name, info in Settings.model_fields.items()}
    assert defaults["idempotency_key_ttl_seconds"] == posts.IDEMPOTENCY_KEY_TTL_SECONDS
    assert defaults["fanout_widenings_per_post_per_hour"] == posts.WIDENINGS_PER_POST_PER_HOUR
    assert defaults["client_ipv6_prefix"] == constants.DEFAULT_IPV6_PREFIX
    assert defaults["feed_authz_ttl_seconds"] == probe.DEGRADED_GRACE_SECONDS
