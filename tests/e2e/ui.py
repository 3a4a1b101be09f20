"""Steps in the page shared by the browser tests (steps through the API: tests/helpers.py)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw
from playwright.async_api import FilePayload, Page, Route, expect
from playwright.async_api import TimeoutError as PlaywrightTimeout

from tests.helpers import PASSWORD


async def log_in(page: Page, handle: str, password: str = PASSWORD) -> None:
    """Log in through the form and wait for the signed-in header."""
    await page.goto("/#/login")
    await page.get_by_test_id("auth-handle").fill(handle)
    await page.get_by_test_id("auth-password").fill(password)
    await page.get_by_test_id("auth-submit").click()
    await expect(page.get_by_test_id("viewer-handle")).to_have_text(f"@{handle}")


async def open_with_token(page: Page, token: str, path: str = "/") -> None:
    """Start already logged in (the page keeps its token in localStorage)."""
    await page.add_init_script(f"localStorage.setItem('hybridfeed.token', {json.dumps(token)})")
    await page.goto(path)
    await expect(page.get_by_test_id("viewer-handle")).to_be_visible()


def feed_post(page: Page, body: str) -> Any:
    return page.get_by_test_id("feed").get_by_test_id("post").filter(has_text=body)


def operation_of(route: Route) -> str | None:
    try:
        payload = json.loads(route.request.post_data or "{}")
    except ValueError:
        return None
    return payload.get("operationName")


def graphql_error(code: str, message: str) -> str:
    error = {"message": message, "extensions": {"code": code}}
    return json.dumps({"data": None, "errors": [error]})


FEED_OPERATIONS = ("Feed", "FeedWithReasons")  # the home feed's reads


def record_feed_requests(page: Page) -> list[dict[str, Any]]:
    """Variables of every feed read the page sends, in order (`FeedWithReasons` in RANKED
    mode, `Feed` in CHRONOLOGICAL mode and for the newest posts on top)."""
    sent: list[dict[str, Any]] = []

    def on_request(request: Any) -> None:
        if request.url.endswith("/graphql") and request.method == "POST":
            payload = json.loads(request.post_data or "{}")
            if payload.get("operationName") in FEED_OPERATIONS:
                sent.append(payload.get("variables") or {})

    page.on("request", on_request)
    return sent


# The footer (frontend-demo/js/paged.js) shows the pages loaded and the list's state.
_NEXT_PAGE_OR_END = """([footer, pages]) =>
    footer.dataset.state === 'end' ||
    (footer.dataset.pages !== pages && footer.dataset.state !== 'loading')"""


async def scroll_to_end(page: Page, list_testid: str = "feed", max_steps: int = 40) -> None:
    """Scroll like a reader until the list says it has no next page: after each turn of the
    wheel, wait for the next page to be shown (or the end) rather than for a set time."""
    footer = page.get_by_test_id(f"{list_testid}-footer")
    for _ in range(max_steps):
        if await footer.get_attribute("data-state") == "end":
            return
        pages = await footer.get_attribute("data-pages")
        await page.mouse.wheel(0, 4000)
        # A turn that did not reach the bottom loads nothing: scroll on after a while.
        with contextlib.suppress(PlaywrightTimeout):
            await page.wait_for_function(
                _NEXT_PAGE_OR_END, arg=[await footer.element_handle(), pages], timeout=2000
            )
    await expect(footer).to_have_attribute("data-state", "end")


# -- comments, follower lists, people search (frontend-demo/js/comments.js, search.js) ---------


async def open_comments(card: Any) -> Any:
    """Click the post card's "N comments" toggle and wait for the first page; the thread."""
    await card.get_by_test_id("comment").click()
    thread = card.get_by_test_id("comment-thread")
    await expect(thread.locator(".comments-footer")).not_to_have_attribute("data-state", "loading")
    return thread


async def more_comments(thread: Any) -> None:
    """Load the thread's next page of comments and wait until it is shown."""
    before = await thread.get_by_test_id("comment-item").count()
    await thread.get_by_test_id("comments-more").click()
    await expect(thread.locator(".comments-footer")).not_to_have_attribute("data-state", "loading")
    await expect(thread.get_by_test_id("comment-item")).not_to_have_count(before)


