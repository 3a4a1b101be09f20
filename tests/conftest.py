"""Test session: a fresh migrated database and a private Redis db on the provisioned servers.

`make test` provisions PostgreSQL and Redis (embedded ones when DATABASE_URL/REDIS_URL are
unset) and exports their URLs; the tests never mock either. Under pytest-xdist every worker is
a session of its own: its own database (a copy of a template migrated once, decision 0074), its
own Redis db (claimed in db 0, so concurrent runs on one server never share one) and its own
pub/sub namespace.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest
import redis

from app.config import PROJECT_ROOT, asyncpg_url

# The servers' URLs as the launcher gave them, kept in the environment before it is pointed at
# this session's database below: pytest-xdist workers inherit the controller's environment,
# so DATABASE_URL there already names the controller's own (never created) test database.
BASE_DATABASE_URL = os.environ.setdefault(
    "TESTS_BASE_DATABASE_URL",
    os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
)
BASE_REDIS_URL = os.environ.setdefault(
    "TESTS_BASE_REDIS_URL", os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
)
TEST_DB = f"feedtest_{uuid.uuid4().hex[:10]}"
# How long a claim on a Redis db lives without its session renewing it (a killed run's claim
# lapses by itself); renewed every third of that by a daemon thread.
CLAIM_SECONDS = 90
CLAIM_PREFIX = "feedtest:claim:"


def _with_path(url: str, path: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def _claim_redis_db() -> int:
    """A Redis db of this session's own: concurrent runs and xdist workers share one server,
    and a test's FLUSHDB must never empty another's db. Claims are keys in db 0 (which no
    test uses), SET NX with a lease renewed while this process lives. TEST_REDIS_DB forces
    one (unclaimed)."""
    forced = os.environ.get("TEST_REDIS_DB")
    if forced:
        return int(forced)
    admin = redis.Redis.from_url(_with_path(BASE_REDIS_URL, "/0"))
    databases = int(admin.config_get("databases").get("databases", 16))
    for db in range(1, databases):
        if admin.set(f"{CLAIM_PREFIX}{db}", TEST_DB, nx=True, ex=CLAIM_SECONDS):
            break
    else:
        admin.close()
        raise RuntimeError(f"every Redis db 1..{databases - 1} is claimed by another test run")
    key = f"{CLAIM_PREFIX}{db}"

    def renew() -> None:
        while True:
            threading.Event().wait(CLAIM_SECONDS / 3)
            with contextlib.suppress(redis.RedisError):  # away: the next round tries again
                admin.set(key, TEST_DB, ex=CLAIM_SECONDS)

    def release() -> None:
        with contextlib.suppress(redis.RedisError):
            if admin.get(key) == TEST_DB.encode():
                admin.delete(key)

    threading.Thread(target=renew, name="redis-db-claim", daemon=True).start()
    atexit.register(release)
    return db


TEST_REDIS_DB = _claim_redis_db()


TEST_DATABASE_URL = _with_path(asyncpg_url(BASE_DATABASE_URL), "/" + TEST_DB)
TEST_REDIS_URL = _with_path(BASE_REDIS_URL, f"/{TEST_REDIS_DB}")

# Settings are read from the environment once per process: point them at the test servers
# before any app module builds its settings, and shrink capacities so tests can cross them.
os.environ.update(
    {
        "DATABASE_URL": TEST_DATABASE_URL,
        "REDIS_URL": TEST_REDIS_URL,
        "SECRET_KEY": "test-secret-key-that-is-long-enough-for-hs256",
        "RATE_LIMIT_WRITES_PER_MINUTE": "100000",
        "RATE_LIMIT_SIGNUPS_PER_IP_PER_HOUR": "100000",
        "RATE_LIMIT_SIGNUPS_PER_IP_PER_DAY": "100000",
        # Argon2 budgets per account and address (tests sign up and log in many users from
        # one address); a full hash gate waits as before so a loaded machine does not answer
        # OVERLOADED (tests/auth/test_hash_budget.py tests both with the defaults).
        "RATE_LIMIT_HASHES_PER_ACCOUNT_PER_MINUTE": "100000",
        "RATE_LIMIT_HASHES_PER_IP_PER_MINUTE": "100000",
        "PASSWORD_HASH_WAIT_MS": "2000",
        # Argon2id with the least work (a test switch, app.config.FaultSwitches): thousands of
        # sign-ups at ~100 ms of a core each were the suite's largest CPU cost (decision 0074).
        "PASSWORD_HASH_CHEAP": "1",
        "FANOUT_PULL_THRESHOLD": "10",
        "FANOUT_PUSH_THRESHOLD": "8",
        # Tests cross the thresholds with a handful of followers, where the cost model would
        # keep everyone PUSH: the control plane's tests set FANOUT_CONTROL=cost themselves.
        "FANOUT_CONTROL": "threshold",
        "FANOUT_BATCH_SIZE": "4",
        # The control plane's periodic pass runs when a test enqueues it (jobs.worker.REVIEW),
        # not on its own in the middle of a test's burst workers.
        "FANOUT_REVIEW_SECONDS": "0",
        "BIG_AUTHOR_FOLLOWERS": "6",
        "TIMELINE_MAX": "400",
        "FEED_SESSION_SIZE": "120",
        "AUTHOR_POSTS_MAX": "100",
        "JOB_TIMEOUT_SECONDS": "3",
        # Generous: the test machine is shared with the workers; timeouts are tested directly.
        "FEED_SOURCE_TIMEOUT_MS": "3000",
        "RANKING_BUDGET_MS": "2000",
    }
)
# Pub/sub channels ignore Redis databases: another test run on the same server must not reach
# this session's sockets. Here, before any import builds the (cached) realtime settings: app.web
# builds its app, and so those settings, when imported.
os.environ["REALTIME_NAMESPACE"] = TEST_DB
# The local object store's directory, one per session (MEDIA_STORE=local): another worker's
# cleanup job never deletes this session's objects. Removed with the session.
MEDIA_DIR = os.path.join(tempfile.gettempdir(), f"{TEST_DB}_media")
os.environ["MEDIA_LOCAL_DIR"] = MEDIA_DIR
atexit.register(shutil.rmtree, MEDIA_DIR, True)

TEMPLATE_PREFIX = "feedtest_template_"
TEMPLATE_LOCK = 740_074  # pg_advisory_lock key: one session makes the template

TABLES = (
    "post_restriction_audit, post_restrictions, client_documents, engagement_events, "
    "author_quality, uploads, post_media, media_objects, revoked_tokens, outbox, "
    "idempotency_keys, comments, likes, blocks, follows, posts, users"
)


# Under pytest-xdist (`make test`, --dist loadgroup) a test file's tests run on one worker, in
# file order (module-scoped servers start once; some files' tests follow on from each other);
# these folders go whole to one worker: one browser and one live server for e2e/, one
# scale-out topology for cluster/ (whose failover tests run after its end-to-end ones), one
# two-region topology for regions/.
WHOLE_FOLDERS = ("e2e", "cluster", "regions")
# Folders whose every test is marked `alone` (pyproject.toml): `make test` runs them after the
# parallel phase, with nothing else on the machine. A single test that reads server-wide
# figures or flushes server-wide state carries the mark itself.
ALONE_FOLDERS = ("reliability",)
# Groups handed out first, longest first (measured, decision 0074), so no long group starts
# last while the other workers sit idle; the rest follow in collection order. Only the order
# depends on this list: a stale entry costs minutes, never a result.
LONG_FIRST = (
    "e2e",
    "cluster",
    "regions",
    "probe/test_canaries.py",
    "probe/test_probe.py",
    "fanout/test_grouped_jobs.py",
    "benchmarks/test_report_smoke.py",
    "devtools/test_launcher_signals.py",
    "realtime/test_protocol.py",
    "redis_roles/test_split_roles.py",
    "redis_roles/test_queue_failover.py",
    "fanout/test_write_path.py",
    "feed/test_feed.py",
    "fanout/test_bursts.py",
    "observability/test_slo_metrics.py",
    "fanout/test_worker_crash.py",
    "fanout/test_control.py",
    "realtime/test_subscriptions.py",
)


def _group(item: pytest.Item) -> str:
    """The item's xdist group: its folder in WHOLE_FOLDERS, else its file."""
    path = item.path.relative_to(PROJECT_ROOT / "tests")
    return path.parts[0] if path.parts[0] in WHOLE_FOLDERS else path.as_posix()


