"""The soak's fault schedule: a seed and a duration in, the faults and when they start out (pure).

Faults are drawn as from a shuffled deck: every fault of the list comes once, in an order the seed
picks, before any comes again, so a short run still sees each kind. Each fault starts a random gap
after the previous one ends (its expected length is the fault table's, :mod:`.faults`, or the
ZooKeeper outage asked for), and none is planned to end within ``quiet_s`` of the run's end: the
mirror's recovery from the last fault is measured while the stream still flows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ferry.bench.soak.faults import EXPECTED_S


@dataclass(frozen=True)
class Planned:
    """One fault of the schedule: ``fault`` starts ``at_s`` seconds into the run."""

    at_s: float
    fault: str


def plan(
    seed: int,
    duration_s: float,
    faults: Sequence[str],
    gap_s: tuple[float, float] = (30.0, 60.0),
    quiet_s: float = 20.0,
    expected_s: Mapping[str, float] = EXPECTED_S,
) -> list[Planned]:
    """The faults of a run of ``duration_s`` seconds: each starts a gap drawn from ``gap_s`` after
    the previous one is expected to end, and is expected to end ``quiet_s`` before the run does."""
    low, high = gap_s
    if not faults or low < 0 or high < low:
        return []
    draw = random.Random(seed)
    deck: list[str] = []
    planned: list[Planned] = []
    free_from = 0.0
    while True:
        if not deck:
            deck = list(faults)
            draw.shuffle(deck)
        fault = deck.pop()
        at_s = free_from + draw.uniform(low, high)
        ends = at_s + expected_s.get(fault, 0.0)
        if ends > duration_s - quiet_s:
            return planned
        planned.append(Planned(round(at_s, 1), fault))
        free_from = ends
