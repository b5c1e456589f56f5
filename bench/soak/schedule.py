"""The soak's fault schedule: a seed and a duration in, the faults and when they start out (pure).

Faults are drawn as from a shuffled deck: every fault of the list comes once, in an order the seed
picks, before any comes again, so a short run still sees each kind. Each fault starts a random gap
after the previous one ends (its expected length is :data:`EXPECTED_S`, or the ZooKeeper outage
asked for), and none is planned to end within ``quiet_s`` of the run's end: the mirror's recovery
from the last fault is measured while the stream still flows.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

KILL = "kill"  # kill -9 of a worker (the supervisor starts it again)
STOP = "stop"  # SIGSTOP of a worker past its ZooKeeper session timeout, then SIGCONT
LEADER = "leader"  # kill -9 of the leading controller
ZOOKEEPER = "zookeeper"  # ZooKeeper stopped, then started again
DST_BROKER = "dst-broker"  # one destination broker restarted
SRC_BROKER = "src-broker"  # the source broker restarted
SCALE = "scale"  # a worker added, then removed
# Partitions moved between live workers faster than they acknowledge: drains, chained drains, cordons
# and a worker joining and leaving, each a second or two apart.
MOVES = "moves"
FAULTS = (KILL, STOP, LEADER, ZOOKEEPER, DST_BROKER, SRC_BROKER, SCALE, MOVES)

# How long each fault is expected to take, start to end (the ZooKeeper outage: as asked for).
EXPECTED_S: Mapping[str, float] = {
    KILL: 5.0,
    STOP: 12.0,
    LEADER: 5.0,
    ZOOKEEPER: 120.0,
    DST_BROKER: 30.0,
    SRC_BROKER: 30.0,
    SCALE: 30.0,
    MOVES: 25.0,
}


@dataclass(frozen=True)
class Planned:
    """One fault of the schedule: ``fault`` starts ``at_s`` seconds into the run."""

    at_s: float
    fault: str


def parse_faults(text: str) -> tuple[str, ...]:
    """``kill,stop,...`` -> the faults, in the order given; ValueError naming an unknown one."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in FAULTS]
    if unknown or not names:
        raise ValueError(f"unknown faults {unknown}; choose from {','.join(FAULTS)}")
    return names


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