@pytest.hookimpl(tryfirst=True)  # before `-m` selects and xdist reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(PROJECT_ROOT / "tests").parts[0] in ALONE_FOLDERS:
            item.add_marker(pytest.mark.alone)
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a plain run keeps pytest's order
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_group(item)))
    # A stable sort: within a group (and among unlisted groups) collection order stays.
    items.sort(key=lambda item: rank.get(_group(item), len(rank)))


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(_with_path(asyncpg_url(BASE_DATABASE_URL), "/postgres"))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _template_name() -> str:
    """The migrated template's name: a digest of the migrations, so a changed migration makes
    a new template and an unchanged one is reused by the next run as well."""
    digest = hashlib.sha256()
    for path in sorted((PROJECT_ROOT / "migrations").rglob("*.py")):
        digest.update(path.relative_to(PROJECT_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{TEMPLATE_PREFIX}{digest.hexdigest()[:12]}"


async def _create_from_template() -> None:
    """CREATE DATABASE ... TEMPLATE a database migrated once (alembic takes ~3 s, a copy a
    fraction of that; every xdist worker needs one). An advisory lock makes one session
    migrate while the others wait, and keeps copies from overlapping the template's making."""
    template = _template_name()
    conn = await asyncpg.connect(_with_path(asyncpg_url(BASE_DATABASE_URL), "/postgres"))
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", TEMPLATE_LOCK)
        try:
            ready = await conn.fetchval(
                "SELECT datistemplate FROM pg_database WHERE datname = $1", template
            )
            if not ready:
                await conn.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
                await conn.execute(f'CREATE DATABASE "{template}"')
                await asyncio.to_thread(
                    subprocess.run,
                    [sys.executable, "-m", "alembic", "upgrade", "head"],
                    cwd=PROJECT_ROOT,
                    env={
                        **os.environ,
                        "DATABASE_URL": _with_path(TEST_DATABASE_URL, "/" + template),
                    },
                    check=True,
                )
                # Marked only once migrated: a run killed halfway leaves no half template.
                await conn.execute(f'ALTER DATABASE "{template}" WITH IS_TEMPLATE true')
                stale = await conn.fetch(
                    "SELECT datname FROM pg_database WHERE datname LIKE $1 AND datname <> $2",
                    TEMPLATE_PREFIX + "%",
                    template,
                )
                for row in stale:  # templates of older migrations
                    await conn.execute(f'ALTER DATABASE "{row[0]}" WITH IS_TEMPLATE false')
                    await conn.execute(f'DROP DATABASE IF EXISTS "{row[0]}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{TEST_DB}" TEMPLATE "{template}"')
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", TEMPLATE_LOCK)
    finally:
        await conn.close()


@pytest.fixture(scope="session", autouse=True)
def test_database() -> Iterator[str]:
    asyncio.run(_create_from_template())
    yield TEST_DATABASE_URL
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{TEST_DB}" WITH (FORCE)'))


@pytest.fixture(scope="session")
async def state(test_database: str) -> AsyncIterator[object]:
    from app.state import create_state

    st = create_state()
    yield st
    await st.close()


@pytest.fixture(autouse=True)
async def clean(state: object) -> None:
    """Every test starts from empty tables and an empty Redis db."""
    from app import ratelimit
    from app.auth import guesses, revocation
    from app.state import AppState

    assert isinstance(state, AppState)
    conn = await asyncpg.connect(TEST_DATABASE_URL)
    try:
        for attempt in range(5):
            try:
                await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
                break
            except asyncpg.DeadlockDetectedError:
                # A background statement of the session's state (a flush, a hub's read)
                # may hold one table while the TRUNCATE holds another: PostgreSQL gives up
                # the TRUNCATE, the other statement then ends, and the next try goes in.
                if attempt == 4:
                    raise
                await asyncio.sleep(0.1)
    finally:
        await conn.close()
    await state.redis.flushdb()
    shutil.rmtree(MEDIA_DIR, ignore_errors=True)  # the local store's objects, with their rows
    state.forget_local()  # in-process caches and gates: ids restart with every test
    ratelimit.forget_local()  # the read meter's and the fallback limiter's counts, too
    guesses.forget_local()  # and the fallback's password-guess counts
    revocation.passed.clear()  # tokens that passed the revocation check lately
    revocation.retries.clear()  # and Redis writes of revocations waiting for a retry


@pytest.fixture
async def pipeline(state: object) -> AsyncIterator[object]:
    from tests.pipeline import Pipeline

    pipe = await Pipeline.open(state)  # type: ignore[arg-type]
    yield pipe
    await pipe.close()


@pytest.fixture(scope="session")
async def client(state: object) -> AsyncIterator[httpx.AsyncClient]:
    from app.web import create_app

    app = create_app(state)  # type: ignore[arg-type]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
        yield c


@pytest.fixture(scope="module")
async def trusted_server(test_database: str) -> AsyncIterator[object]:
    """`uvicorn app.web:app` with TRUSTED_DOCUMENTS_ONLY=1 (tests.servers.ApiServer), one per
    test module that asks for it."""
    from tests.servers import ApiServer

    async with ApiServer(env={"TRUSTED_DOCUMENTS_ONLY": "1"}) as api:
        yield api
