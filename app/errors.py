"""Domain errors. Each carries one of the public error codes (docs/API.md, "Errors"): the
codes are the `code`s of AppError and its subclasses, and nowhere else (the GraphQL layer
reads them from these classes)."""

from __future__ import annotations

from typing import ClassVar


class AppError(Exception):
    code: ClassVar[str] = "INTERNAL"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Unauthenticated(AppError):
    code = "UNAUTHENTICATED"


class Forbidden(AppError):
    code = "FORBIDDEN"


class NotFound(AppError):
    code = "NOT_FOUND"


class BadInput(AppError):
    code = "BAD_USER_INPUT"


class CursorExpired(AppError):
    code = "CURSOR_EXPIRED"


class RateLimited(AppError):
    """Over a rate budget: `retry_after` seconds until it refills (extensions.retryAfter)."""

    code = "RATE_LIMITED"

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Conflict(AppError):
    code = "CONFLICT"


class PersistedQueryNotFound(AppError):
    """A document hash that is not registered (transports.trusted): Apollo's code and message;
    clients retry with the document's text."""

    code = "PERSISTED_QUERY_NOT_FOUND"


class Overloaded(AppError):
    """The API process is at capacity (app.api.transports.admission, app.passwords): retry after the
    Retry-After seconds (extensions.retryAfter when raised inside a request)."""

    code = "OVERLOADED"

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unavailable(AppError):
    """A backing store (PostgreSQL) cannot be reached: nothing was done unless said so; retry
    after `retry_after` seconds (extensions.retryAfter). Never INTERNAL: the request was fine,
    the store was away (app.db.errors, docs/decisions/0019)."""

    code = "UNAVAILABLE"

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class WrongRegion(AppError):
    """A write of a user homed in another region (app.db.regions, decision 0087): nothing was
    done; the client sends it to `home_url` (extensions.homeRegion, extensions.homeUrl)."""

    code = "WRONG_REGION"

    def __init__(self, message: str, home_region: str, home_url: str) -> None:
        super().__init__(message)
        self.home_region = home_region
        self.home_url = home_url
