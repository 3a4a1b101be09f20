"""changePassword: check the old password, store the new hash, outdate every older token."""

from __future__ import annotations

from app.auth.guesses import Guesses
from app.auth.hashes import spend_hashes
from app.auth.revocation import bump_version
from app.config import Settings
from app.db.models import User
from app.errors import BadInput, Conflict, Forbidden, Unauthenticated
from app.passwords import PasswordGate
from app.users.service import PASSWORD_MAX, PASSWORD_MIN, Transaction


async def change_password(
    transaction: Transaction,
    user_id: int,
    old_password: str,
    new_password: str,
    guesses: Guesses,
    ip: str,
    passwords: PasswordGate,
    settings: Settings,
) -> tuple[User, int]:
    """(the user, their new token version); Forbidden when `old_password` is wrong.

    A wrong old password is a guess at the account like a failed logIn (a stolen token must
    not buy guesses), counted with logIn's by `guesses`: past its budgets RateLimited, before
    any hashing. Both hashes are spent from the account's and the address's hash budgets
    first (app.auth.hashes) and take the process's Argon2 slots (OVERLOADED when none frees).
    No transaction is open while they run: the row is read, the hashes computed, then one
    short transaction locks the row, checks the password is still the one verified
    (CONFLICT when another change won meanwhile) and stores the new one."""
    if not PASSWORD_MIN <= len(new_password) <= PASSWORD_MAX:
        raise BadInput(f"A password is {PASSWORD_MIN}-{PASSWORD_MAX} characters long.")
    async with transaction() as session:
        user = await session.get(User, user_id)
    if user is None:
        raise Unauthenticated("This account no longer exists.")
    checked = user.password_hash
    async with guesses.attempt(user.handle, ip, wrong=Forbidden):
        await spend_hashes(guesses.redis, settings, user.handle, ip, hashes=2)
        if not await passwords.verify(checked, old_password):
            raise Forbidden("The old password is wrong.")
    new_hash = await passwords.hash(new_password)
    async with transaction() as session:
        current = await session.get(User, user_id, with_for_update=True, populate_existing=True)
        if current is None:
            raise Unauthenticated("This account no longer exists.")
        if current.password_hash != checked:
            raise Conflict("The password was changed meanwhile; try again with the current one.")
        current.password_hash = new_hash
        await session.flush()
        version = await bump_version(session, user_id)
        await session.refresh(current)
    return current, version
