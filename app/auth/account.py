"""changePassword: check the old password, store the new hash, outdate every older token."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.guesses import Guesses
from app.auth.revocation import bump_version
from app.db.models import User
from app.errors import BadInput, Forbidden, Unauthenticated
from app.passwords import PasswordGate
from app.users.service import PASSWORD_MAX, PASSWORD_MIN


async def change_password(
    session: AsyncSession,
    user_id: int,
    old_password: str,
    new_password: str,
    guesses: Guesses,
    ip: str,
    passwords: PasswordGate,
) -> tuple[User, int]:
    """(the user, their new token version); Forbidden when `old_password` is wrong.

    A wrong old password is a guess at the account like a failed logIn (a stolen token must
    not buy guesses), counted with logIn's by `guesses`: past its budgets RateLimited, before
    any hashing. Both hashes take the process's Argon2 slots (OVERLOADED when none frees)."""
    if not PASSWORD_MIN <= len(new_password) <= PASSWORD_MAX:
        raise BadInput(f"A password is {PASSWORD_MIN}-{PASSWORD_MAX} characters long.")
    user = await session.get(User, user_id, with_for_update=True)
    if user is None:
        raise Unauthenticated("This account no longer exists.")
    async with guesses.attempt(user.handle, ip, wrong=Forbidden):
        if not await passwords.verify(user.password_hash, old_password):
            raise Forbidden("The old password is wrong.")
    user.password_hash = await passwords.hash(new_password)
    await session.flush()
    version = await bump_version(session, user_id)
    await session.refresh(user)
    return user, version
