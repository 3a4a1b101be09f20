"""Queue names (lanes) and job names. Key strings for ARQ queues are built only here.

A lane is an ARQ queue with its own workers: big authors' batches go to BIG so that one
celebrity post cannot sit in front of ordinary posts. Lag is measured per lane in seconds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

DEFAULT = "arq:queue"  # ARQ's own default queue name: splitters, small batches, graph jobs
BIG = "arq:queue:big"  # FanoutBatch jobs of authors with >= BIG_AUTHOR_FOLLOWERS followers
LANES = {"default": DEFAULT, "big": BIG}
# Not a queue: the lane label of a PULL author's post in the post-to-visible metrics (its
# followers read it from posts:{author}; no batch carries it).
PULL_LABEL = "pull"


def label(queue: str) -> str:
    """A lane's metric label ("default", "big") from its queue name."""
    return next((name for name, q in LANES.items() if q == queue), "default")


# Job (function) names, shared by the relay, the workers and the tests.
FANOUT_POST = "fanout_post"
FANOUT_BATCH = "fanout_batch"
FANOUT_PAGES = "fanout_pages"  # continuation of a split past SPLIT_PAGES batches
BACKFILL_FOLLOW = "backfill_follow"
CLEANUP_AUTHOR = "cleanup_author"
POST_CHANGED = "post_changed"

# enqueue(function, *args, job_id=..., lane=...): how services and the relay schedule jobs
# (ARQ's enqueue_job behind it; tests record calls instead).
Enqueue = Callable[..., Awaitable[Any]]
