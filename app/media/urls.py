"""Media URLs, minted at hydration for one viewer (decision 0080).

- A PUBLIC post's image: one URL per MEDIA_PUBLIC_URL_SECONDS window, the same for every
  viewer in it (its expiry is the end of the next window: it lives one to two windows),
  `Cache-Control: public`: a CDN keeps one copy per window. MEDIA_PUBLIC_BASE_URL, when set,
  replaces the URL's origin (scheme and host) with the CDN's.
- A FOLLOWERS or PRIVATE post's image: a URL of its own that lives MEDIA_PRIVATE_URL_SECONDS,
  `Cache-Control: private`. Minted only while hydrating a post the viewer may see: the
  visibility rule (app.posts.visibility) decided which posts reach hydration.

Who loses access (a narrowing, a block, a deletion) loses it when the URLs already handed
out expire: within MEDIA_PRIVATE_URL_SECONDS for a post that was not PUBLIC, within two
MEDIA_PUBLIC_URL_SECONDS windows for one that was; a deleted post's objects are removed by
the cleanup job (jobs.media) after MEDIA_UNREFERENCED_GRACE_SECONDS."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from app.config import Settings
from app.db.models import Visibility
from app.media.store import ObjectStore


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    public_window_seconds: int
    private_seconds: int
    public_base_url: str = ""

    @classmethod
    def of(cls, settings: Settings) -> UrlPolicy:
        return cls(
            settings.media_public_url_seconds,
            settings.media_private_url_seconds,
            settings.media_public_base_url,
        )


def public_expiry(now: float, window: int) -> int:
    """The end of the window after the current one: the same for every `now` in a window."""
    return (int(now) // window + 2) * window


def with_origin(url: str, base_url: str) -> str:
    """`url` under `base_url`'s scheme, host and path prefix (a CDN in front of the store)."""
    if not base_url:
        return url
    base = urlsplit(base_url.rstrip("/"))
    parts = urlsplit(url)
    return urlunsplit((base.scheme, base.netloc, base.path + parts.path, parts.query, ""))


# Minted URLs, per store (held: never another store at a reused address) and CDN origin: a
# URL is a pure function of (key, content type, expiry, scope), and
# the expiry is the same for every hydration within a public window (PUBLIC) or a second
# (others), so a post many viewers read within it is signed once, not once per viewer.
# Nothing in a URL names its viewer: the memo hands out what minting would. Bounded: emptied
# when it reaches MEMO_ENTRIES.
MEMO_ENTRIES = 50_000
_MEMO: dict[tuple[ObjectStore, str, str, str, int, bool], str] = {}


class MediaUrls:
    """URLs for one hydration; `now` fixed per instance, so a page's URLs agree."""

    def __init__(self, store: ObjectStore, policy: UrlPolicy, now: float | None = None) -> None:
        self.store = store
        self.policy = policy
        self.now = time.time() if now is None else now
        self._public = public_expiry(self.now, policy.public_window_seconds)
        self._private = int(self.now) + policy.private_seconds

    def minted(self, key: str, content_type: str, visibility: str) -> str | None:
        """The URL `url` gives, when minted already in this window or second (no await: a
        page's images mostly are); else None."""
        public = visibility == Visibility.PUBLIC
        expires = self._public if public else self._private
        base = self.policy.public_base_url if public else ""
        return _MEMO.get((self.store, base, key, content_type, expires, public))

    async def url(self, key: str, content_type: str, visibility: str) -> str:
        public = visibility == Visibility.PUBLIC
        expires = self._public if public else self._private
        base = self.policy.public_base_url if public else ""
        memo = (self.store, base, key, content_type, expires, public)
        found = _MEMO.get(memo)
        if found is not None:
            return found
        url = await self.store.get_url(key, expires, content_type, public=public)
        if public:
            url = with_origin(url, self.policy.public_base_url)
        if len(_MEMO) >= MEMO_ENTRIES:
            _MEMO.clear()
        _MEMO[memo] = url
        return url
