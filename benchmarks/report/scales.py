"""The sizes of a run: `--scale small|medium|large`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Scale:
    name: str
    users: int
    avg_following: float  # mean followees per ordinary user (log-normal out-degree)
    celebrity: int  # followers of the planted celebrity (user 1), active and inactive
    big: int  # followers of the planted "50k" author (user 2)
    ladder: tuple[int, ...]  # followers of the fan-out curve's authors (users 3, 4, ...)
    read_ladder: tuple[int, ...]  # followees of the read curve's viewers (one viewer per k)
    active_share: float = 0.6  # users active within ACTIVE_DAYS (the rest get no timeline)
    zipf_exponent: float = 1.0
    natural_top: float = 0.4  # the generated graph's most-followed author, as a share of `big`
    pull_threshold: int = 10_000  # the constant hybrid's FANOUT_PULL_THRESHOLD
    push_threshold: int = 8_000
    # The strategy comparison's post stream: ordinary authors' posts plus celebrity posts.
    stream_posts: int = 200
    stream_celebrity_posts: int = 2
    stream_seconds: float = 10.0
    reads: int = 400  # feed reads per strategy (closed loop)
    read_clients: int = 4
    # The celebrity burst: celebrity posts every `burst_every` s while ordinary authors post.
    burst_posts: int = 10
    burst_every: float = 3.0
    burst_ordinary_rate: float = 10.0  # ordinary posts per second during the burst
    sweep: tuple[int, ...] = (1_000, 10_000, 100_000)  # FANOUT_PULL_THRESHOLD values
    sweep_posts: int = 100
    burst_variants: tuple[str, ...] = ("push", "push-lanes", "hybrid", "control")
    workers: int = 1  # ARQ worker processes per lane
    seed: int = 25
    reads_per_viewer_sample: int = 30  # pulled posts checked through the API, per post
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def follows_estimate(self) -> int:
        return int(self.users * self.avg_following) + self.celebrity + self.big


SCALES = {
    # The smoke test's size (tests/benchmarks): everything runs, in about a minute.
    "small": Scale(
        name="small",
        users=3_000,
        avg_following=10,
        celebrity=2_000,
        big=500,
        ladder=(50, 200, 1_000),
        read_ladder=(0, 1, 10, 30),
        pull_threshold=400,
        push_threshold=300,
        stream_posts=40,
        stream_celebrity_posts=2,
        stream_seconds=4.0,
        reads=120,
        read_clients=2,
        burst_posts=4,
        burst_every=1.0,
        burst_ordinary_rate=6.0,
        sweep=(100, 400, 2_500),
        sweep_posts=30,
        reads_per_viewer_sample=10,
    ),
    # The size: 1M users, 50M follows, the 500k and 50k authors.
    "medium": Scale(
        name="medium",
        users=1_000_000,
        avg_following=50,
        celebrity=500_000,
        big=50_000,
        ladder=(1_000, 5_000, 20_000, 100_000),
        read_ladder=(0, 1, 10, 50, 200),
        stream_posts=200,
        stream_celebrity_posts=2,
        stream_seconds=20.0,
        reads=600,
        burst_posts=6,
        burst_every=4.0,
        burst_ordinary_rate=10.0,
        burst_variants=("push", "hybrid", "control"),
        sweep=(1_000, 10_000, 100_000),
        sweep_posts=100,
    ),
    "large": Scale(
        name="large",
        users=5_000_000,
        avg_following=100,
        celebrity=2_000_000,
        big=50_000,
        ladder=(1_000, 10_000, 100_000, 500_000),
        read_ladder=(0, 1, 10, 50, 200),
        stream_posts=600,
        stream_seconds=40.0,
        reads=2_000,
        burst_posts=10,
        burst_every=4.0,
        sweep=(1_000, 10_000, 100_000, 1_000_000),
        sweep_posts=300,
    ),
}


def scale_named(name: str, **overrides: object) -> Scale:
    """A named scale, with fields overridden (`--users`, `--avg-following` ...)."""
    base = SCALES[name]
    given = {k: v for k, v in overrides.items() if v is not None}
    return replace(base, **given) if given else base  # type: ignore[arg-type]
