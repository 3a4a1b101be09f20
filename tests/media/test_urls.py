"""Media URL policy (app.media.urls): a PUBLIC post's URL is one per window for everyone and
lives one to two windows; MEDIA_PUBLIC_BASE_URL moves it to a CDN's origin; other posts' URLs
are short-lived and private."""

from __future__ import annotations

from pathlib import Path

from app.media.local_store import LocalStore
from app.media.urls import MediaUrls, UrlPolicy, public_expiry, with_origin

KEY = "m-" + "a" * 64


def test_public_expiry_is_shared_within_a_window_and_lives_one_to_two() -> None:
    window = 3600
    start = 1_800_000_000 // window * window
    expiries = {public_expiry(start + s, window) for s in (0, 1, 1800, window - 1)}
    assert expiries == {start + 2 * window}
    assert public_expiry(start + window, window) == start + 3 * window
    for now in (start, start + window - 1):
        assert window < public_expiry(now, window) - now <= 2 * window


def test_the_public_base_url_replaces_the_origin() -> None:
    url = "/media/" + KEY + "?exp=1&ct=image%2Fpng&cc=public&sig=ab"
    assert with_origin(url, "") == url
    assert with_origin(url, "https://cdn.example.com/") == "https://cdn.example.com" + url
    moved = with_origin("https://bucket.s3.example/" + KEY + "?X=1", "https://cdn.example.com/img")
    assert moved == "https://cdn.example.com/img/" + KEY + "?X=1"


async def test_public_urls_are_shared_private_ones_are_short_and_private(tmp_path: Path) -> None:
    store = LocalStore(tmp_path, "k" * 48)
    policy = UrlPolicy(3600, 60, "https://cdn.example.com")
    now = 1_800_000_123.0
    first = MediaUrls(store, policy, now)
    later = MediaUrls(store, policy, now + 30)
    public = await first.url(KEY, "image/png", "public")
    assert public == await later.url(KEY, "image/png", "public")
    assert public.startswith("https://cdn.example.com/media/") and "cc=public" in public
    private = await first.url(KEY, "image/png", "followers")
    assert private.startswith("/media/") and "cc=private" in private
    assert f"exp={int(now) + 60}" in private
    assert private != await later.url(KEY, "image/png", "followers")
