"""Bearer tokens: HS256 JWTs with an expiry (PyJWT), subject = user id.

Each token also carries an id (`jti`, what logOut revokes) and the user's token version at
issue (`ver`, what changePassword outdates): docs/decisions/0013-token-revocation.md. The
signature and expiry are checked here, with no I/O; whether a valid token was revoked is
app.auth.revocation's question.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from typing import NamedTuple

import jwt

from app.config import Settings
from app.errors import Unauthenticated

_ALGORITHM = "HS256"


class TokenClaims(NamedTuple):
    user_id: int
    expires_at: int  # Unix time
    token_id: str  # `jti`; a deny-list entry names it
    version: int  # the user's token_version when the token was issued


def issue_token(settings: Settings, user_id: int, version: int = 0) -> str:
    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "iat": now,
        "exp": now + settings.token_ttl_seconds,
        "jti": secrets.token_urlsafe(16),
        "ver": int(version),
    }
    return jwt.encode(claims, settings.secret_key, algorithm=_ALGORITHM)


def verify_token(settings: Settings, token: str) -> tuple[int, int]:
    """(user id, expiry as a Unix time): a websocket outlives a request, so it needs the
    expiry to close itself when the token lapses."""
    claims = token_claims(settings, token)
    return claims.user_id, claims.expires_at


# Tokens whose signature this process checked: (secret, token) -> claims. A signature
# check cost ~4% of a feed page's API CPU and its answer for one token never changes; the
# expiry is compared on every use. Oldest entries go first past VERIFIED_MAX.
VERIFIED_MAX = 20_000
_verified: dict[tuple[str, str], TokenClaims] = {}


def token_claims(settings: Settings, token: str) -> TokenClaims:
    """The checked claims of `token`; Unauthenticated when its signature or expiry is bad."""
    key = (settings.secret_key, token)
    known = _verified.get(key)
    if known is not None and known.expires_at > time.time():
        return known
    claims = _decode(settings, token)
    if len(_verified) >= VERIFIED_MAX:
        del _verified[next(iter(_verified))]
    _verified[key] = claims
    return claims


def _decode(settings: Settings, token: str) -> TokenClaims:
    try:
        claims = jwt.decode(
            token, settings.secret_key, algorithms=[_ALGORITHM], options={"require": ["exp"]}
        )
        # Tokens from before ids and versions: version 0, and an id derived from the token.
        token_id = claims.get("jti") or hashlib.sha256(token.encode()).hexdigest()[:22]
        version = claims.get("ver", 0)
        if not isinstance(token_id, str) or not isinstance(version, int):
            raise ValueError("bad jti/ver")
        return TokenClaims(int(claims["sub"]), int(claims["exp"]), token_id, version)
    except jwt.ExpiredSignatureError as exc:
        raise Unauthenticated("Your session token has expired; log in again.") from exc
    except (jwt.PyJWTError, KeyError, ValueError, TypeError) as exc:
        raise Unauthenticated("The bearer token is not valid; log in again.") from exc


def user_id_from_header(settings: Settings, header: str | None) -> int | None:
    """None when no credentials were sent; Unauthenticated when they were sent but are bad."""
    if not header:
        return None
    return verify_header(settings, header)[0]


def verify_header(settings: Settings, header: str) -> tuple[int, int]:
    """(user id, expiry) of an `Authorization: Bearer <token>` value; Unauthenticated if bad."""
    claims = header_claims(settings, header)
    return claims.user_id, claims.expires_at


def header_claims(settings: Settings, header: str) -> TokenClaims:
    """The claims of an `Authorization: Bearer <token>` value; Unauthenticated if bad."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("Send the token as 'Authorization: Bearer <token>'.")
    return token_claims(settings, token.strip())
