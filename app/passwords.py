"""Password hashing with Argon2id (argon2-cffi defaults, RFC 9106 low-memory profile).

One module so auth and the seeder agree on the hash format, and so callers never have to know
which exceptions argon2 raises: verification is a yes/no question.

Each hash takes ~64 MiB and a core for tens of milliseconds, so a process runs at most
PASSWORD_HASH_CONCURRENCY of them at once (`PasswordGate`, off the event loop). One more
waits up to PASSWORD_HASH_WAIT_MS for a slot, then answers OVERLOADED (the server's state,
not the caller's fault: RATE_LIMITED stays per client) with a retry hint: a burst of log-ins
cannot take the process's memory or every core.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from app.errors import Overloaded
from app.observability.metrics import PASSWORD_HASH_OVERLOADED

_hasher = PasswordHasher()
# The test suite's hasher (FaultSwitches.password_hash_cheap, never in production): the same
# Argon2id with the least work: a hash at the real parameters took ~0.19 s of CPU on the test
# machine, over thousands of sign-ups (decision 0074). Its hashes carry their parameters, so
# any hasher verifies them.
CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
T = TypeVar("T")

__all__ = ["PasswordGate", "hash_password", "needs_rehash", "verify_password"]


class PasswordGate:
    """At most `concurrency` hashes at once (PASSWORD_HASH_CONCURRENCY), off the event loop;
    one more waits up to `wait_ms` (PASSWORD_HASH_WAIT_MS) for a slot, then OVERLOADED. One
    per process, built by the composition root (`AppState.passwords`)."""

    def __init__(
        self, concurrency: int, wait_ms: int, hasher: PasswordHasher | None = None
    ) -> None:
        self.concurrency = concurrency
        self.hasher = hasher
        self.wait_seconds = wait_ms / 1000
        # One semaphore per event loop (a semaphore binds to the loop it first waits on).
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        gate = self._gates.get(loop)
        if gate is None:
            gate = self._gates[loop] = asyncio.Semaphore(self.concurrency)
        return gate

    async def _bounded(self, work: Callable[[], T]) -> T:
        gate = self._gate()
        try:
            if gate.locked():  # (wait_for with a zero timeout would refuse even a free slot)
                await asyncio.wait_for(gate.acquire(), timeout=self.wait_seconds)
            else:
                await gate.acquire()
        except TimeoutError:
            PASSWORD_HASH_OVERLOADED.inc()
            raise Overloaded(
                "Too many sign-ups and log-ins at once; retry in a second.", retry_after=1
            ) from None
        try:
            return await asyncio.to_thread(work)
        finally:
            gate.release()

    async def hash(self, password: str) -> str:
        """`hash_password` in a thread, at most `concurrency` at once."""
        return await self._bounded(lambda: hash_password(password, self.hasher))

    async def verify(self, password_hash: str, password: str) -> bool:
        """`verify_password` in a thread, at most `concurrency` at once."""
        return await self._bounded(lambda: verify_password(password_hash, password))


def hash_password(password: str, hasher: PasswordHasher | None = None) -> str:
    """Salted Argon2id hash in PHC string form (parameters travel with the hash)."""
    return (hasher or _hasher).hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    """True only on a match; a wrong password or a malformed/foreign hash is simply False."""
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False
    except (ValueError, TypeError):
        # Defensive: garbage input (e.g. a non-str hash from a bad row) must not 500 a login.
        return False


def needs_rehash(password_hash: str) -> bool:
    """True when the hash was made with older parameters; rehash after a successful login."""
    try:
        return _hasher.check_needs_rehash(password_hash)
    except (InvalidHashError, ValueError, TypeError):
        return True
