"""Account rules: handle format, password checks, activity tracking."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import User
from app.errors import BadInput, Conflict, NotFound, Unauthenticated
from app.passwords import PasswordGate, hash_password
from app.text_rules import Kind, clean
from app.users.constants import DISPLAY_NAME_MAX as DISPLAY_NAME_MAX
from app.users.constants import PASSWORD_MAX as PASSWORD_MAX
from app.users.constants import PASSWORD_MIN as PASSWORD_MIN

_DUMMY_HASH = hash_password("not-a-real-password")
HANDLE_RE = re.compile(r"^[a-z0-9_]{3,30}$")

Transaction = Callable[[], AbstractAsyncContextManager[AsyncSession]]
"""Opens one short transaction (the request context's `transaction`). The password flows
take two, one before and one after their Argon2 work: a hash never runs while a pooled
connection sits idle in a transaction or a row is locked (issue 33)."""


def normalize_handle(handle: str) -> str:
    """The stored form of a handle: NFC first (app.text_rules), so a character canonically
    equal to a letter (the Kelvin sign U+212A is K) is that letter; then only a-z 0-9 _."""
    handle = clean("handle", handle, Kind.NAME).strip().lstrip("@").lower()
    if not HANDLE_RE.match(handle):
        raise BadInput("A handle is 3-30 characters: lowercase letters, digits and underscores.")
    return handle


def clean_display_name(display_name: str) -> str:
    """NFC, no control, format or bidi characters (app.text_rules); length after that."""
    name = clean("display name", display_name, Kind.NAME).strip()
    if not 1 <= len(name) <= DISPLAY_NAME_MAX:
        raise BadInput(f"A display name is 1-{DISPLAY_NAME_MAX} characters long.")
    return name


async def sign_up(
    transaction: Transaction,
    handle: str,
    password: str,
    display_name: str | None,
    passwords: PasswordGate,
    canary_prefix: str = "",
) -> User:
    """A new account; a canary of the synthetic probe when its handle starts with
    `canary_prefix` (the deployment's secret prefix, app.config.canary_handle_prefix)."""
    handle = normalize_handle(handle)
    if not PASSWORD_MIN <= len(password) <= PASSWORD_MAX:
        raise BadInput(f"A password is {PASSWORD_MIN}-{PASSWORD_MAX} characters long.")
    name = clean_display_name(display_name or handle)
    # Argon2 is deliberately slow: off the event loop, a bounded number at once, and before
    # the transaction (no connection held meanwhile).
    password_hash = await passwords.hash(password)
    async with transaction() as session:
        user = User(
            handle=handle,
            password_hash=password_hash,
            display_name=name,
            last_active_at=datetime.now(UTC),
            canary=bool(canary_prefix) and handle.startswith(canary_prefix),
        )
        session.add(user)
        try:
            await session.flush()
        except IntegrityError as exc:
            raise Conflict(f"The handle @{handle} is taken; choose another.") from exc
        await session.refresh(user)
    return user


async def log_in(
    transaction: Transaction, handle: str, password: str, passwords: PasswordGate
) -> User:
    """The user whose password `password` is, read again after the check (outside any
    transaction): a password changed meanwhile fails it, and the token version is current."""
    failure = Unauthenticated("Wrong handle or password.")
    try:
        handle = normalize_handle(handle)
    except BadInput:
        raise failure from None
    async with transaction() as session:
        user = await session.scalar(select(User).where(User.handle == handle))
    # Verify against a dummy hash for unknown handles too: the answer takes as long.
    stored = user.password_hash if user is not None else _DUMMY_HASH
    if not await passwords.verify(stored, password) or user is None:
        raise failure
    async with transaction() as session:
        current = await session.scalar(select(User).where(User.id == user.id))
    if current is None or current.password_hash != stored:
        raise failure
    return current


async def by_handle(session: AsyncSession, handle: str) -> User | None:
    try:
        handle = normalize_handle(handle)
    except BadInput:
        return None
    return await session.scalar(select(User).where(User.handle == handle))


async def update_profile(session: AsyncSession, user_id: int, display_name: str) -> User:
    """Set the user's display name (same rule as at sign-up); the updated row."""
    name = clean_display_name(display_name)
    user: User | None = await session.scalar(
        update(User).where(User.id == user_id).values(display_name=name).returning(User)
    )
    if user is None:
        raise NotFound("Your account no longer exists.")
    return user


async def set_recommendations(session: AsyncSession, user_id: int, enabled: bool) -> User:
    """Turn the recommendations of the user's RANKED feed on or off; the updated row."""
    user: User | None = await session.scalar(
        update(User)
        .where(User.id == user_id)
        .values(recommendations_enabled=enabled)
        .returning(User)
    )
    if user is None:
        raise NotFound("Your account no longer exists.")
    return user
