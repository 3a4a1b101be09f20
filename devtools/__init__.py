"""Development tooling, outside the service package and not shipped in its wheel.

- `launcher`: `make run` / `make test` (`python -m devtools.launcher run|test`).
- `provision`: embedded PostgreSQL and Redis under `.run/` when DATABASE_URL/REDIS_URL are
  unset (`python -m devtools.provision up|down|status`).
- `seed`: demo and bulk data (`python -m devtools.seed demo|bulk`, docs/seeding.md).

The service (`app/`, `jobs/`) never imports this package; this package imports the service.
"""
