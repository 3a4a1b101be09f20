"""Seed data: a large skewed network for benchmarks (`bulk`) and a small pleasant one (`demo`).

    .venv/bin/python -m devtools.seed bulk --force --users 100000 --avg-following 50 --posts 2000000
    .venv/bin/python -m devtools.seed demo [--if-empty] [--force]

Both talk to Postgres with asyncpg directly (binary COPY and set-based SQL) because the ORM
would be orders of magnitude slower at these volumes. `seed_bulk`/`seed_demo` never touch
Redis: timelines are rebuilt from Postgres on a user's first read, which is exactly the
cold-start path to exercise. The schema belongs to Alembic; the seeders only insert rows (and
TRUNCATE them with force). The command line (`__main__`) adds what a person at a terminal
needs: the dev database of `make run` when DATABASE_URL is unset, `alembic upgrade head`
first, and an emptied dev Redis after a reseed (docs/seeding.md).

Modules: `common` (connection, checks, derived counts, progress), `words` (generated text),
`bulk`, `demo`, `__main__` (the command).
"""

from devtools.seed.bulk import BULK_PASSWORD, seed_bulk
from devtools.seed.common import SeedError
from devtools.seed.demo import DEMO_PASSWORD, seed_demo

__all__ = ["BULK_PASSWORD", "DEMO_PASSWORD", "SeedError", "seed_bulk", "seed_demo"]
