"""The fence: every use of an upstream library's internals, one adapter module per upstream.

Strawberry (strawberry.py), graphql-core (graphql.py), uvicorn (uvicorn.py), `websockets`
(websockets.py), Starlette (starlette.py) and asyncio (asyncio.py); prometheus_client's are
in app.realtime.prometheus_internals (below app/api, where the realtime metrics need them).
Each name exported here has a test that fails when its upstream changes it
(tests/api/upstream/test_fast_adapter.py, tests/api/upstream/test_upstream_fence.py;
`make canary` runs them against the newest releases). Outside these modules no code imports
an upstream's internal module or private name (the `upstream-internals` contract in
.importlinter) or reads a private attribute (ruff's SLF001): docs/decisions/0071.
"""
