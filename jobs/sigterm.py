"""A worker sent SIGTERM or SIGINT stops, on Python 3.11 too (decision 0093).

ARQ stops a worker by cancelling its main task once. Python 3.11's `asyncio.wait_for` drops a
cancellation that lands in the loop turn between the awaited work finishing and the caller
waking (CPython gh-86296, fixed in 3.12), and redis-py 8 sends every command inside
`wait_for(..., socket_timeout)`: the worker's poll loop, a command every few ms, sometimes
lost the cancel and polled on for ever (a worker outlived 3 of 11 killed launchers). So
after ARQ's own handler the cancel is repeated, at each of the next RECANCEL_TURNS loop
turns and then every RECANCEL_SECONDS, until the main task has ended; one that lands
elsewhere ends it at once.
"""

from __future__ import annotations

import signal
import sys

from arq.worker import Worker

from jobs.constants import RECANCEL_SECONDS, RECANCEL_TURNS

_arq_handle_sig = Worker.handle_sig


def _handle_sig(self: Worker, signum: signal.Signals) -> None:
    _arq_handle_sig(self, signum)
    main = self.main_task
    if main is None:
        return

    def again(turns: int) -> None:
        if main.done():
            return
        main.cancel()
        if turns:
            self.loop.call_soon(again, turns - 1)
        else:
            self.loop.call_later(RECANCEL_SECONDS, again, 0)

    # At every loop turn first: ARQ's `close` (tests, `handle_signals=False`) closes the pool
    # a few awaits later, and a main loop that lost the cancel would poll on into it.
    self.loop.call_soon(again, RECANCEL_TURNS)


def install() -> None:
    """ARQ's `Worker.handle_sig` followed by the repeats, below Python 3.12 (idempotent)."""
    if sys.version_info >= (3, 12):
        return
    setattr(Worker, "handle_sig", _handle_sig)  # noqa: B010 - a method replaced on purpose
