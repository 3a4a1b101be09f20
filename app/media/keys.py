"""Keys and signatures of the media package, each under its own sub-key of SECRET_KEY: an
object key or a URL signature is never a token, and knowing one tells nothing of another
(decision 0080). Keys are made of URL-safe characters only, so a key is a path segment and a
file name as it stands."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

# Sub-key labels: a new use gets a new label, never a second use of one.
OBJECT_KEY_LABEL = b"hybridfeed media object keys v1"
URL_SIGNATURE_LABEL = b"hybridfeed media url signatures v1"

STAGING_PREFIX = "u"  # a staged upload's bytes
OBJECT_PREFIX = "m"  # a media object's bytes
_KEY = re.compile(r"^[um]-[A-Za-z0-9_-]{20,100}$")


def sub_key(secret_key: str, label: bytes) -> bytes:
    """A key for one purpose, derived from SECRET_KEY (HMAC-SHA256 as a PRF)."""
    return hmac.new(secret_key.encode(), label, hashlib.sha256).digest()


def upload_id() -> str:
    """createUpload's id: 144 random bits."""
    return secrets.token_urlsafe(18)


def staging_key() -> str:
    """Where an upload's bytes are PUT: random, apart from the upload id (192 bits)."""
    return f"{STAGING_PREFIX}-{secrets.token_urlsafe(24)}"


def object_key(secret_key: str, content_sha256: bytes) -> str:
    """A media object's key: an HMAC of its content's sha256. The same bytes give the same
    key (stored once); without SECRET_KEY nobody can tell which bytes a key holds or make
    up the key of bytes they have."""
    mac = hmac.new(sub_key(secret_key, OBJECT_KEY_LABEL), content_sha256, hashlib.sha256)
    return f"{OBJECT_PREFIX}-{mac.hexdigest()}"


def is_key(key: str) -> bool:
    """A key this package made (a store refuses any other: no paths, no dots)."""
    return _KEY.fullmatch(key) is not None
