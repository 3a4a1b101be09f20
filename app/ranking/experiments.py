"""Experiments: which ranking model version a viewer's new session is ranked with.

RANKING_EXPERIMENT (empty: none, every viewer gets RANKING_MODEL) is either
    "<name>:<salt>:<arm>=<version>:<weight>,<arm>=<version>:<weight>,..."
e.g. "gbm-vs-formula:s1:control=formula-1:50,treatment=gbm-1:50", or the same as JSON:
    {"name": ..., "salt": ..., "arms": [{"name": ..., "model": ..., "weight": ...}, ...]}
A viewer's arm is a deterministic hash of (salt, viewer id) over the weights: the same in
every process and every run, decided when a session is created and stored with it (app.feed
.sessions.SessionRanking), so a model reload or a new weight split never moves an open
session. A new salt reshuffles viewers; a new weight split moves only the viewers whose
bucket changes arm.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

# A version or arm name goes into Redis session heads and metric labels: plain characters.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True)
class Arm:
    name: str
    model: str  # the model version its viewers are ranked with
    weight: float


@dataclass(frozen=True)
class Experiment:
    name: str
    salt: str
    arms: tuple[Arm, ...]

    def bucket(self, viewer_id: int) -> float:
        """The viewer's point in [0, 1): blake2b of (salt, viewer), not Python's hash (salted
        per process)."""
        digest = hashlib.blake2b(f"{self.salt}:{int(viewer_id)}".encode(), digest_size=8)
        return int.from_bytes(digest.digest(), "big") / 2**64

    def arm_of(self, viewer_id: int) -> Arm:
        point = self.bucket(viewer_id) * sum(a.weight for a in self.arms)
        upto = 0.0
        for arm in self.arms:
            upto += arm.weight
            if point < upto:
                return arm
        return self.arms[-1]  # float rounding at the very top


def parse_experiment(text: str) -> Experiment | None:
    """RANKING_EXPERIMENT's value as an Experiment (None when empty); ValueError saying what
    is wrong otherwise."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            raw = json.loads(text)
            name, salt = str(raw["name"]), str(raw["salt"])
            arms = [(str(a["name"]), str(a["model"]), a["weight"]) for a in raw["arms"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"not an experiment ({exc}): JSON wants name, salt and arms, each arm "
                "name, model and weight"
            ) from None
    else:
        parts = text.split(":", 2)
        if len(parts) != 3:
            raise ValueError(
                "not an experiment: want '<name>:<salt>:<arm>=<version>:<weight>,...' or JSON"
            )
        name, salt, listed = parts
        arms = []
        for item in listed.split(","):
            arm, sep, rest = item.strip().partition("=")
            model, colon, weight = rest.rpartition(":")
            if not sep or not colon:
                raise ValueError(f"arm {item!r} is not '<arm>=<version>:<weight>'")
            arms.append((arm.strip(), model.strip(), weight.strip()))
    if not NAME.match(name):
        raise ValueError(f"experiment name {name!r}: letters, digits, '.', '_', '-' only")
    if not salt:
        raise ValueError("the experiment's salt is empty")
    parsed = []
    for arm, model, weight in arms:
        for what, value in (("arm", arm), ("model version", model)):
            if not NAME.match(value):
                raise ValueError(f"{what} {value!r}: letters, digits, '.', '_', '-' only")
        try:
            share = float(weight)
        except (TypeError, ValueError):
            raise ValueError(f"arm {arm!r}: weight {weight!r} is not a number") from None
        if not 0 <= share <= 1_000_000:
            raise ValueError(f"arm {arm!r}: weight {share} outside [0, 1000000]")
        parsed.append(Arm(arm, model, share))
    if len(parsed) < 1:
        raise ValueError("an experiment needs at least one arm")
    if len({a.name for a in parsed}) != len(parsed):
        raise ValueError("arm names must differ")
    if sum(a.weight for a in parsed) <= 0:
        raise ValueError("the arms' weights add up to 0")
    return Experiment(name, salt, tuple(parsed))
