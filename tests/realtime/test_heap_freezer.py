"""The hub's heap freezer (decision 0039): past its threshold the process's long-lived
objects leave the collector's walks; after enough churn they are thawed and collected."""

from __future__ import annotations

import gc
import weakref

from app.realtime.hub import HeapFreezer


class Node:
    me: object = None


def test_the_heap_is_frozen_past_the_threshold_and_thawed_after_churn() -> None:
    heap = HeapFreezer(min_subscribers=2)
    try:
        heap.tick(1)
        assert gc.get_freeze_count() == 0  # below the threshold: the collector as usual

        cycle = Node()
        cycle.me = cycle  # what a closed socket leaves: a reference cycle
        alive = weakref.ref(cycle)
        heap.tick(2)
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None  # frozen: even a full collection leaves it (the price)

        heap.dropped = 1  # half the frozen subscribers went away (the hub counts them)
        heap.tick(1)
        assert alive() is None  # thawed and collected, in one pause
        assert gc.get_freeze_count() == 0  # and below the threshold now: not frozen again
    finally:
        heap.thaw()
        gc.unfreeze()


def test_zero_turns_it_off() -> None:
    heap = HeapFreezer(min_subscribers=0)
    heap.tick(100_000)
    assert gc.get_freeze_count() == 0
