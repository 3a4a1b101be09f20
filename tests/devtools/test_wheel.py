"""The service installed from its wheel serves what a checkout serves.

A checkout reads graphql/operations/ and frontend-demo/ in place; the wheel carries them under
app/_shipped/ (pyproject.toml's force-include, app.operation_documents.shipped_dir). Without
them the registered documents, and with them the compiled path and the trusted documents,
came out empty with no error (issue 34). Here the wheel is built, installed into a scratch
venv (its dependencies from .venv, on the path but not the checkout) and started as
`uvicorn app.web:app` from outside the source tree against the test database and Redis.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from app.config import PROJECT_ROOT
from app.operation_documents import document_id, operations
from tests.helpers import PASSWORD, eventually, metric_value
from tests.servers import START_SECONDS, free_port, stop_process


def run(argv: list[str], cwd: Path) -> str:
    """A command's output; its output in the failure when it fails."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{argv}:\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The python of a scratch venv holding the wheel (built offline with .venv's hatchling)."""
    root = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    run([*build, "-w", str(root / "dist"), str(PROJECT_ROOT)], root)
    (wheel,) = (root / "dist").glob("hybridfeed-*.whl")
    run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], root)
    python = root / "venv" / "bin" / "python"
    purelib = run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root
    )
    # The dependencies: .venv's site-packages appended to sys.path by a plain path line, so its
    # own .pth files (the checkout's editable install among them) are not processed.
    (Path(purelib.strip()) / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    run([*pip, str(wheel)], root)
    yield python


@pytest.fixture(scope="module")
async def server(installed: Path, test_database: str) -> AsyncIterator[str]:
    """`uvicorn app.web:app` of the installed package, started outside the checkout."""
    cwd = installed.parent.parent.parent  # the scratch folder, not the checkout
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TRUSTED_DOCUMENTS_ONLY"] = "1"
    port = free_port()
    argv = [str(installed), "-m", "uvicorn", "app.web:app", "--host", "127.0.0.1",
            "--port", str(port), "--log-level", "warning"]  # fmt: skip
    log = cwd / "uvicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)  # noqa: ASYNC220
    url = f"http://127.0.0.1:{port}"

    async def healthy() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {proc.returncode}:\n{log.read_text()}")
        try:
            async with httpx.AsyncClient(base_url=url, timeout=1.0) as client:
                return (await client.get("/healthz")).status_code == 200
        except httpx.TransportError:
            return False

    try:
        await eventually(healthy, START_SECONDS, 0.05, "healthy")
        yield url
    finally:
        stop_process(proc)


def test_the_wheel_carries_the_app_and_its_files_not_the_checkout(installed: Path) -> None:
    probe = "import app, app.operation_documents as d; print(app.__file__); print(d.OPERATIONS_DIR)"
    where, operations_dir = run([str(installed), "-c", probe], installed.parent).split()
    assert not Path(where).is_relative_to(PROJECT_ROOT), where
    assert Path(operations_dir).is_relative_to(Path(where).parent / "_shipped"), operations_dir
    names = sorted(p.name for p in Path(operations_dir).glob("*.graphql"))
    assert names == sorted(p.name for p in (PROJECT_ROOT / "graphql/operations").glob("*.graphql"))


async def test_the_installed_service_serves_registered_documents_compiled(server: str) -> None:
    texts = operations()
    async with httpx.AsyncClient(base_url=server, timeout=10) as http:
        manifest = (await http.get("/graphql/documents.json")).json()
        assert manifest["Feed"] == document_id(texts["Feed"]), manifest
        variables = {"handle": "wheel_user", "password": PASSWORD}
        body = {"documentId": document_id(texts["SignUp"]), "variables": variables}
        signed = (await http.post("/graphql", json=body)).json()
        token = signed["data"]["signUp"]["token"]
        feed = await http.post(
            "/graphql",
            json={"documentId": document_id(texts["Feed"]), "variables": {"first": 5}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert feed.status_code == 200, feed.text
        assert feed.json()["data"]["feed"]["edges"] == [], feed.text
        compiled = metric_value(
            (await http.get("/metrics")).text,
            'graphql_compiled_total{operation="Feed"}',
            default=0.0,
        )
        assert compiled >= 1  # the compiled path, which needs the registered documents
        # The demo page (development profile) from the wheel's copy of frontend-demo/.
        page = await http.get("/")
        assert page.status_code == 200 and "<html" in page.text.lower(), page.text[:200]
