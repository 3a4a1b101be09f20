"""The canaries: N accounts, each following the next (a ring), made once and reused.

Sign-ups are budgeted per client address (RATE_LIMIT_SIGNUPS_PER_IP_PER_HOUR, 20 by default)
and every log-in is an Argon2 hash, so the probe logs in once per process (signing up only
the accounts that do not exist) and keeps the tokens (TOKEN_TTL_SECONDS, 7 days) until one is
refused. A round cut short may leave a block or an unfollow behind: `repair` restores every
edge of the ring (unblock, follow: both set a state, so repeating them changes nothing)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from app.probe.client import Api, GraphQLFailure, ProbeError, Updates

log = logging.getLogger("app.probe")


@dataclass
class Canary:
    handle: str
    user_id: str = ""
    token: str = ""
    updates: Updates | None = None


class Ring:
    def __init__(self, api: Api, prefix: str, size: int, password: str) -> None:
        self.api = api
        self.password = password
        self.canaries = [Canary(f"{prefix}{i}") for i in range(size)]
        self.needs_repair = True  # the previous process may have stopped mid-round

    def followee(self, index: int) -> Canary:
        """Whom canary `index` follows: the next one around the ring."""
        return self.canaries[(index + 1) % len(self.canaries)]

    def forget_tokens(self) -> None:
        """A token was refused (logged out, expired, the database was reset): log in anew."""
        for canary in self.canaries:
            canary.token = ""
        self.needs_repair = True

    async def ready(self) -> None:
        """Every canary logged in (signed up if new), the ring whole, every socket open."""
        for canary in self.canaries:
            if not canary.token:
                await self._sign_in(canary)
        if self.needs_repair:
            for i, canary in enumerate(self.canaries):
                handle = self.followee(i).handle
                await self.api.call("Unblock", {"handle": handle}, canary.token)
                await self.api.call("Follow", {"handle": handle}, canary.token)
            self.needs_repair = False
        for canary in self.canaries:
            if canary.updates is None or canary.updates.closed:
                if canary.updates is not None:
                    log.warning("@%s's feedUpdates socket ended: %s", canary.handle,
                                canary.updates.error)  # fmt: skip
                    await canary.updates.close()
                canary.updates = None
                canary.updates = await Updates.open(self.api, canary.token)

    async def _sign_in(self, canary: Canary) -> None:
        variables = {"handle": canary.handle, "password": self.password}
        try:
            answer = await self.api.call("LogIn", variables)
            payload = answer.data["logIn"]
        except GraphQLFailure as failure:
            if failure.code != "UNAUTHENTICATED":
                raise
            try:
                answer = await self.api.call(
                    "SignUp", {**variables, "displayName": f"Probe canary {canary.handle}"}
                )
            except GraphQLFailure as refused:
                if refused.code == "CONFLICT":
                    raise ProbeError(
                        f"@{canary.handle} exists with another password: set PROBE_PASSWORD "
                        "(--password) to the canaries' own, or pick another PROBE_HANDLE_PREFIX"
                    ) from refused
                raise
            payload = answer.data["signUp"]
            log.info("signed up canary @%s", canary.handle)
        canary.token = payload["token"]
        canary.user_id = payload["user"]["id"]

    async def close(self) -> None:
        for canary in self.canaries:
            if canary.updates is not None:
                await canary.updates.close()
                canary.updates = None