async def search_people(page: Page, prefix: str) -> Any:
    """Type a prefix into the header's search box; the results once they are for `prefix`."""
    await page.get_by_test_id("search-input").fill("")
    await page.get_by_test_id("search-input").press_sequentially(prefix, delay=20)
    results = page.get_by_test_id("search-results")
    await expect(results).to_have_attribute("data-prefix", prefix)
    await expect(results).to_be_visible()
    return results


def operations_sent(page: Page, name: str) -> list[dict[str, Any]]:
    """Variables of every request for operation `name` the page sends, in order."""
    sent: list[dict[str, Any]] = []

    def on_request(request: Any) -> None:
        if request.url.endswith("/graphql") and request.method == "POST":
            payload = json.loads(request.post_data or "{}")
            if payload.get("operationName") == name:
                sent.append(payload.get("variables") or {})

    page.on("request", on_request)
    return sent


# -- images (frontend-demo/js/compose.js, media.js) ----------------------------------------------


@dataclass(frozen=True)
class ImageFile:
    """A file as a person would pick it: its name, the type the browser gives it, its bytes."""

    name: str
    mime_type: str
    data: bytes

    def payload(self) -> FilePayload:
        return {"name": self.name, "mimeType": self.mime_type, "buffer": self.data}


def picture(
    name: str, width: int = 96, height: int = 64, hue: tuple[int, int, int] = (79, 70, 229)
) -> ImageFile:
    """A real image (PNG, or JPEG by the name's suffix): a gradient of `hue` with a sun and a
    horizon, so a screenshot shows something and each test image differs."""
    image = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(image)
    for y in range(height):
        fade = y / max(1, height - 1)
        draw.line([(0, y), (width, y)], fill=tuple(int(c + (255 - c) * fade * 0.6) for c in hue))
    radius = max(2, min(width, height) // 6)
    sun = (width * 2 // 3, height // 3)
    draw.ellipse(
        [sun[0] - radius, sun[1] - radius, sun[0] + radius, sun[1] + radius], fill=(253, 224, 71)
    )
    draw.rectangle([0, height * 2 // 3, width, height], fill=tuple(c // 2 for c in hue))
    out = io.BytesIO()
    jpeg = name.lower().endswith((".jpg", ".jpeg"))
    image.save(out, format="JPEG" if jpeg else "PNG")
    return ImageFile(name, "image/jpeg" if jpeg else "image/png", out.getvalue())


async def pick_images(page: Page, *files: ImageFile) -> None:
    """Choose files with the compose box's file input (what its "Add images" button opens)."""
    await page.get_by_test_id("compose-file").set_input_files([f.payload() for f in files])


# A drop as the browser makes it: dragenter, dragover and drop on the compose box, carrying
# the files in a DataTransfer.
_DROP = """([files]) => {
    const transfer = new DataTransfer();
    for (const [name, type, b64] of files) {
        const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
        transfer.items.add(new File([bytes], name, { type }));
    }
    const box = document.querySelector('[data-testid="compose"]');
    for (const kind of ['dragenter', 'dragover', 'drop']) {
        const init = { bubbles: true, cancelable: true, dataTransfer: transfer };
        const event = new DragEvent(kind, init);
        box.dispatchEvent(event);
        if (!event.defaultPrevented) throw new Error(`the compose box ignored ${kind}`);
    }
}"""


async def drop_images(page: Page, *files: ImageFile) -> None:
    """Drop files on the compose box (a synthetic drop event, as a file manager's drag ends)."""
    encoded = [[f.name, f.mime_type, base64.b64encode(f.data).decode()] for f in files]
    await page.evaluate(_DROP, [encoded])


async def shown_image(img: Any) -> dict[str, Any]:
    """Scroll a post's <img> into view (they load lazily), wait until it is decoded, and
    return what the page has of it: natural and attribute sizes, alt, loading."""
    await img.scroll_into_view_if_needed()
    shown: dict[str, Any] = await img.evaluate(
        """async (i) => {
            await i.decode();
            return {
                naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight,
                width: i.getAttribute('width'), height: i.getAttribute('height'),
                alt: i.getAttribute('alt'), loading: i.loading, src: i.getAttribute('src'),
            };
        }"""
    )
    return shown
