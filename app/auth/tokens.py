"""Bearer tokens: HS256 JWTs with an expiry (PyJWT), subject = user id."""

from __future__ import annotations

import time

import jwt

from app.config import Settings
from app.errors import Unauthenticated

_ALGORITHM = "HS256"


def issue_token(settings: Settings, user_id: int) -> str:
    now = int(time.time())
    claims = {"sub": str(user_id), "iat": now, "exp": now + settings.token_ttl_seconds}
    return jwt.encode(claims, settings.secret_key, algorithm=_ALGORITHM)


def user_id_from_token(settings: Settings, token: str) -> int:
    return verify_token(settings, token)[0]


def verify_token(settings: Settings, token: str) -> tuple[int, int]:
    """(user id, expiry as a Unix time): a websocket outlives a request, so it needs the
    expiry to close itself when the token lapses."""
    try:
        claims = jwt.decode(
            token, settings.secret_key, algorithms=[_ALGORITHM], options={"require": ["exp"]}
        )
        return int(claims["sub"]), int(claims["exp"])
    except jwt.ExpiredSignatureError as exc:
        raise Unauthenticated("Your session token has expired; log in again.") from exc
    except (jwt.PyJWTError, KeyError, ValueError) as exc:
        raise Unauthenticated("The bearer token is not valid; log in again.") from exc


def user_id_from_header(settings: Settings, header: str | None) -> int | None:
    """None when no credentials were sent; Unauthenticated when they were sent but are bad."""
    if not header:
        return None
    return verify_header(settings, header)[0]


def verify_header(settings: Settings, header: str) -> tuple[int, int]:
    """(user id, expiry) of an `Authorization: Bearer <token>` value; Unauthenticated if bad."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("Send the token as 'Authorization: Bearer <token>'.")
    return verify_token(settings, token.strip())
