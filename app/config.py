"""Settings from the environment (names are part of the public contract: docs/API.md), one
class for the whole service (live updates' REALTIME_* included) grouped by concern, the
test-only fault switches apart (`FaultSwitches`), and the one place that turns a DATABASE_URL
into the form each driver wants. Units and bounds: docs/decisions/0073-settings-by-concern.md."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, unquote

from pydantic import (
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Embedded servers' data, pid files and the dev key (devtools.provision); RUN_DIR moves it
# (the launcher's own tests run a second, separate `make run` that way).
RUN_DIR = Path(os.environ.get("RUN_DIR") or PROJECT_ROOT / ".run")


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


RedisRole = Literal["timelines", "sessions", "queue", "pubsub", "limits"]
"""The Redis roles, each with its own URL setting (REDIS_<ROLE>_URL, app.redis_client)."""
REDIS_ROLES: tuple[RedisRole, ...] = ("timelines", "sessions", "queue", "pubsub", "limits")
CLUSTER_SCHEMES = ("redis+cluster://", "rediss+cluster://")


def is_cluster_url(url: str) -> bool:
    """`redis+cluster://` / `rediss+cluster://` name a Redis Cluster (any seed node)."""
    return url.lower().startswith(CLUSTER_SCHEMES)


SENTINEL_SCHEMES = ("redis+sentinel://", "rediss+sentinel://")
SENTINEL_PORT = 26379  # a sentinel's port when the URL names a host alone


def is_sentinel_url(url: str) -> bool:
    """`redis+sentinel://` / `rediss+sentinel://` name a master by its Sentinels (decision 0091)."""
    return url.lower().startswith(SENTINEL_SCHEMES)


@dataclass(frozen=True)
class SentinelTarget:
    """A `redis+sentinel://[user:password@]h1:26379,h2:26379/<master>[/<db>][?db=&password=]`
    URL taken apart: the Sentinels to ask, the master's name, and what the master's
    connections carry (db, credentials, TLS for `rediss+sentinel://`). The Sentinels
    themselves are asked without a password: ARQ's own Sentinel path (`arq --check`) cannot
    send one (python-arq/arq#424)."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    ssl: bool = False


def _sentinel_address(text: str) -> tuple[str, int]:
    """`host:port`, `host` (port 26379) or `[v6]:port`."""
    if text.startswith("["):
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    port = port or str(SENTINEL_PORT)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad sentinel address {text!r}")
    return host, int(port)


def parse_sentinel_url(url: str) -> SentinelTarget:
    """The URL's parts; ValueError (naming what is wrong, never the password) when malformed."""
    if not is_sentinel_url(url):
        raise ValueError("not a redis+sentinel:// URL")
    scheme, _, rest = url.partition("://")
    rest, _, query = rest.partition("?")
    userinfo, _, hosts_path = rest.rpartition("@")
    hosts, _, path = hosts_path.partition("/")
    sentinels = [_sentinel_address(host) for host in hosts.split(",") if host]
    parts = [unquote(part) for part in path.split("/") if part]
    if not sentinels or not parts or len(parts) > 2:
        raise ValueError("expected redis+sentinel://host:port[,host:port...]/<master>[/<db>]")
    params = {k: v[-1] for k, v in parse_qs(query).items()}
    db_text = params.get("db", parts[1] if len(parts) == 2 else "0")
    if not db_text.isdigit():
        raise ValueError(f"bad db {db_text!r}")
    user, colon, password = userinfo.partition(":")
    return SentinelTarget(
        sentinels=tuple(sentinels),
        master=parts[0],
        db=int(db_text),
        username=unquote(user) or None,
        password=params.get("password") or (unquote(password) if colon else None),
        ssl=scheme.lower() == "rediss+sentinel",
    )


MIN_SECRET_BYTES = 32  # HS256 wants a key at least as long as its 256-bit output
CANARY_PREFIX_HEX = 16  # 64 bits: nobody registers a deployment's canary handles first


def canary_handle_prefix(secret_key: str) -> str:
    """The synthetic probe's canary handles start with this (decision 0065): derived from
    SECRET_KEY, so it differs per deployment and cannot be guessed (and squatted) without
    the key. A sign-up whose handle starts with it makes a canary (`users.canary`): hidden
    from search, followed by canaries only, its posts pruned (CANARY_POSTS_RETENTION_SECONDS)."""
    digest = hmac.new(secret_key.encode(), b"hybridfeed probe canary handles", hashlib.sha256)
    return f"c{digest.hexdigest()[:CANARY_PREFIX_HEX]}_"


def _dev_secret() -> str:
    """A secret generated once and kept under .run/ so dev tokens survive restarts."""
    return dev_secret(RUN_DIR / "secret_key")


def dev_secret(path: Path) -> str:
    """The key in `path`, created if missing: written to a private temporary file (mode 0600
    from its creation, never world-readable) then linked into place, so a concurrent start
    never reads a half-written key and the first writer's key wins."""
    try:
        existing: str | None = path.read_text().strip()
    except FileNotFoundError:
        existing = None
    if existing is not None and len(existing.encode()) >= MIN_SECRET_BYTES:
        if path.stat().st_mode & 0o077:  # left readable by an older version: private now
            path.chmod(0o600)
        return existing
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(48)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(key)
            out.flush()
            os.fsync(out.fileno())
        if existing is not None:  # empty or short (an older, non-atomic write): replace it
            os.replace(tmp, path)
            return key
        try:
            os.link(tmp, path)  # atomic, and fails if another process got there first
        except FileExistsError:
            return path.read_text().strip()
    finally:
        tmp.unlink(missing_ok=True)
    return key


# Names the service reads outside `Settings` (the probe's PROBE_* are its own settings), and
# the escape hatch of the look-alike check below: never reported as a misspelt setting.
OTHER_VARIABLES = frozenset(
    {"RUN_DIR", "SEED_DEMO", "PROMETHEUS_MULTIPROC_DIR", "SETTINGS_NOT_OURS"}
)
# `make run`'s own settings (devtools.launcher.LauncherSettings; tests/test_settings_bounds.py
# keeps the two lists equal): the launcher reads them, the service does not.
LAUNCHER_VARIABLES = frozenset({"PORT", "API_WORKERS", "FANOUT_WORKERS"})
# Old names still read, each as (today's field, factor to today's unit): operators set them.
LEGACY_VARIABLES: dict[str, tuple[str, float]] = {
    "TOKEN_CHECK_CACHE_MS": ("token_check_cache_seconds", 0.001),  # decision 0073
}
# Settings no longer read: each is still accepted with the one value it may hold today (so
# existing deployments' environments keep starting), refused with the why otherwise.
RETIRED_VARIABLES: dict[str, tuple[str, str]] = {
    # Timelines are packed only since decision 0034 (the zset layout retired).
    "TIMELINE_ENCODING": (
        "packed",
        "is no longer supported: timelines are stored packed only "
        "(docs/decisions/0034-zset-timelines-retired.md). Remove the setting (or set it to "
        "packed) and convert existing zset timelines with `python -m app.timelines convert` "
        "(docs/operations.md, 'Upgrading from zset timelines')",
    ),
}
# Prefixes an operator may put before a setting's name by habit; the service reads none.
FOREIGN_PREFIXES = ("APP_", "HYBRIDFEED_")


def _distance_at_most(a: str, b: str, limit: int) -> bool:
    """Levenshtein distance between `a` and `b` is <= `limit` (banded, early exit)."""
    if abs(len(a) - len(b)) > limit:
        return False
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return False
        previous = current
    return previous[-1] <= limit


def lookalike_variables(
    environ: Mapping[str, str], known: Iterable[str]
) -> list[tuple[str, str | None]]:
    """Variables in `environ` that look like one of the `known` setting names without being
    one (decision 0065): `HYBRIDFEED_*` (the service reads none: None), a known name behind
    APP_/HYBRIDFEED_, or a name within 1 edit (2 for names over 8 characters) of a known one.
    Each with the setting it resembles. SETTINGS_NOT_OURS (comma-separated) lists names that
    belong to something else."""
    names = {name.upper() for name in known} | OTHER_VARIABLES
    allowed = {n.strip().upper() for n in environ.get("SETTINGS_NOT_OURS", "").split(",")}
    found: list[tuple[str, str | None]] = []
    for variable in environ:
        name = variable.upper()
        if name in names or name in allowed or not name.replace("_", "").isalnum():
            continue
        bare = name
        for prefix in FOREIGN_PREFIXES:
            if name.startswith(prefix):
                bare = name[len(prefix) :]
        like = next(
            (
                known_name
                for known_name in sorted(names - OTHER_VARIABLES)
                if _distance_at_most(bare, known_name, 1 if len(known_name) <= 8 else 2)
            ),
            None,
        )
        if like is not None or name.startswith("HYBRIDFEED_"):
            found.append((variable, like))
    return found


def refuse_lookalikes(environ: Mapping[str, str], known: Iterable[str]) -> None:
    """Stop the start-up on a variable that looks like a setting but is none: a misspelt
    PROFILE would otherwise start a production deployment in the development profile."""
    found = lookalike_variables(environ, known)
    if found:
        listed = ", ".join(
            f"{name} (did you mean {like}?)" if like else name for name, like in found
        )
        raise ValueError(
            f"unknown setting(s) in the environment: {listed}. The service reads each setting "
            "by its exact name (docs/API.md, 'Configuration'); rename or unset them, or list "
            "variables that belong to something else in SETTINGS_NOT_OURS (decision 0065)"
        )


_PEER = r"[a-z][a-z0-9-]{0,31}:([1-9]|1[0-5]):https?://[^,\s]+"
REGION_PEERS_PATTERN = rf"^({_PEER}(,{_PEER})*)?$"

# Names the bounds below use. Ceilings are generous: they only refuse a typo (an extra digit
# or three), never a value an operator would mean.
DAY = 86_400  # seconds
COUNT_CEILING = 2_147_483_647  # counts of users, followers, posts, requests (PostgreSQL integer)
MS_CEILING = 60_000  # a budget or wait inside one operation: a minute at most


class Settings(BaseSettings):
    """The service's settings, one block per concern (decision 0073). Units: `_MS` is time one
    operation may spend or wait (integer milliseconds), `_SECONDS` time something lives,
    recurs or waits for a peer; every number has a lower and an upper bound
    (tests/test_settings_bounds.py), and a value outside them stops the start-up with the
    variable's name (`read_settings`)."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    # ---- Connections: PostgreSQL and Redis -------------------------------------------------
    database_url: str = ""
    # A PostgreSQL connect gives up after this (UNAVAILABLE), where the driver waits 60 s.
    database_connect_timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    # A streaming replica for the reads that tolerate lag (app.db.replica, decision 0043);
    # empty = every read on DATABASE_URL. Reads go back to the primary while the replica is
    # down or its replay lag is past DATABASE_REPLICA_MAX_LAG_SECONDS (measured at most every
    # DATABASE_REPLICA_CHECK_SECONDS per process).
    database_replica_url: str = ""
    # Several replicas (comma-separated), each with its own lag check, reads shared by load
    # among those that keep up (decision 0086); DATABASE_REPLICA_URL is a list of one.
    database_replica_urls: str = ""
    database_replica_max_lag_seconds: float = Field(default=5.0, gt=0, le=3600)
    database_replica_check_seconds: float = Field(default=1.0, gt=0, le=3600)
    # Feed pages' whole filter and hydration on a replica that has replayed every narrowing
    # watermark concerning the page (app.db.watermarks, decision 0086): on whenever a
    # replica is configured.
    database_replica_feed_pages: bool = True
    # How long a narrowing's watermark lives in Redis: past it, the router's lag bound alone
    # proves every replica in use has the narrowing (so it must exceed MAX_LAG + CHECK).
    database_replica_watermark_ttl_seconds: float = Field(default=30.0, gt=0, le=3600)
    redis_url: str = ""
    # Redis roles (docs/DEPLOYMENT.md, "Redis roles"; decision 0041): each empty = REDIS_URL,
    # and roles on one URL share one client. `redis+cluster://host:port` (TLS:
    # `rediss+cluster://`) names a Redis Cluster by any one seed node; the queue role must be
    # a plain server (ARQ's pipelines touch keys in several slots), or a master named by its
    # Sentinels, `redis+sentinel://h1:26379,h2:26379/<master>[?db=0&password=...]` (decision
    # 0091; any role may use that form).
    redis_timelines_url: str = ""  # tl:, posts:, the control plane's fc*: keys
    redis_sessions_url: str = ""  # fs:, fsi:, imp:, act:, frr:
    redis_queue_url: str = ""  # arq:*, fp:, fo:, ej:, rcn:, dl:, jf:
    redis_pubsub_url: str = ""  # the hub's channels and the live counts fu:, fur:, fuc:
    redis_limits_url: str = ""  # rl:, pg:, tv:, tr:, ws:
    # Every Redis command (and connect) gives up after this: a hung Redis fails fast.
    redis_socket_timeout_seconds: float = Field(default=2.0, gt=0, le=300)
    redis_connect_timeout_seconds: float = Field(default=1.0, gt=0, le=300)
    # The relay marks outbox events relayed only once this many of the queue's replicas hold
    # their jobs (`WAIT`, at most REDIS_QUEUE_WAIT_MS; fewer connected replicas: as many as
    # there are), so a failover of the queue's master loses no acknowledged post (decision
    # 0091). 0: no wait (the reconciler alone re-runs what a failover lost, within minutes).
    redis_queue_wait_replicas: int = Field(default=1, ge=0, le=16)
    redis_queue_wait_ms: int = Field(default=1000, ge=1, le=60_000)

    # ---- Regions (docs/DEPLOYMENT.md, "Regions") ------------------------------------------
    # The region this process serves: its users' home writes are accepted here, and readers
    # served here are judged by this region's policy (regional restrictions).
    region: str = Field(default="local", pattern=r"^[a-z][a-z0-9-]{0,31}$")
    # Regional policy (decision 0088; docs/API.md, "Regional restrictions"). An edge that
    # knows the reader's region may name it in this request header (empty: off, every
    # reader is judged by REGION); honoured only from a peer in REGION_HEADER_TRUSTED_PROXIES
    # (addresses or CIDR networks, comma-separated), else ignored.
    region_header: str = Field(default="", pattern=r"^([A-Za-z0-9-]{1,64})?$")
    region_header_trusted_proxies: str = Field(default="127.0.0.1,::1", max_length=4096)
    # The region names restrictions and the edge header may use (comma-separated; empty:
    # any well-formed name): a typo in an operator's --regions is refused, not recorded.
    policy_regions: str = Field(default="", max_length=4096)
    # This region's number in every region-coded id (the low 4 bits of post, user, comment
    # and outbox ids; decision 0087): 0 = one region, nothing routed; 1-15 = one of several,
    # the same number `python -m app.db.regions setup` gave its database.
    region_number: int = Field(default=0, ge=0, le=15)
    # The other regions: `name:number:url` by commas (url: its public GraphQL endpoint). A
    # write of a user homed in one of them is answered WRONG_REGION naming it and its url.
    region_peers: str = Field(default="", pattern=REGION_PEERS_PATTERN)
    # How often the relay writes this region's heartbeat (numbered regions only): a peer
    # serves this region's posts while the heartbeat it applied is younger than the bound
    # `python -m app.db.regions setup` gave it (confirm_ms, 3 s by default).
    region_heartbeat_ms: int = Field(default=500, ge=10, le=MS_CEILING)

    # ---- Profile, keys and tokens ------------------------------------------------------------
    secret_key: str = Field(default_factory=_dev_secret)
    # `production` turns the developer surfaces off: GraphiQL, introspection, /metrics
    # without METRICS_TOKEN (docs/API.md, "Production profile").
    # Exactly one of the two (any other value, `prod` or `Production`, stops the start-up),
    # and a misspelt name too (`refuse_lookalikes`): the profile fails closed (decision 0065).
    profile: Literal["development", "production"] = "development"
    # A development profile serves its developer surfaces to whoever reaches it: the API
    # refuses to start in it on a non-loopback address unless this says so (app.exposure).
    allow_development_on_network: bool = False
    # Set: /metrics wants `Authorization: Bearer <METRICS_TOKEN>` (in any profile).
    metrics_token: str = ""
    # Refuse documents other than graphql/operations/ ones (app.api.transports.trusted): production.
    trusted_documents_only: bool = False
    token_ttl_seconds: int = Field(default=7 * DAY, ge=1, le=365 * DAY)
    # How long this process trusts a token that passed the revocation check
    # (app.auth.revocation; 0 = ask Redis on every request). TOKEN_CHECK_CACHE_MS, its name in
    # milliseconds before decision 0073, is still read (`LEGACY_VARIABLES`).
    token_check_cache_seconds: float = Field(default=1.0, ge=0, le=60)
    # An open websocket re-checks its token this often: a logged-out or outdated token's socket
    # closes (4403) within this delay (decision 0013). HTTP requests check on every request.
    token_recheck_seconds: float = Field(default=30.0, gt=0, le=DAY)

    # ---- Timelines and the fan-out write path ------------------------------------------------
    timeline_max: int = Field(default=800, ge=1, le=100_000)  # entries per home timeline
    # A fan-out batch's timeline writes confirmed by this many replicas of each master it
    # wrote to (`WAIT`) before the job completes; fewer within TIMELINE_WAIT_MS fails the
    # batch, which is retried (decision 0068). 0 = off (a plain server without replicas);
    # docs/DEPLOYMENT.md recommends 1 on a cluster with a replica per master.
    timeline_wait_replicas: int = Field(default=0, ge=0, le=16)
    timeline_wait_ms: int = Field(default=1000, ge=1, le=MS_CEILING)
    author_posts_max: int = Field(default=200, ge=1, le=100_000)  # entries in posts:{author}
    backfill_posts: int = Field(default=20, ge=0, le=10_000)  # newest posts copied on follow
    active_days: int = Field(default=30, ge=1, le=3650)  # who gets pushed timelines
    # follower ids per page (one script call); jobs: 1-7 pages
    fanout_batch_size: int = Field(default=1000, ge=1, le=100_000)
    # followers at/above which an author switches to pull, below which a pull author switches
    # back (0 with a pull threshold of 1: pull-only, decision 0037)
    fanout_pull_threshold: int = Field(default=10_000, ge=1, le=COUNT_CEILING)
    fanout_push_threshold: int = Field(default=8_000, ge=0, le=COUNT_CEILING)
    # The fan-out control plane (app.fanout.control, decision 0026): "cost" decides push or
    # pull per author by cost and the freshness budget (thresholds when inputs are missing);
    # "threshold" is the two constants above, exactly.
    # The default since the read rate is measured (decision 0027); tests keep "threshold".
    fanout_control: Literal["cost", "threshold"] = "cost"
    fanout_window_seconds: int = Field(default=600, ge=10, le=3600)  # posting-rate window
    fanout_hysteresis: float = Field(default=0.25, ge=0, lt=1)  # switch margin, cost terms
    fanout_freshness_budget_seconds: float = Field(default=5.0, gt=0, le=3600)  # to visible
    # Feed reads per active follower per window: what one pulled source costs readers. The
    # prior: the control plane uses the measured rate (app.users.reads) once it has seen at
    # least FANOUT_READ_RATE_MIN_READS reads in the window, this figure until then.
    fanout_reads_per_active_follower: float = Field(default=2.0, ge=0, le=100_000)
    fanout_read_rate_min_reads: int = Field(default=100, ge=1, le=COUNT_CEILING)
    # Below this many active followers an author is never sent PULL by cost (a pin or the
    # burst rule still can): pushing it costs little, pulling it costs every reader.
    fanout_pull_min_active_followers: int = Field(default=1_000, ge=0, le=COUNT_CEILING)
    # Top authors by estimated cost exported by the periodic pass (feed_fanout_author_cost).
    fanout_cost_top_authors: int = Field(default=10, ge=0, le=100)
    # Active followers counted at most (a bounded scan); above it the count reads ">= cap".
    fanout_active_count_cap: int = Field(default=100_000, ge=1, le=COUNT_CEILING)
    # The control plane's periodic pass (jobs.tasks.review_fanout_modes, a cron on the default
    # lane): every so many seconds (0: off; run at the seconds of the minute divisible by it),
    # at most so many authors whose inputs changed get their mode decided again.
    fanout_review_seconds: int = Field(default=5, ge=0, le=60)
    fanout_review_max_authors: int = Field(default=100, ge=1, le=100_000)
    # Widenings (PRIVATE -> FOLLOWERS/PUBLIC) of one post that fan it out again, per rolling
    # hour; a further one answers RATE_LIMITED (narrowing never does). Decision 0067.
    fanout_widenings_per_post_per_hour: int = Field(default=3, ge=1, le=60)
    # Authors with this many followers have their batches on the big lane.
    big_author_followers: int = Field(default=5_000, ge=1, le=COUNT_CEILING)
    # lane lag above which reads pull recent posts too
    lag_threshold_seconds: float = Field(default=5.0, gt=0, le=DAY)

    # ---- Feed reads ------------------------------------------------------------------------
    feed_session_size: int = Field(default=500, ge=1, le=100_000)  # ranked ids per session
    feed_session_ttl_seconds: int = Field(default=1800, ge=1, le=7 * DAY)
    # Open RANKED feed sessions kept per viewer; a new one past this ends the oldest.
    feed_sessions_per_viewer: int = Field(default=10, ge=1, le=1000)
    # A RANKED refresh with nothing new answers from a session this young (0 = never).
    feed_session_reuse_seconds: int = Field(default=300, ge=0, le=DAY)
    # First pages reuse the viewer's context (pull sources, own posts, affinity) this long
    # while their follows, blocks, posts and the pull-mode users are unchanged (0 = never;
    # decision 0047).
    feed_context_ttl_seconds: int = Field(default=60, ge=0, le=3600)
    # PostgreSQL out of reach: session pages whose rows the filter checked this recently are
    # still served, marked degraded; past it UNAVAILABLE (0 = never; decision 0019).
    feed_authz_ttl_seconds: float = Field(default=5.0, ge=0, le=60)
    # per Redis candidate source on the read path
    feed_source_timeout_ms: int = Field(default=250, ge=1, le=MS_CEILING)
    # Candidate sources (app.feed.sources; decision 0079).
    # Per source: the ids it may add to one candidate round at most, how long a page waits
    # for it (past it the page goes without it, degraded, feed_source_dropped_total) and how
    # many of its reads run at once per process (a semaphore; the wait counts in the time).
    # The timeline's and the pulled authors' waits stay above what their Redis reads may
    # take when the process is busy ((PATIENCE + 1) x FEED_SOURCE_TIMEOUT_MS, app.feed.deadline:
    # load alone does not degrade a page), the timeline's with its PostgreSQL fallback on top;
    # own posts read at most OWN_PER_READ per round whatever FEED_SOURCE_OWN_MAX says.
    feed_source_timeline_max: int = Field(default=1000, ge=1, le=100_000)
    feed_source_timeline_timeout_ms: int = Field(default=5000, ge=1, le=MS_CEILING)
    feed_source_timeline_concurrency: int = Field(default=256, ge=1, le=100_000)
    feed_source_pull_max: int = Field(default=5000, ge=1, le=100_000)
    feed_source_pull_timeout_ms: int = Field(default=3000, ge=1, le=MS_CEILING)
    feed_source_pull_concurrency: int = Field(default=256, ge=1, le=100_000)
    feed_source_own_max: int = Field(default=100, ge=1, le=100_000)
    feed_source_own_timeout_ms: int = Field(default=1000, ge=1, le=MS_CEILING)
    feed_source_own_concurrency: int = Field(default=64, ge=1, le=100_000)
    feed_source_lag_max: int = Field(default=500, ge=1, le=100_000)
    feed_source_lag_timeout_ms: int = Field(default=500, ge=1, le=MS_CEILING)
    feed_source_lag_concurrency: int = Field(default=8, ge=1, le=100_000)
    # The recommendation source (RANKED first pages only): PUBLIC posts of authors the viewer
    # does not follow that their followees liked lately, read with a hard bound: the
    # viewer's newest FEED_RECOMMENDED_FOLLOWEES follows, each one's newest
    # FEED_RECOMMENDED_LIKES_PER_FOLLOWEE likes of posts younger than
    # FEED_RECOMMENDED_WINDOW_SECONDS; kept per viewer in process for
    # FEED_RECOMMENDED_CACHE_SECONDS (0 = read on every ranking).
    feed_source_recommended_max: int = Field(default=100, ge=1, le=10_000)
    feed_source_recommended_timeout_ms: int = Field(default=300, ge=1, le=MS_CEILING)
    feed_source_recommended_concurrency: int = Field(default=8, ge=1, le=100_000)
    feed_recommended_followees: int = Field(default=200, ge=1, le=100_000)
    feed_recommended_likes_per_followee: int = Field(default=5, ge=1, le=1000)
    feed_recommended_window_seconds: int = Field(default=3 * DAY, ge=60, le=365 * DAY)
    feed_recommended_cache_seconds: float = Field(default=60.0, ge=0, le=3600)
    # At most this share of a session's positions are recommendations: no more than
    # ceil(share x 10) in any 10 consecutive positions (0 = none at all).
    feed_recommended_share: float = Field(default=0.2, ge=0, le=1)
    # past this, RANKED falls back to freshness (degraded)
    ranking_budget_ms: int = Field(default=50, ge=1, le=MS_CEILING)
    # Two-stage ranking (app.ranking, decision 0078). The versions served (comma-separated;
    # "formula-1", the hand-set formula, is always served: the fallback), files
    # <RANKING_MODELS_DIR>/<version>.txt + .json (empty dir = app/ranking/models); the version
    # new sessions get without an experiment; the experiment assigning viewers to arms
    # ("<name>:<salt>:<arm>=<version>:<weight>,..." or JSON; empty = none). Checked at start
    # (app.ranking.registry): a missing/corrupt model or an unknown version stops it.
    ranking_models: str = "formula-1,gbm-1"
    ranking_model: str = "gbm-1"
    ranking_models_dir: str = ""
    ranking_experiment: str = ""
    # Stage 1 (the formula) cuts a session's candidates to this many for stage 2 (the model).
    ranking_stage2_candidates: int = Field(default=128, ge=1, le=100_000)
    # Frequency rule: an author's posts past this many in a session go below the others
    # (0 = no rule).
    ranking_max_per_author: int = Field(default=20, ge=0, le=100_000)
    # Impressions kept per viewer (app.feed.impressions; 0 = none recorded, no demotion) and
    # how long a viewer's impressions outlive their last one (docs/decisions/0010: up to 128
    # a zset stays a ~3 KB listpack; past it, a ~120 B-per-entry skiplist).
    impressions_max: int = Field(default=128, ge=0, le=100_000)
    impressions_ttl_seconds: int = Field(default=3 * DAY, ge=1, le=365 * DAY)

    # ---- Writes: content and idempotency -----------------------------------------------------
    max_body_chars: int = Field(default=500, ge=1, le=1_000_000)
    max_comment_chars: int = Field(default=500, ge=1, le=1_000_000)
    # createPost's and addComment's idempotency keys are kept this long after their first
    # use; past it the same key creates anew, and the worker's housekeeping deletes them.
    idempotency_key_ttl_seconds: int = Field(default=DAY, ge=60, le=365 * DAY)

    # ---- Negative feedback (app.social.feedback, docs/decisions/0076) ----------------------
    # Users one viewer may mute: one more is refused BAD_USER_INPUT (unmute one first). The
    # feed rule reads a viewer's mutes once per query, so this bounds that read.
    feedback_max_mutes: int = Field(default=1000, ge=1, le=100_000)
    # Posts one viewer keeps hidden: past it the oldest hides are dropped (a feed is newest
    # first, so a post hidden long ago is rarely a candidate again). Bounds the same read.
    feedback_max_hidden_posts: int = Field(default=2000, ge=1, le=100_000)

    # ---- Requests: size, shape, admission, slow clients ------------------------------------
    max_query_depth: int = Field(default=10, ge=1, le=1000)
    max_request_bytes: int = Field(default=64 * 1024, ge=1024, le=64 * 1024 * 1024)
    # The largest query cost accepted (docs/decisions/0012-query-cost.md).
    query_cost_limit: int = Field(default=5000, ge=1, le=COUNT_CEILING)
    # Hashing mutation fields (signUp, logIn, changePassword) one document may hold; more are
    # refused BAD_USER_INPUT before anything runs (app.api.transports.hashing_fields).
    hashing_fields_per_document: int = Field(default=1, ge=1, le=100)
    # Admission control (transports.admission): GraphQL HTTP requests running at once per process
    # (0 = no limit), and how long one over it may wait for a slot before 503 OVERLOADED.
    max_in_flight: int = Field(default=16, ge=0, le=100_000)
    admission_wait_ms: int = Field(default=500, ge=0, le=MS_CEILING)
    # Slow clients (docs/decisions/0016): a GraphQL body must arrive within this of its
    # headers (before it may take a slot; 408 past it), and a request's head within this of
    # the connection's start or its previous response (the connection is closed past it).
    request_body_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    request_header_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    # Open HTTP connections per client address and API process (0 = no cap); past it a
    # request is answered 429 RATE_LIMITED and its connection closed (transports.connections).
    max_connections_per_client: int = Field(default=32, ge=0, le=100_000)
    # Every per-address budget counts an IPv6 client by its first this many bits (a host
    # holds a /64), IPv4 by its address (app.client_address); 128 = each address alone.
    client_ipv6_prefix: int = Field(default=64, ge=32, le=128)

    # ---- Rate limits and the password hashes -------------------------------------------------
    rate_limit_writes_per_minute: int = Field(default=120, ge=1, le=COUNT_CEILING)
    # Queries (app.api.schema.cost): per user, and per client IP whoever asks (0 = no limit).
    rate_limit_reads_per_minute: int = Field(default=1200, ge=0, le=COUNT_CEILING)
    rate_limit_reads_per_ip_per_minute: int = Field(default=6000, ge=0, le=COUNT_CEILING)
    # signUp per client address whatever token is sent: the write budget per minute above,
    # and these ceilings on attempts (each an Argon2 hash) per hour and per day.
    rate_limit_signups_per_ip_per_hour: int = Field(default=20, ge=1, le=COUNT_CEILING)
    rate_limit_signups_per_ip_per_day: int = Field(default=50, ge=1, le=COUNT_CEILING)
    # logIn attempts per client IP, whatever token is sent.
    rate_limit_login_per_ip_per_minute: int = Field(default=60, ge=1, le=COUNT_CEILING)
    # Password guesses (logIn, changePassword's old password) per account, app.auth.guesses
    # and docs/decisions/0020: failures per (account, client address) within the window;
    # failures per account per hour across addresses, past the first DELAY_AFTER of them
    # each further try waits 1, 2, 4 ... s (at most DELAY_MAX) after the last failure.
    rate_limit_login_failures_per_handle_and_ip: int = Field(default=10, ge=1, le=COUNT_CEILING)
    rate_limit_login_failure_window_seconds: int = Field(default=900, ge=1, le=DAY)
    rate_limit_login_failures_per_handle_per_hour: int = Field(default=100, ge=1, le=COUNT_CEILING)
    rate_limit_login_delay_after_failures: int = Field(default=20, ge=0, le=COUNT_CEILING)
    rate_limit_login_delay_max_seconds: int = Field(default=60, ge=1, le=DAY)
    # Argon2 hashes per minute per account and per client address (IPv6 by /64), every
    # hashing mutation alike (signUp, logIn, changePassword: one per hash; app.auth.hashes);
    # past either RATE_LIMITED with retryAfter, before any hash. 0 = no limit.
    rate_limit_hashes_per_account_per_minute: int = Field(default=10, ge=0, le=COUNT_CEILING)
    rate_limit_hashes_per_ip_per_minute: int = Field(default=30, ge=0, le=COUNT_CEILING)
    # Argon2 hashes (64 MiB each) at once per process, and how long one more may wait for
    # a slot before the request answers OVERLOADED (app.passwords): short, so a request
    # does not hold its admission slot queueing for a hash.
    password_hash_concurrency: int = Field(default=2, ge=1, le=64)
    password_hash_wait_ms: int = Field(default=100, ge=0, le=MS_CEILING)

    # ---- GraphQL execution -----------------------------------------------------------------
    # GraphQL attribute fields without graphql-core's per-field machinery (app.api.fast.executor).
    fast_execution: bool = True
    # Registered feed documents over HTTP answered by compiled code (app.api.fast.compiler).
    compiled_documents: bool = True
    # The same for a document sent as unregistered text (GraphiQL, ad-hoc clients): planned on
    # its second sighting, kept in a per-process LRU of this many texts (0: off) of at most
    # COMPILED_TEXT_MAX_CHARS characters each (docs/decisions/0045-text-plans.md).
    compiled_text_plans: int = Field(default=64, ge=0, le=100_000)
    compiled_text_max_chars: int = Field(default=10_000, ge=0, le=1_000_000)

    # ---- Persisted queries: learned (APQ) and registered client manifests ------------------
    # Automatic persisted queries (app.api.transports.persisted, docs/decisions/0082): a text
    # sent with Apollo's persistedQuery hash is learned once it ran, shared by every API
    # process in Redis (the sessions role) for APQ_TTL_SECONDS after its last lookup, at most
    # APQ_MAX_DOCUMENTS (the least recently looked up go first) of at most
    # APQ_MAX_DOCUMENT_CHARS characters each. One client (token user, else address) teaches at
    # most APQ_LEARN_PER_CLIENT_PER_HOUR new ones an hour: all a flood can push out. Each
    # process keeps APQ_PROCESS_ENTRIES hash -> text. Off under TRUSTED_DOCUMENTS_ONLY.
    apq_learn: bool = True
    apq_ttl_seconds: int = Field(default=7 * DAY, ge=60, le=365 * DAY)
    apq_max_documents: int = Field(default=10_000, ge=1, le=1_000_000)
    apq_max_document_chars: int = Field(default=20_000, ge=1, le=1_000_000)
    apq_learn_per_client_per_hour: int = Field(default=100, ge=1, le=COUNT_CEILING)
    apq_process_entries: int = Field(default=1_000, ge=1, le=100_000)
    # Client manifests registered with `python -m app.documents register` (PostgreSQL table
    # client_documents, docs/decisions/0083): each API process re-reads the table when a
    # request names an id or text it does not hold, at most once per this many seconds.
    client_documents_refresh_seconds: float = Field(default=1.0, ge=0.05, le=3600)
    client_documents_max: int = Field(default=5_000, ge=1, le=100_000)

    # ---- Jobs: timeouts, retries, expiry, the reconciler -----------------------------------
    # a killed worker's job is retried this long + 10 s later
    job_timeout_seconds: int = Field(default=60, ge=1, le=DAY)
    # Job retries (jobs/reliability.py, docs/decisions/0011-job-retries.md): a failed job runs
    # again after base * 2^(try-1) s (capped), up to job_max_tries tries, then is a dead letter.
    job_max_tries: int = Field(default=8, ge=1, le=100)
    job_retry_base_seconds: float = Field(default=1.0, ge=0, le=3600)
    job_retry_max_seconds: float = Field(default=60.0, ge=0, le=DAY)
    # ARQ's `expires`: a job still queued this long after it was due is dropped by ARQ unrun
    # (its default, a day, is shorter than an outage may be; decision 0021).
    job_expires_seconds: int = Field(default=7 * DAY, ge=3600, le=365 * DAY)
    # Reconciler (jobs/reconcile.py, every minute): events published this long ago and within
    # the window whose jobs never completed (fan-outs, backfills, cleanups, post changes) are
    # re-run, at most so many per run and so many times per post or job.
    reconcile_grace_seconds: int = Field(default=60, ge=0, le=DAY)
    reconcile_window_seconds: int = Field(default=3600, ge=60, le=30 * DAY)
    reconcile_max_posts: int = Field(default=100, ge=1, le=1_000_000)
    reconcile_max_attempts: int = Field(default=3, ge=1, le=100)
    reconcile_max_events: int = Field(default=20_000, ge=1, le=10_000_000)  # per pass

    # ---- Logs (app.observability.quiet_logs, docs/decisions/0085) ---------------------------
    # `info`: the routine lines (the synthetic probe's requests, health and metrics scrapes,
    # jobs done fine, the workers' health records) are counted, not printed, and summed up in
    # one line per LOG_SUMMARY_SECONDS per process; `debug`: every line; `warning`, `error`:
    # problems only. The API's (uvicorn's) and the workers' (ARQ's) loggers.
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_summary_seconds: int = Field(default=60, ge=1, le=3600)

    # ---- The synthetic probe's canaries ------------------------------------------------------
    # The synthetic probe's canaries (app.probe, decision 0065): their posts are deleted (rows,
    # not tombstones) this long after they were made, by a job every CANARY_PRUNE_MINUTES
    # minutes on the default lane (0: never), at most CANARY_PRUNE_BATCH posts a run. Longer
    # than the reconciler's window, so no event of a pruned post is re-run. The one setting in
    # minutes: the step of a cron's minute field (as FANOUT_REVIEW_SECONDS steps its seconds).
    canary_posts_retention_seconds: int = Field(default=6 * 3600, ge=60, le=365 * DAY)
    canary_prune_minutes: int = Field(default=10, ge=0, le=60)
    canary_prune_batch: int = Field(default=20_000, ge=1, le=10_000_000)

    # ---- The engagement log (app.engagement, docs/decisions/0077) ----------------------------
    # Events wait in a process's buffer (at most ENGAGEMENT_BUFFER_MAX; past it new events are
    # dropped and counted; 0: no log) and are COPYed in batches into engagement_events, one
    # partition per UTC day, made ahead and dropped past ENGAGEMENT_RETENTION_DAYS by a job.
    # Source quality: every ENGAGEMENT_QUALITY_MINUTES (0: only by name) over the last
    # ENGAGEMENT_QUALITY_WINDOW_DAYS, at most ENGAGEMENT_QUALITY_MAX_AUTHORS authors kept;
    # each process rereads it every ENGAGEMENT_QUALITY_REFRESH_SECONDS.
    engagement_buffer_max: int = Field(default=20_000, ge=0, le=1_000_000)
    engagement_retention_days: int = Field(default=30, ge=1, le=3650)
    engagement_quality_window_days: int = Field(default=7, ge=1, le=90)
    engagement_quality_minutes: int = Field(default=10, ge=0, le=60)
    engagement_quality_max_authors: int = Field(default=100_000, ge=1, le=10_000_000)
    engagement_quality_refresh_seconds: float = Field(default=60.0, gt=0, le=3600)

    # ---- Image posts (app.media, docs/decisions/0080) -----------------------------------------
    # Where objects live: `local` (a directory the service serves itself under signed URLs,
    # MEDIA_LOCAL_DIR, empty = <RUN_DIR>/media) or `s3` (an S3-compatible bucket,
    # app.media.s3_store). An upload is JPEG, PNG, WebP or GIF of at most MEDIA_MAX_BYTES
    # whose header declares at most MEDIA_MAX_PIXELS pixels; alt text at most
    # MEDIA_ALT_MAX_CHARS. Per user over the last 24 h: MEDIA_UPLOADS_PER_DAY uploads and
    # MEDIA_UPLOAD_BYTES_PER_DAY bytes. The PUT URL lives MEDIA_UPLOAD_URL_SECONDS; an upload
    # never attached is deleted MEDIA_UPLOAD_TTL_SECONDS after its creation (jobs.media, every
    # MEDIA_CLEANUP_MINUTES, 0: by name only), and so is a stored object no live post uses
    # any more, MEDIA_UNREFERENCED_GRACE_SECONDS after it was last attached. URLs: a PUBLIC
    # post's are one per MEDIA_PUBLIC_URL_SECONDS window (the same for every viewer, living
    # one to two windows: a CDN caches them; MEDIA_PUBLIC_BASE_URL, e.g. the CDN's origin,
    # replaces the origin of the store's URL), other posts' live MEDIA_PRIVATE_URL_SECONDS
    # and are minted per viewer allowed to see the post.
    media_store: Literal["local", "s3"] = "local"
    media_local_dir: str = ""
    media_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1024, le=100 * 1024 * 1024)
    media_max_pixels: int = Field(default=40_000_000, ge=1, le=1_000_000_000)
    media_alt_max_chars: int = Field(default=1000, ge=0, le=10_000)
    media_uploads_per_day: int = Field(default=200, ge=1, le=COUNT_CEILING)
    media_upload_bytes_per_day: int = Field(
        default=1024 * 1024 * 1024, ge=1024, le=1024 * 1024 * 1024 * 1024
    )
    media_upload_url_seconds: int = Field(default=900, ge=1, le=DAY)
    media_upload_ttl_seconds: int = Field(default=DAY, ge=60, le=30 * DAY)
    media_unreferenced_grace_seconds: int = Field(default=3600, ge=0, le=30 * DAY)
    media_cleanup_minutes: int = Field(default=10, ge=0, le=60)
    media_public_url_seconds: int = Field(default=3600, ge=1, le=7 * DAY)
    media_private_url_seconds: int = Field(default=300, ge=1, le=DAY)
    media_public_base_url: str = ""
    # MEDIA_STORE=s3 (app.media.s3_store, docs/DEPLOYMENT.md): the bucket (required), its
    # region and endpoint (unset: AWS's), the signing keys (both unset: botocore's chain), the
    # addressing style, a prefix before every key, one try's timeout, and how far back a GET
    # URL is signed from its expiry (SigV4's cap is 7 days; at least the longest URL minted).
    media_s3_bucket: str = ""
    media_s3_region: str = "us-east-1"
    media_s3_endpoint_url: str = ""
    media_s3_access_key_id: str = ""
    media_s3_secret_access_key: str = ""
    media_s3_addressing_style: Literal["auto", "path", "virtual"] = "auto"
    media_s3_key_prefix: str = ""
    media_s3_timeout_seconds: float = Field(default=10.0, gt=0, le=60)
    media_s3_url_signature_lifetime_seconds: int = Field(default=7 * DAY, ge=1, le=7 * DAY)

    # ---- Live updates (app.realtime, api.endpoint.websocket; env REALTIME_*, docs/API.md) ----
    # Tests shrink them. At most one frame per subscriber per interval; updates inside it are
    # merged (coalesced). The first update after a quiet interval goes out at once (no added
    # latency).
    realtime_coalesce_ms: int = Field(default=250, ge=0, le=MS_CEILING)
    # A subscriber whose pending update was not taken by its socket for this long is stuck
    # (its socket's send buffer is full): it is dropped and its socket closed (1013).
    realtime_stall_seconds: float = Field(default=10.0, gt=0, le=3600)
    # Kernel send buffer and transport high-water mark per websocket (bytes; 0 = leave the
    # kernel's autotuning, up to ~4 MB a socket). Frames are ~150 B: 32 KiB is ~200 frames.
    realtime_socket_send_buffer: int = Field(default=32 * 1024, ge=0, le=64 * 1024 * 1024)
    # New-post ids kept per user; the count saturates here ("200+" is plenty for a banner).
    realtime_count_max: int = Field(default=200, ge=1, le=100_000)
    # Counts of users who never come back expire; a reconnect after that starts from zero.
    realtime_count_ttl_seconds: int = Field(default=7 * DAY, ge=1, le=365 * DAY)
    # A user counts as online this long after their last socket closed: short reconnects keep
    # their running count without a rebuild.
    realtime_online_grace_seconds: float = Field(default=300.0, ge=0, le=DAY)
    # How often each hub re-reads which pull-mode authors its subscribers follow.
    realtime_refresh_seconds: float = Field(default=30.0, gt=0, le=3600)
    # Pub/sub channel namespace; empty = the Redis database number (channels ignore databases).
    realtime_namespace: str = ""
    # Concurrent pull-mode deliveries per process (each is one SQL check + one Redis call).
    realtime_author_concurrency: int = Field(default=8, ge=1, le=1000)
    # Live frames rendered once per distinct update and written straight to each socket
    # (app.api.fast.live_frames); off = Strawberry's per-event execution for every frame (the
    # benchmark's baseline, and a fallback should a client ever need it).
    realtime_prepared_frames: bool = True
    # A socket that has not sent connection_init by then is closed (4408).
    realtime_connection_init_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    # Caps (decision 0017; 0 = off). Open sockets per account (from connection_ack) and per
    # client address (from the upgrade), across every API process: past them a socket is
    # closed with 4429.
    realtime_sockets_per_user: int = Field(default=8, ge=0, le=100_000)
    realtime_sockets_per_ip: int = Field(default=64, ge=0, le=100_000)
    # Live subscriptions (`feedUpdates`) running at once per account and per address; past
    # them a `subscribe` is answered with an `error` message (RATE_LIMITED, the limit).
    realtime_subscriptions_per_user: int = Field(default=16, ge=0, le=100_000)
    realtime_subscriptions_per_ip: int = Field(default=128, ge=0, le=100_000)
    # Subscriptions started per minute per account and per address (each costs a Redis
    # SUBSCRIBE, a count rebuild and SQL): past them, RATE_LIMITED with retryAfter.
    realtime_subscribes_per_minute: int = Field(default=60, ge=0, le=COUNT_CEILING)
    realtime_subscribes_per_ip_per_minute: int = Field(default=300, ge=0, le=COUNT_CEILING)
    # Operations running at once on one socket (queries, mutations, subscriptions).
    realtime_operations_per_socket: int = Field(default=10, ge=1, le=1000)
    # A held socket or subscription counts this long after its process was last heard of
    # (renewed every third of it): a crashed process's sockets stop counting by then.
    realtime_lease_seconds: float = Field(default=60.0, gt=0, le=3600)
    # From this many subscribers on, the hub moves the process's long-lived objects out of
    # the garbage collector's walks (gc.freeze, decision 0039): a full collection over
    # thousands of sockets paused the loop for 0.5-1.8 s, inside whatever broadcast ran.
    # 0 = off.
    realtime_gc_freeze_subscribers: int = Field(default=1000, ge=0, le=10_000_000)

    @model_validator(mode="before")
    @classmethod
    def _legacy_and_retired(cls, data: object) -> object:
        """Old names keep working (`LEGACY_VARIABLES`, converted to today's unit) and retired
        ones are refused unless they hold the one value still meant (`RETIRED_VARIABLES`)."""
        if not isinstance(data, dict):
            return data
        environ = {name.upper(): value for name, value in os.environ.items()}
        for old, (new, scale) in LEGACY_VARIABLES.items():
            value = data.pop(old.lower(), None) or environ.get(old)
            if value is None or new in data or new.upper() in environ:
                continue
            try:
                data[new] = float(value) * scale
            except ValueError:
                raise ValueError(f"{old}={value!r} is not a number") from None
        for name, (accepted, why) in RETIRED_VARIABLES.items():
            value = data.pop(name.lower(), None) or environ.get(name)
            if isinstance(value, str) and value.strip().lower() != accepted:
                raise ValueError(f"{name}={value!r} {why}")
        return data

    @field_validator("*", mode="wrap")
    @classmethod
    def _name_the_variable(
        cls, value: object, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> object:
        """A number refused by its bounds says which variable, whoever builds the settings
        (`read_settings` names every other refusal too)."""
        try:
            return handler(value)
        except ValidationError as exc:
            field = cls.model_fields.get(info.field_name or "")
            if field is None or field.annotation not in (int, float):
                raise
            name = str(info.field_name).upper()
            raise ValueError(
                "; ".join(f"{name}={value!r}: {error['msg']}" for error in exc.errors())
            ) from None

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_log_level(cls, value: object) -> object:
        """LOG_LEVEL=DEBUG as uvicorn's and logging's own spellings have it."""
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("profile", mode="before")
    @classmethod
    def _exact_profile(cls, value: object) -> object:
        if value not in ("development", "production"):
            raise ValueError(
                f"PROFILE={value!r} is not a profile: set PROFILE=production (exactly) or "
                "PROFILE=development, or leave it unset for development"
            )
        return value

    @model_validator(mode="after")
    def _check_invariants(self) -> Settings:
        # 0 is allowed: with FANOUT_PULL_THRESHOLD=1 no author ever switches back (pull-only,
        # as benchmarks.report compares it).
        if not 0 <= self.fanout_push_threshold < self.fanout_pull_threshold:
            raise ValueError("FANOUT_PUSH_THRESHOLD must be >= 0 and < FANOUT_PULL_THRESHOLD")
        if self.timeline_wait_replicas and (
            self.timeline_wait_ms >= self.redis_socket_timeout_seconds * 1000
        ):
            raise ValueError(
                "TIMELINE_WAIT_MS must be below REDIS_SOCKET_TIMEOUT_SECONDS (a WAIT that "
                "outlasts the socket timeout fails as an outage)"
            )
        # Refused only when set: the default gives way to a shorter socket timeout
        # (jobs.connections.queue_fence waits half of it then).
        if (
            self.redis_queue_wait_replicas
            and "redis_queue_wait_ms" in self.model_fields_set
            and self.redis_queue_wait_ms >= self.redis_socket_timeout_seconds * 1000
        ):
            raise ValueError(
                "REDIS_QUEUE_WAIT_MS must be below REDIS_SOCKET_TIMEOUT_SECONDS (a WAIT that "
                "outlasts the socket timeout fails as an outage)"
            )
        if self.replica_dsns and self.database_replica_watermark_ttl_seconds <= (
            self.database_replica_max_lag_seconds + self.database_replica_check_seconds
        ):
            raise ValueError(
                "DATABASE_REPLICA_WATERMARK_TTL_SECONDS must exceed "
                "DATABASE_REPLICA_MAX_LAG_SECONDS + DATABASE_REPLICA_CHECK_SECONDS (an expired "
                "watermark is covered by the lag bound only then)"
            )
        if self.media_store == "s3" and not self.media_s3_bucket:
            raise ValueError("MEDIA_STORE=s3 needs MEDIA_S3_BUCKET")
        if bool(self.media_s3_access_key_id) != bool(self.media_s3_secret_access_key):
            raise ValueError(
                "set both MEDIA_S3_ACCESS_KEY_ID and MEDIA_S3_SECRET_ACCESS_KEY, or neither"
            )
        if self.media_store == "s3" and self.media_s3_url_signature_lifetime_seconds < max(
            2 * self.media_public_url_seconds, self.media_private_url_seconds
        ):
            raise ValueError(
                "MEDIA_S3_URL_SIGNATURE_LIFETIME_SECONDS must cover the longest media URL "
                "minted (two MEDIA_PUBLIC_URL_SECONDS windows, MEDIA_PRIVATE_URL_SECONDS)"
            )
        if self.media_upload_ttl_seconds < self.media_upload_url_seconds:
            raise ValueError(
                "MEDIA_UPLOAD_TTL_SECONDS must be at least MEDIA_UPLOAD_URL_SECONDS (an upload "
                "must outlive the URL its bytes are PUT to)"
            )
        if self.realtime_stall_seconds * 1000 <= self.realtime_coalesce_ms:
            raise ValueError("REALTIME_STALL_SECONDS must exceed the coalescing interval")
        if len(self.secret_key.encode()) < MIN_SECRET_BYTES:
            raise ValueError(
                f"SECRET_KEY must be at least {MIN_SECRET_BYTES} bytes (it signs every token); "
                "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(48))'`,"
                " or leave SECRET_KEY unset in development to use .run/secret_key"
            )
        queue_url = self.redis_role_url("queue")
        if is_cluster_url(queue_url):
            raise ValueError(
                f"REDIS_QUEUE_URL{'' if self.redis_queue_url else ' (from REDIS_URL)'} names a "
                "Redis Cluster: ARQ's queues and job bookkeeping need a plain Redis (its "
                "pipelines touch keys in several hash slots). Point REDIS_QUEUE_URL at a plain "
                "server (redis://, rediss:// or unix://) and keep the cluster for the other "
                "roles (docs/DEPLOYMENT.md, 'Redis roles')"
            )
        for role in ("", *REDIS_ROLES):
            url = getattr(self, f"redis_{role}_url" if role else "redis_url")
            if is_sentinel_url(url):
                try:
                    parse_sentinel_url(url)
                except ValueError as exc:
                    name = f"REDIS_{role.upper()}_URL" if role else "REDIS_URL"
                    raise ValueError(f"{name}: {exc}") from None
        if self.canary_posts_retention_seconds <= self.reconcile_window_seconds:
            raise ValueError(
                "CANARY_POSTS_RETENTION_SECONDS must exceed RECONCILE_WINDOW_SECONDS (a pruned "
                "post's events must be past the reconciler's window)"
            )
        self.region_trusted_networks()  # each entry an address or network, else refused
        for name in self.policy_region_names():
            if not re.fullmatch(r"[a-z][a-z0-9-]{0,31}", name):
                raise ValueError(f"POLICY_REGIONS: {name!r} is not a region name")
        if self.policy_region_names() and self.region not in self.policy_region_names():
            raise ValueError(f"REGION={self.region!r} is not among POLICY_REGIONS")
        if self.profile == "production":
            if "secret_key" not in self.model_fields_set:  # not the dev key of .run/
                raise ValueError("PROFILE=production needs SECRET_KEY set")
            for fault, on in FaultSwitches():
                if on and fault not in PRODUCTION_IGNORES:
                    raise ValueError(f"{fault.upper()} is test-only: not with PROFILE=production")
        return self

    def policy_region_names(self) -> tuple[str, ...]:
        """POLICY_REGIONS as names (empty: any well-formed region name is accepted)."""
        return tuple(n.strip() for n in self.policy_regions.split(",") if n.strip())

    def region_trusted_networks(
        self,
    ) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """REGION_HEADER_TRUSTED_PROXIES as networks (an address is its own /32 or /128)."""
        try:
            return tuple(
                ipaddress.ip_network(n.strip(), strict=False)
                for n in self.region_header_trusted_proxies.split(",")
                if n.strip()
            )
        except ValueError as exc:
            raise ValueError(f"REGION_HEADER_TRUSTED_PROXIES: {exc}") from None

    def redis_role_url(self, role: RedisRole) -> str:
        """The URL a Redis role uses: its own setting, else REDIS_URL (read at use, so a
        `model_copy` that changes REDIS_URL moves every role left unset)."""
        own: str = getattr(self, f"redis_{role}_url")
        return own or self.redis_url

    @property
    def asyncpg_dsn(self) -> str:
        """DATABASE_URL for SQLAlchemy's engine (`sqlalchemy_url`), whatever scheme was given."""
        return sqlalchemy_url(self.database_url)

    @property
    def replica_dsns(self) -> list[str]:
        """DATABASE_REPLICA_URLS (else DATABASE_REPLICA_URL, a list of one) for SQLAlchemy's
        engine, in order; empty when no replica is configured."""
        raw = self.database_replica_urls or self.database_replica_url
        return [sqlalchemy_url(u.strip()) for u in raw.split(",") if u.strip()]

    @property
    def plain_database_url(self) -> str:
        """DATABASE_URL for `asyncpg.connect()` (`asyncpg_url`): LISTEN, COPY, admin work."""
        return asyncpg_url(self.database_url)


class FaultSwitches(BaseSettings):
    """Test-only faults, apart from `Settings` so the service's settings hold only what an
    operator sets (decision 0073). Read by the fault-injection code alone, handed down from the
    composition root (`AppState.faults`); `Settings` refuses any of them on with
    PROFILE=production. Iterating gives (name, on) pairs."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False)

    # Workers read injected faults from Redis (jobs/faults.py).
    job_fault_hook: bool = False
    # Read-path faults (app/feed/) for the synthetic probe's tests (tests/probe/test_probe.py):
    # the authoritative filter lets every candidate through; a keyset cursor is inclusive
    # and a session cursor one position back, so a next page repeats the post the previous
    # one ended at.
    feed_fault_skip_filter: bool = False
    feed_fault_repeat_post: bool = False
    # Argon2id with the least work (app.passwords.CHEAP_HASHER): the test suite creates
    # thousands of accounts, each sign-up ~100 ms of a core at the real parameters.
    # Under PROFILE=production it is ignored (the real parameters; PRODUCTION_IGNORES), not
    # refused: the suite's production-profile servers inherit it, and ignoring it fails safe.
    password_hash_cheap: bool = False


# Test switches PROFILE=production ignores rather than refuses (their "off" is the safe side).
PRODUCTION_IGNORES = frozenset({"password_hash_cheap"})


@lru_cache
def get_faults() -> FaultSwitches:
    """The process's fault switches, read once, one object like `get_settings()`'s: every
    state a process builds (the API's, each in-process worker's) sees a switch a test flips.
    Only the composition root calls this."""
    return FaultSwitches()


class SettingsError(ValueError):
    """Settings that cannot start the service, each named by its variable."""


def _described(error: ValidationError) -> str:
    """One line per refused setting: the variable, the value given, what it must be."""
    lines = []
    for item in error.errors():
        message = str(item["msg"]).removeprefix("Value error, ")
        if item["loc"]:
            name = str(item["loc"][0]).upper()
            if name not in message:
                message = f"{name}={item.get('input')!r}: {message}"
        lines.append(message)
    return "invalid settings (docs/API.md, 'Configuration'):\n  " + "\n  ".join(lines)


def setting_names() -> set[str]:
    """Every variable name the service and its tools read as a setting: the look-alike
    check's known names."""
    fields = set(Settings.model_fields) | set(FaultSwitches.model_fields)
    return (
        {name.upper() for name in fields}
        | set(LEGACY_VARIABLES)
        | set(RETIRED_VARIABLES)
        | LAUNCHER_VARIABLES
    )


def read_settings() -> Settings:
    """The settings from this process's environment, read now (uncached: `get_settings` is
    the roots' cached call). A variable that looks like a setting but is none stops it
    (`refuse_lookalikes`), and so does a value outside its bounds or an invariant broken,
    with a `SettingsError` naming each variable."""
    refuse_lookalikes(os.environ, setting_names())
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(_described(exc)) from None


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once (`read_settings`). Only the roots call this
    (app/web.py, app/state.py, jobs/worker.py, programs' entry modules:
    tests/test_settings_roots.py); everything else is handed its settings
    (docs/ARCHITECTURE.md)."""
    return read_settings()
