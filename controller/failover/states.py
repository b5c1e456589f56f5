"""A route's failover as a state machine, and the recovery point (RPO) of an unplanned one.

Pure: no I/O, no clock (times are passed in).

A route's failover state lives in ZooKeeper (``failover/<route>``, :mod:`common.zk.layout`), so a
command that dies halfway is retried and goes on from the phase it reached. States::

    ACTIVE ──request──> REQUESTED ──> DRAINING (planned: wait for quiet source, route copies the rest)
                                 └──> SYNCING (unplanned: straight from the last checkpoints)
    DRAINING ──> SYNCING (final checkpoint and group sync, verified) ──> FAILED_OVER (route stopped)
    FAILED_OVER ──failback──> FAILING_BACK (the reverse route copies what the destination got since)
    FAILING_BACK ──planned failover of the reverse route, then restore──> ACTIVE

``ACTIVE`` is the absence of a node. A route is *stopped* (the leader drops its partitions from the
ideal state, workers stop copying it) from ``SYNCING`` on: a planned failover only stops copying
once the destination holds everything, an unplanned one at once. A second ``failover`` of a route
that is already failed over (or failing back) is refused with the current state, never run twice by
accident; a ``failover`` of a route whose state is REQUESTED, DRAINING or SYNCING resumes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ACTIVE = "ACTIVE"
REQUESTED = "REQUESTED"
DRAINING = "DRAINING"
SYNCING = "SYNCING"
FAILED_OVER = "FAILED_OVER"
FAILING_BACK = "FAILING_BACK"

STATES = (ACTIVE, REQUESTED, DRAINING, SYNCING, FAILED_OVER, FAILING_BACK)
IN_PROGRESS = frozenset({REQUESTED, DRAINING, SYNCING})
STOPPED = frozenset({SYNCING, FAILED_OVER, FAILING_BACK})  # the route copies nothing

TRANSITIONS: Mapping[str, frozenset[str]] = {
    ACTIVE: frozenset({REQUESTED}),
    REQUESTED: frozenset({DRAINING, SYNCING}),
    DRAINING: frozenset({SYNCING}),
    SYNCING: frozenset({FAILED_OVER}),
    FAILED_OVER: frozenset({FAILING_BACK, ACTIVE}),
    FAILING_BACK: frozenset({ACTIVE}),
}


class TransitionRefused(ValueError):
    """A transition the state machine does not have (e.g. a second failover of a failed-over route)."""


def check_transition(current: str, wanted: str) -> None:
    """Raises :class:`TransitionRefused` unless ``current -> wanted`` is a transition (or a no-op)."""
    if current == wanted:
        return
    if wanted not in TRANSITIONS.get(current, frozenset()):
        raise TransitionRefused(f"the route is {current}: it cannot go to {wanted}")


PLANNED_PATH = (REQUESTED, DRAINING, SYNCING, FAILED_OVER)
UNPLANNED_PATH = (REQUESTED, SYNCING, FAILED_OVER)


def phases_ahead(current: str, planned: bool) -> list[str]:
    """The phases a failover from ``current`` goes through: all of them from ``ACTIVE``; from a phase
    in progress, that phase again (each is idempotent, a retry runs it anew) and the ones after."""
    path = PLANNED_PATH if planned else UNPLANNED_PATH
    if current not in path:
        return list(path)
    if current == REQUESTED:
        return list(path[1:])
    return list(path[path.index(current) :])


def is_stopped(state: str) -> bool:
    """Whether a route in ``state`` is copied by nobody."""
    return state in STOPPED


def partition_key(topic: str, partition: int) -> str:
    """``topic/partition``: the key of per-partition maps in the state's JSON."""
    return f"{topic}/{partition}"


@dataclass(frozen=True)
class PartitionRpo:
    """What an unplanned failover left at the source of one partition."""

    topic: str
    partition: int
    source_end: int | None  # last log-end offset seen at the source (None: never seen)
    copied: int  # source offset up to which the destination holds everything
    last_copy_ms: int | None  # when the last copy was acknowledged (None: unknown)

    @property
    def lost(self) -> int | None:
        """Records known to be at the source and not at the destination (None: unknown)."""
        return None if self.source_end is None else max(0, self.source_end - self.copied)


def rpo(
    last_ends: Mapping[str, int], copied: Mapping[str, int], last_copy_ms: Mapping[str, int] | None = None
) -> list[PartitionRpo]:
    """Per partition (keys :func:`partition_key`), the RPO: the last-seen source log-end offsets
    against the source offsets whose copies reached the destination."""
    rows = []
    for key in sorted(set(last_ends) | set(copied)):
        topic, _, partition = key.rpartition("/")
        rows.append(
            PartitionRpo(topic, int(partition), last_ends.get(key), copied.get(key, 0), (last_copy_ms or {}).get(key))
        )
    return rows


def quiet(ends_before: Mapping[str, int], ends_now: Mapping[str, int]) -> bool:
    """Whether no log-end offset moved between two reads (producers on the source stopped)."""
    return dict(ends_before) == dict(ends_now)


def behind(source_ends: Mapping[str, int], committed: Mapping[str, int]) -> dict[str, int]:
    """Per partition, the records the route still has to copy (only partitions that lag)."""
    out = {}
    for key, end in source_ends.items():
        lag = end - committed.get(key, 0)
        if lag > 0:
            out[key] = lag
    return out
