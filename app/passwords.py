"""Password hashing with Argon2id (argon2-cffi defaults, RFC 9106 low-memory profile).

One module so auth and the seeder agree on the hash format, and so callers never have to know
which exceptions argon2 raises: verification is a yes/no question.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

_hasher = PasswordHasher()

__all__ = ["hash_password", "needs_rehash", "verify_password"]


def hash_password(password: str) -> str:
    """Salted Argon2id hash in PHC string form (parameters travel with the hash)."""
    return _hasher.hash(password)


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
