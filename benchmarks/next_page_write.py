"""A response written in one transport write against uvicorn's two (decision 0063), alone.

    python -m benchmarks.next_page_write [--bytes 9000] [--seconds 5] [--pairs 5]
        [--connections 50]

Two uvicorn processes (httptools + uvloop, one worker each, `--log-level warning` as
feed_wrk starts the API) serve the same ASGI app: a POST answered with a fixed JSON body of
--bytes (a 20-post feed page is ~9 KB) and the compiled path's two headers. One answers it
with two sends (`http.response.start`, then `http.response.body`: how uvicorn writes any
ASGI response, head and body each a send(2)), the other with app.api.upstream.uvicorn's
`write_response` (both in one). wrk drives each in turn, --pairs times, alternating which
goes first; the figure is each server's CPU (utime + stime) per response over its runs, and
the median of the pairs' ratios. Nothing else runs in those processes: no database, no
Redis, so the difference is the write alone.

Needs `wrk`. Run on an otherwise idle machine where possible; the load average is printed
with each pair.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from typing import Any

import orjson

from benchmarks.common import cpu_seconds

MODE = os.environ.get("NEXT_PAGE_WRITE_MODE", "two")
SIZE = int(os.environ.get("NEXT_PAGE_WRITE_BYTES", "9000"))
_BODY = orjson.dumps({"data": {"feed": {"body": "x" * max(0, SIZE - 30)}}})
_HEADERS = [(b"content-length", b"%d" % len(_BODY)), (b"content-type", b"application/json")]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The server side: read the body, answer in MODE ("one" or "two" writes)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    if MODE == "one":
        from app.api.upstream.uvicorn import uvicorn_http_cycle, write_response

        cycle = uvicorn_http_cycle(send)
        if cycle is not None and write_response(cycle, 200, _HEADERS, _BODY):
            return
    await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
    await send({"type": "http.response.body", "body": _BODY})


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(mode: str, size: int) -> tuple[subprocess.Popen[bytes], int]:
    port = _port()
    env = {**os.environ, "NEXT_PAGE_WRITE_MODE": mode, "NEXT_PAGE_WRITE_BYTES": str(size)}
    command = [sys.executable, "-m", "uvicorn", "benchmarks.next_page_write:app"]
    command += ["--port", str(port), "--http", "httptools", "--loop", "uvloop"]
    command += ["--log-level", "warning", "--lifespan", "off"]
    proc = subprocess.Popen(command, env=env)
    for _ in range(200):
        try:
            request = urllib.request.Request(f"http://127.0.0.1:{port}/", data=b"{}")
            with urllib.request.urlopen(request, timeout=1) as answer:
                if answer.read() == _body(size):
                    return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the {mode}-write server did not answer")


def _body(size: int) -> bytes:
    return orjson.dumps({"data": {"feed": {"body": "x" * max(0, size - 30)}}})


def _run(proc: subprocess.Popen[bytes], port: int, seconds: int, connections: int) -> float:
    """µs of the server's CPU per response over one wrk run."""
    script = "wrk.method = 'POST'\nwrk.body = '{}'\n"
    path = f"/tmp/next_page_write_{os.getpid()}.lua"
    with open(path, "w") as f:
        f.write(script)
    before = cpu_seconds([proc.pid])
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{seconds}s",
            "-s",
            path,
            f"http://127.0.0.1:{port}/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    used = cpu_seconds([proc.pid]) - before
    found = re.search(r"(\d+) requests in", out)
    if found is None:
        raise SystemExit(f"wrk said: {out}")
    return used / int(found.group(1)) * 1e6


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=9000)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--connections", type=int, default=50)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk (apt-get install -y wrk)")
    servers = {mode: _start(mode, args.bytes) for mode in ("two", "one")}
    ratios = []
    try:
        for pair in range(args.pairs):
            order = ("two", "one") if pair % 2 == 0 else ("one", "two")
            cost = {mode: _run(*servers[mode], args.seconds, args.connections) for mode in order}
            ratios.append(cost["one"] / cost["two"])
            load = os.getloadavg()[0]
            print(
                f"pair {pair + 1}: two writes {cost['two']:.1f} µs/response, one write "
                f"{cost['one']:.1f} µs, one/two {ratios[-1]:.3f}, load {load:.1f}",
                flush=True,
            )
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()
    print(f"median one/two: {statistics.median(ratios):.3f} over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
