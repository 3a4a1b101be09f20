"""The production profile fails closed (issue 33, decision 0065), against real uvicorn
processes (tests/servers.py):

- a variable that looks like one of the service's settings but is none of them (a misspelt
  `PROFILE`, `APP_PROFILE`, a near miss of any setting's name) stops the start-up, naming it;
- a development profile bound to a non-loopback address refuses to start unless
  `ALLOW_DEVELOPMENT_ON_NETWORK` says so; the log says which profile runs;
- in production, `/healthz` and `/readyz` tell anonymous callers the status only (what is
  down and why with the metrics token); the demo page, `/static` and
  `/graphql/documents.json` are development-only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.servers import ApiServer

METRICS_TOKEN = "metrics-token-for-the-fail-closed-profile-test"
PRODUCTION = {"PROFILE": "production", "METRICS_TOKEN": METRICS_TOKEN}
DEMO_PATHS = ["/", "/static/js/api.js", "/static/app.css", "/graphql/documents.json"]
BUILD_SCRIPT = "/static/build_operations.py"  # in the demo's folder, never served


async def refused(env: dict[str, str], args: tuple[str, ...] = ()) -> str:
    """The API process exits by itself (it never serves): its log."""
    return await ApiServer(env=env, args=args).start_refused()


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"APP_PROFILE": "production"}, "APP_PROFILE"),
        ({"PROFLE": "production"}, "PROFILE"),
        ({"HYBRIDFEED_PROFILE": "production"}, "HYBRIDFEED_PROFILE"),
        ({"METRIC_TOKEN": "x" * 20}, "METRICS_TOKEN"),
        ({"SECRETKEY": "k" * 40}, "SECRET_KEY"),
    ],
)
async def test_an_unknown_variable_like_a_setting_stops_the_start(
    test_database: str, env: dict[str, str], named: str
) -> None:
    log = await refused(env)
    assert "unknown setting" in log and named in log, log


@pytest.mark.parametrize("value", ["prod", "Production", "PRODUCTION", "live"])
async def test_an_unknown_profile_stops_the_start(test_database: str, value: str) -> None:
    log = await refused({"PROFILE": value})
    assert "PROFILE" in log, log


async def test_development_on_a_public_address_is_refused_unless_asked_for(
    test_database: str,
) -> None:
    log = await refused({}, ("--host", "0.0.0.0"))
    assert "ALLOW_DEVELOPMENT_ON_NETWORK" in log, log
    env = {"ALLOW_DEVELOPMENT_ON_NETWORK": "1"}
    async with ApiServer(env=env, args=("--host", "0.0.0.0")) as api, api.http() as http:
        assert (await http.get("/healthz")).status_code == 200
        assert "PROFILE=development" in api.logs()


async def test_the_log_says_which_profile_runs(test_database: str) -> None:
    async with ApiServer() as dev:
        assert "PROFILE=development" in dev.logs()
    async with ApiServer(env=PRODUCTION) as prod:
        assert "PROFILE=production" in prod.logs()


@pytest.fixture(scope="module")
async def production(test_database: str) -> AsyncIterator[ApiServer]:
    async with ApiServer(env=PRODUCTION) as server:
        yield server


async def test_production_probes_tell_anonymous_callers_the_status_only(
    production: ApiServer,
) -> None:
    token = {"authorization": f"Bearer {METRICS_TOKEN}"}
    async with production.http() as http:
        health = await http.get("/healthz")
        ready = await http.get("/readyz")  # no worker runs here: lanes are down
        wrong = await http.get("/readyz", headers={"authorization": "Bearer nope"})
        detailed = await http.get("/readyz", headers=token)
        health_detailed = await http.get("/healthz", headers=token)
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    assert (ready.status_code, ready.json()) == (503, {"status": "unavailable"})
    assert (wrong.status_code, wrong.json()) == (503, {"status": "unavailable"})
    assert detailed.status_code == 503
    assert detailed.json()["checks"]["workers:default"] == "down"
    assert "workers:default" in detailed.json()["down"]
    assert health_detailed.json() == {"status": "ok"}


async def test_production_serves_no_demo_page_static_files_or_manifest(
    production: ApiServer,
) -> None:
    async with production.http() as http:
        for path in [*DEMO_PATHS, BUILD_SCRIPT]:
            assert (await http.get(path)).status_code == 404, path


async def test_development_keeps_the_demo_and_the_details(test_database: str) -> None:
    async with ApiServer() as dev, dev.http() as http:
        for path in DEMO_PATHS:
            assert (await http.get(path)).status_code == 200, path
        assert (await http.get(BUILD_SCRIPT)).status_code == 404
        ready = (await http.get("/readyz")).json()
    assert ready["checks"]["workers:default"] == "down"


@pytest.mark.parametrize(
    ("argv", "environ", "hosts"),
    [
        (["uvicorn", "app.web:app"], {}, ["127.0.0.1"]),
        (["uvicorn", "app.web:app", "--host", "0.0.0.0", "--host=::"], {}, ["::"]),
        (["/x/uvicorn/__main__.py", "app.web:app"], {"UVICORN_HOST": "0.0.0.0"}, ["0.0.0.0"]),
        (["uvicorn", "app.web:app", "--uds", "/run/api.sock"], {}, ["local"]),
        (
            ["gunicorn", "-b", "0.0.0.0:8000", "--bind", "unix:/run/a.sock"],
            {},
            ["0.0.0.0", "local"],
        ),
        (["gunicorn", "--bind=[::1]:8000"], {}, ["::1"]),
        (["python", "embedding.py"], {}, None),
    ],
)
def test_the_bind_address_is_read_from_the_servers_command_line(
    argv: list[str], environ: dict[str, str], hosts: list[str] | None
) -> None:
    from app.exposure import bind_hosts, is_loopback

    assert bind_hosts(argv, environ) == hosts
    assert [is_loopback(h) for h in hosts or []] == [
        h in ("127.0.0.1", "local", "::1") for h in hosts or []
    ]
