"""Hybrid fan-out home feed service."""

from app import asyncio_compat

# Every process (API, workers, relay, tools, tests) imports `app` first: a cancellation must
# not be lost in Python 3.11's asyncio.wait_for anywhere (decision 0093).
asyncio_compat.install()
