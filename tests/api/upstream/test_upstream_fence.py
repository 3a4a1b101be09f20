"""The fence around upstream internals (docs/decisions/0071) holds, and fails when crossed.

- the `upstream-internals` import contract (.importlinter, devtools/upstream_contract.py)
  is kept by the service and broken by a planted private import, and ruff's SLF001 flags a
  planted private attribute read outside the adapters and not inside one;
- the listed exceptions still meet their upstream: every Strawberry method the view and the
  websocket handler override is still defined by the base class, with the parameters the
  override takes; asyncio's waiter deques and Starlette's server callables are still where
  the adapters read them. `make canary` runs this file against the newest releases.
"""

from __future__ import annotations

import asyncio
import configparser
import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from starlette.websockets import WebSocket
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL

from app.api.endpoint.view import FeedGraphQL
from app.api.endpoint.websocket import FeedTransportWSHandler, TextFrameAdapter
from app.api.upstream import asyncio as asyncio_internals
from app.api.upstream import starlette as starlette_internals
from app.api.upstream import strawberry as strawberry_internals
from app.config import PROJECT_ROOT

BIN = Path(sys.executable).parent
CONTRACT = "importlinter:contract:upstream-internals"


def _contract_option(name: str) -> str:
    """One list option of the service's contract, as an indented ini value."""
    config = configparser.ConfigParser()
    config.read(PROJECT_ROOT / ".importlinter")
    return "".join(f"\n    {item}" for item in config[CONTRACT][name].split())


def _lint_imports(cwd: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(PROJECT_ROOT)])}
    return subprocess.run(
        [str(BIN / "lint-imports"), str(config), "--no-cache"],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )


def test_the_contract_fails_on_a_planted_internal_import(tmp_path: Path) -> None:
    """A package with an adapter and a module beside it: the same imports pass in the
    adapter and break the contract outside it, public ones pass anywhere."""
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    internal = textwrap.dedent(
        """\
        from strawberry.schema.schema import validate_document
        from uvicorn.middleware.proxy_headers import (
            _TrustedHosts,
        )
        from strawberry.types import Info
        """
    )
    (package / "adapter.py").write_text(internal)
    (package / "user.py").write_text(internal)
    public = "import strawberry\nfrom starlette.requests import Request\n"
    (package / "public.py").write_text(public)
    config = tmp_path / "contracts.ini"
    config.write_text(
        "[importlinter]\nroot_packages =\n    planted\ninclude_external_packages = True\n"
        "contract_types =\n"
        "    upstream_internals: devtools.upstream_contract.UpstreamInternalsContract\n\n"
        f"[{CONTRACT}]\nname = planted\ntype = upstream_internals\n"
        f"upstreams ={_contract_option('upstreams')}\n"
        f"public_modules ={_contract_option('public_modules')}\n"
        "adapters =\n    planted.adapter\n"
    )
    run = _lint_imports(tmp_path, config)
    out = " ".join(run.stdout.split())  # the report wraps its lines
    assert run.returncode == 1, run.stdout + run.stderr
    assert "planted.user:1 imports module strawberry.schema.schema" in out
    assert "planted.user:2 imports module uvicorn.middleware.proxy_headers" in out
    assert "planted.adapter" not in out and "planted.public" not in out
    assert "Info" not in out  # strawberry.types is public


def test_the_service_keeps_the_contract() -> None:
    run = _lint_imports(PROJECT_ROOT, PROJECT_ROOT / ".importlinter")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Upstream internals are imported by their adapters only" in run.stdout


@pytest.mark.parametrize(
    ("path", "flagged"),
    [("app/api/planted.py", True), ("app/api/upstream/planted.py", False)],
)
def test_ruff_flags_a_private_attribute_outside_the_adapters(path: str, flagged: bool) -> None:
    source = "def server_receive(websocket: object) -> object:\n    return websocket._receive\n"
    run = subprocess.run(
        [str(BIN / "ruff"), "check", "--stdin-filename", path, "--select", "SLF001", "-"],
        cwd=PROJECT_ROOT,
        input=source,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert (run.returncode != 0) is flagged, run.stdout + run.stderr
    assert ("SLF001" in run.stdout) is flagged


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


@pytest.mark.parametrize(
    ("base", "ours", "names"),
    [
        (GraphQL, FeedGraphQL, strawberry_internals.VIEW_OVERRIDES),
        (ASGIWebSocketAdapter, TextFrameAdapter, strawberry_internals.WEBSOCKET_ADAPTER_OVERRIDES),
        (
            strawberry_internals.BaseGraphQLTransportWSHandler,
            FeedTransportWSHandler,
            strawberry_internals.TRANSPORT_WS_HANDLER_OVERRIDES,
        ),
    ],
)
def test_strawberry_still_defines_each_overridden_method(
    base: type, ours: type, names: tuple[str, ...]
) -> None:
    """An override of a method Strawberry renamed or re-shaped would silently stop running."""
    for name in names:
        assert name in vars(ours), f"{ours.__name__} no longer overrides {name}: unlist it"
        inherited = getattr(base, name, None)
        assert inherited is not None, f"{base.__name__}.{name} is gone"
        ours_params = _parameters(vars(ours)[name])
        assert ours_params == _parameters(inherited) or "kwargs" in ours_params, name


def test_strawberry_still_has_what_the_view_calls() -> None:
    view = FeedGraphQL.__mro__[1]
    assert view is GraphQL
    for name in strawberry_internals.VIEW_CALLS:
        assert hasattr(GraphQL, name) or name in inspect.signature(GraphQL.__init__).parameters


async def test_asyncio_waiters_are_where_the_adapter_reads_them() -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    event = asyncio.Event()
    assert hasattr(queue, asyncio_internals.QUEUE_GETTERS)
    assert hasattr(event, asyncio_internals.EVENT_WAITERS)
    assert not asyncio_internals.has_waiters(queue) and not asyncio_internals.has_waiters(event)
    getter, waiter = asyncio.ensure_future(queue.get()), asyncio.ensure_future(event.wait())
    await asyncio.sleep(0)
    assert asyncio_internals.has_waiters(queue) and asyncio_internals.has_waiters(event)
    queue.put_nowait(1)
    event.set()
    assert await getter == 1 and await waiter


async def test_starlette_keeps_the_server_callables() -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: Any) -> None:
        return None

    websocket = WebSocket({"type": "websocket", "path": "/", "headers": []}, receive, send)
    assert starlette_internals.server_receive(websocket) is receive
    assert starlette_internals.server_send(websocket) is send
