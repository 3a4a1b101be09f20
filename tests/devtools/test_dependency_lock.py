"""requirements.lock is what `make run`/`make test` install (pip --require-hashes): every
package pinned with its hashes, in step with pyproject.toml, and above the dependency floors
that keep releases with published advisories out. A failure here means: run `make lock`."""

from __future__ import annotations

import re
import tomllib

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from app.config import PROJECT_ROOT

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")

# The newest release with a published advisory that the floor in pyproject.toml must exclude.
VULNERABLE = {
    "starlette": "0.49.0",  # CVE-2025-62727: Range-header DoS in FileResponse
    "pyjwt": "2.11.0",  # CVE-2026-32597 (crit header), CVE-2024-53861 in 2.10.0
    "h11": "0.15.0",  # CVE-2025-43859: chunked-trailer request smuggling
    "tqdm": "4.66.2",  # CVE-2024-34062
    "pytest": "9.0.2",  # CVE-2025-71176: predictable tmpdir
}


def pins(name: str) -> dict[str, tuple[Version, int]]:
    """package -> (pinned version, number of hashes) of a lock file."""
    out: dict[str, tuple[Version, int]] = {}
    current = None
    for line in (PROJECT_ROOT / name).read_text().splitlines():
        if match := PIN.match(line):
            current = canonicalize_name(match.group(1))
            out[current] = (Version(match.group(2)), 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, hashes = out[current]
            out[current] = (version, hashes + 1)
    return out


def requirements(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    raw = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    env = {**default_environment(), "extra": extra or ""}
    reqs = [Requirement(r) for r in raw]
    return [r for r in reqs if r.marker is None or r.marker.evaluate(env)]


def test_every_pin_has_hashes() -> None:
    for lock in ("requirements.lock", "requirements-app.lock"):
        locked = pins(lock)
        assert len(locked) > 20, lock
        unhashed = [name for name, (_, hashes) in locked.items() if hashes == 0]
        assert not unhashed, f"{lock}: pins without --hash: {unhashed}"


def test_the_lock_satisfies_pyproject() -> None:
    """A dependency added or tightened in pyproject.toml without `make lock` fails here."""
    locked = pins("requirements.lock")
    app_locked = pins("requirements-app.lock")
    # The embedded servers (an extra: only devtools use them) are in requirements.lock, what
    # `make run`/`make test` install, and not in the deployments' requirements-app.lock.
    extras = ((None, app_locked), (None, locked), ("dev", locked), ("embedded", locked))
    for extra, lock in extras:
        for req in requirements(extra):
            name = canonicalize_name(req.name)
            assert name in lock, f"{req} is not in the lock file: run `make lock`"
            version = lock[name][0]
            assert req.specifier.contains(version, prereleases=True), (
                f"{name}=={version} does not satisfy {req}: run `make lock`"
            )
    # The app's own lock is the same resolution, without the dev tools.
    for name, (version, _) in app_locked.items():
        assert locked[name][0] == version, name
    shipped_for_devtools = [r.name for r in requirements("embedded") if r.name in app_locked]
    assert not shipped_for_devtools, f"{shipped_for_devtools} in requirements-app.lock: make lock"


def test_floors_exclude_releases_with_advisories() -> None:
    extras = (None, "dev", "embedded")
    declared = {canonicalize_name(r.name): r for x in extras for r in requirements(x)}
    locked = pins("requirements.lock")
    for name, vulnerable in VULNERABLE.items():
        req = declared[canonicalize_name(name)]
        assert not req.specifier.contains(vulnerable), f"{req} admits {name} {vulnerable}"
        assert locked[canonicalize_name(name)][0] > Version(vulnerable)
