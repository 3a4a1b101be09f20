"""The probe's own knobs (env `PROBE_*`), apart from the service's settings: the probe may run
on another machine against any deployment, so it needs none of the service's secrets.

Only `PROBE_ENABLED` concerns the service side: whether `make run` (devtools.launcher)
starts the probe next to the API and the workers."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.config import RUN_DIR, canary_handle_prefix, dev_secret


class ProbeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PROBE_", extra="ignore")

    # `make run` starts the probe: unset = yes unless PROFILE=production; true/false decide.
    enabled: bool | None = None
    # The canaries' password; empty = one generated once into RUN_DIR/probe_password (0600).
    password: str = ""
    # Canary handles are this prefix and a number. Empty: the deployment's secret prefix,
    # derived from the service's SECRET_KEY (app.config.canary_handle_prefix; decision 0065),
    # which is what makes the accounts canaries (hidden from search, followed by canaries
    # only, their posts pruned). A probe without the service's settings is given it here
    # (`python -m app.probe --show-prefix` prints it where SECRET_KEY is set).
    handle_prefix: str = Field(default="", pattern=r"^([a-z0-9_]{1,27})?$")
    # Canaries in the ring (each follows the next); one change per canary and round.
    canaries: int = Field(default=4, ge=3, le=20)
    # A round starts this often (at once when the previous one took longer).
    interval_seconds: float = Field(default=15.0, gt=0)
    # An acknowledged post not in its canary follower's feed by then is LOST.
    freshness_seconds: float = Field(default=5.0, gt=0)
    # Posts per feed page the canaries read (small: next pages are exercised every round).
    page_size: int = Field(default=3, ge=1, le=100)


@lru_cache
def get_probe_settings() -> ProbeSettings:
    return ProbeSettings()


def canary_prefix(settings: ProbeSettings, service_secret: Callable[[], str]) -> str:
    """PROBE_HANDLE_PREFIX, or the deployment's secret prefix from the service's SECRET_KEY
    (`service_secret`, read only then: under `make run`, the one in RUN_DIR)."""
    return settings.handle_prefix or canary_handle_prefix(service_secret())


def canary_password(settings: ProbeSettings) -> str:
    """PROBE_PASSWORD, or the one kept under RUN_DIR (made once, private to this machine)."""
    return settings.password or dev_secret(RUN_DIR / "probe_password")
