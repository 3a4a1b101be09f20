"""The hub's heap freezer (decision 0039): past its threshold the process's long-lived
objects leave the collector's walks; after enough churn they are thawed and collected."""

from __future__ import annotations

import gc
import weakref

from app.realtime.heap import CollectorPause, HeapFreezer


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


def test_the_collector_is_held_off_while_broadcasts_run_and_back_after_the_last() -> None:
    pause = CollectorPause()
    assert gc.isenabled()
    try:
        with pause:
            assert not gc.isenabled()
            with pause:  # a second post's broadcast overlapping the first
                assert not gc.isenabled()
            assert not gc.isenabled()  # the first one is still writing
        assert gc.isenabled() and pause.depth == 0
        gc.disable()  # someone else turned it off: not turned back on by the pause
        with pause:
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
