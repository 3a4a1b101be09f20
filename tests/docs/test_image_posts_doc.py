"""docs/API.md's "Image posts with curl" block is a script a reader pastes into a shell: run
as it is (bash, curl, jq) against a running server, it logs in, uploads a real PNG, posts it
and reads it back in the feed, and the image it names is served."""

from __future__ import annotations

import asyncio
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from app.config import PROJECT_ROOT
from tests.helpers import sign_up
from tests.servers import ApiServer

API_DOC = PROJECT_ROOT / "docs" / "API.md"
DEMO_PASSWORD = "demo-password"  # make run's demo users' password, which the block logs in with


def curl_block() -> str:
    text = API_DOC.read_text()
    section = re.search(r"^### Image posts with curl\n(.*?)(?=^## |^### )", text, re.M | re.S)
    assert section, "docs/API.md has no '### Image posts with curl'"
    block = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    assert block, "no ```sh block under 'Image posts with curl'"
    return block.group(1)


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (30, 64, 175)).save(out, format="PNG")
    return out.getvalue()


def json_lines(output: str) -> list[Any]:
    """What the script printed: one JSON answer per request (jq and curl print no more)."""
    decoder = json.JSONDecoder()
    found: list[Any] = []
    at = 0
    while at < len(output):
        if output[at].isspace():
            at += 1
            continue
        value, at = decoder.raw_decode(output, at)
        found.append(value)
    return found


@pytest.mark.skipif(not (shutil.which("jq") and shutil.which("curl")), reason="needs jq and curl")
async def test_the_curl_walkthrough_posts_an_image_and_reads_it_back(
    tmp_path: Path, test_database: str
) -> None:
    (tmp_path / "photo.png").write_bytes(png(40, 30))
    async with (
        ApiServer() as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        await sign_up(http, "alice", password=DEMO_PASSWORD)
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-euo",
            "pipefail",
            "-c",
            curl_block(),
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "API": server.url},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        created, feed = json_lines(out.decode())
        assert "errors" not in created and "errors" not in feed, (created, feed)
        post = created["data"]["createPost"]
        assert post["media"][0]["alt"] == "Boats moored at dusk"
        node = feed["data"]["feed"]["edges"][0]["node"]
        assert node["id"] == post["id"] and node["body"] == "At the harbour"
        [image] = node["media"]
        assert (image["width"], image["height"], image["contentType"]) == (40, 30, "image/png")
        served = await http.get(image["url"])
        assert served.status_code == 200 and served.content == png(40, 30)
