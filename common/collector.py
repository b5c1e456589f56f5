"""Python's cyclic garbage collector, set for a process that runs a copy loop (a worker, the bench's ceiling).

A copy loop over confluent-kafka allocates short-lived objects by the hundred thousand a second:
``consume()``'s ``Message`` objects (tracked by the collector), each record's header list and tuples.
The collector's young generation is walked every 700 allocations by default, and every walk also
visits what the process built at start-up: on a worker copying 100 B records the collector took about
9 % of its CPU, and 16 % of a bare confluent-kafka copy loop's (``perf``: ``gc_collect_main``,
``visit_decref``, ``visit_reachable``). None of those objects form cycles: reference counting frees
each of them at once, so the walks find nothing to free.
"""

from __future__ import annotations

import gc

# Allocations between two collections of the young generation (CPython's default: 700).
YOUNG_GENERATION_THRESHOLD = 20_000


def settle_for_copying() -> None:
    """Freezes what exists now (start-up's objects: never walked again, ``gc.freeze``) and collects the
    young generation every :data:`YOUNG_GENERATION_THRESHOLD` allocations. Cycles are still collected,
    a little later."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, older, oldest)
