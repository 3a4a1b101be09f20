"""Settings from the environment (names are part of the public contract: docs/API.md), and the
one place that turns a DATABASE_URL into the form each driver wants."""

from __future__ import annotations

import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
RUN_DIR = PROJECT_ROOT / ".run"


# Schemes an operator may put in DATABASE_URL; the drivers each want one spelling of them.
_PG_SCHEMES = ("postgresql+asyncpg://", "postgresql://", "postgres://")


def _with_scheme(url: str, scheme: str) -> str:
    for prefix in _PG_SCHEMES:
        if url.startswith(prefix):
            return scheme + url[len(prefix) :]
    return url


def asyncpg_url(url: str) -> str:
    """A DATABASE_URL in the plain libpq form `asyncpg.connect()` accepts (no `+asyncpg`)."""
    return _with_scheme(url, "postgresql://")


def sqlalchemy_url(url: str) -> str:
    """A DATABASE_URL in the form SQLAlchemy's asyncpg dialect needs (`postgresql+asyncpg://`)."""
    return _with_scheme(url, "postgresql+asyncpg://")


def _dev_secret() -> str:
    """A secret generated once and kept under .run/ so dev tokens survive restarts."""
    path = RUN_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(48)
        path.write_text(key)
        path.chmod(0o600)
        return key


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    database_url: str = ""
    redis_url: str = ""
    port: int = 8000  # the API's port under `make run` (devtools.launcher)
    secret_key: str = Field(default_factory=_dev_secret)

    # Capacity constants: each has an invariant checked below.
    timeline_max: int = 800  # entries kept per home timeline (newest first)
    # Redis layout of tl:{user} and posts:{author} (docs/decisions/0001-timeline-encoding.md):
    # packed ids in a string (~9 B/entry) or zsets (~120 B/entry); reads understand both.
    timeline_encoding: Literal["packed", "zset"] = "packed"
    fanout_batch_size: int = 1000  # follower ids per FanoutBatch job
    fanout_pull_threshold: int = 10_000  # followers at/above which an author switches to pull
    fanout_push_threshold: int = 8_000  # followers below which a pull author switches back
    active_days: int = 30  # followers active within this window get pushed timelines
    feed_session_size: int = 500  # ranked ids frozen per feed session
    feed_session_ttl_seconds: int = 1800
    # A RANKED refresh with nothing new answers from a session this young (0 = never).
    feed_session_reuse_seconds: int = Field(default=300, ge=0)

    # Limits that are not in the public contract but are explicit here.
    author_posts_max: int = 200  # entries kept in posts:{author}
    backfill_posts: int = 20  # newest posts copied into a timeline on follow
    token_ttl_seconds: int = 7 * 24 * 3600
    max_body_chars: int = 500
    max_comment_chars: int = 500
    max_query_depth: int = 10
    max_request_bytes: int = 64 * 1024
    rate_limit_writes_per_minute: int = 120
    # Authors with this many followers have their batches on the big lane.
    big_author_followers: int = 5_000
    feed_source_timeout_ms: int = 250  # per Redis candidate source on the read path
    ranking_budget_ms: int = 50  # past this, RANKED falls back to freshness (degraded)
    # Admission control (app.admission): GraphQL HTTP requests running at once per process
    # (0 = no limit), and how long one over it may wait for a slot before 503 OVERLOADED.
    max_in_flight: int = Field(default=16, ge=0)
    admission_wait_ms: int = Field(default=500, ge=0)
    lag_threshold_seconds: float = 5.0  # lane lag above which reads pull recent posts too
    job_timeout_seconds: int = 60  # a killed worker's job is retried this long + 10 s later
    # Refuse documents other than graphql/operations/ ones (app.api.trusted): production.
    trusted_documents_only: bool = False
    # GraphQL attribute fields without graphql-core's per-field machinery (app.api.fast_exec).
    fast_execution: bool = True

    @model_validator(mode="after")
    def _check_invariants(self) -> Settings:
        if not 0 < self.fanout_push_threshold < self.fanout_pull_threshold:
            raise ValueError("FANOUT_PUSH_THRESHOLD must be > 0 and < FANOUT_PULL_THRESHOLD")
        for name in ("timeline_max", "fanout_batch_size", "active_days", "feed_session_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name.upper()} must be positive")
        return self

    @property
    def asyncpg_dsn(self) -> str:
        """DATABASE_URL for SQLAlchemy's engine (`sqlalchemy_url`), whatever scheme was given."""
        return sqlalchemy_url(self.database_url)

    @property
    def plain_database_url(self) -> str:
        """DATABASE_URL for `asyncpg.connect()` (`asyncpg_url`): LISTEN, COPY, admin work."""
        return asyncpg_url(self.database_url)


@lru_cache
def get_settings() -> Settings:
    return Settings()
