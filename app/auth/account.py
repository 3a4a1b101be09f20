"""changePassword: check the old password, store the new hash, outdate every older token."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.revocation import bump_version
from app.db.models import User
from app.errors import BadInput, Forbidden, Unauthenticated
from app.passwords import hash_password, verify_password
from app.users.service import PASSWORD_MAX, PASSWORD_MIN


async def change_password(
    session: AsyncSession, user_id: int, old_password: str, new_password: str
) -> tuple[User, int]:
    """(the user, their new token version); Forbidden when `old_password` is wrong."""
    if not PASSWORD_MIN <= len(new_password) <= PASSWORD_MAX:
        raise BadInput(f"A password is {PASSWORD_MIN}-{PASSWORD_MAX} characters long.")
    user = await session.get(User, user_id, with_for_update=True)
    if user is None:
        raise Unauthenticated("This account no longer exists.")
    # Argon2 is deliberately slow: keep it off the event loop.
    if not await asyncio.to_thread(verify_password, user.password_hash, old_password):
        raise Forbidden("The old password is wrong.")
    user.password_hash = await asyncio.to_thread(hash_password, new_password)
    await session.flush()
    version = await bump_version(session, user_id)
    await session.refresh(user)
    return user, version
