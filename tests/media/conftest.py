"""moto's S3 server (a real S3 HTTP API) on a port of the test module's own, for the S3
store's tests: tests/media/test_s3_store.py and test_s3_flow.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto.server import ThreadedMotoServer

from tests.servers import free_port


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
