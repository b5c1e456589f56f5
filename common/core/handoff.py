"""Acknowledged partition handoff: what each worker's assignment may name now, given the ideal state.

Pure: plain data in, plain data out; no I/O, no clock. This is the specification, kept as plain
loops over the whole state; :class:`controller.lead.leader_state.LeaderState` decides the same
incrementally (tests/unit/test_leader_state.py checks both agree).

The ideal state says who should copy each partition. Writing it straight into the workers'
assignments would let the new owner start from the last committed offset while the old owner
still copies (and has not yet committed) the same partition: duplicates. So a partition moves
in two steps, each a whole-state reconciliation:

1. the old owner's assignment drops it; nobody is assigned it while another *live* worker may
   still hold it;
2. once no other live worker may hold it, its ideal worker's assignment names it, and that worker
   starts exactly where the destination and the committed offsets say.

A live worker ``w`` *may hold* partition ``p`` when

- its status reports ``p`` held (ONLINE, ERROR or PAUSED);
- its assignment node names ``p`` (granted: a worker copies as soon as it applied its node, and
  reports what it holds only afterwards), unless it is leaving; or
- a write at generation ``g`` took ``p`` from its node and ``w`` has not *acknowledged* ``g``: its
  status reports a generation below ``g`` and it is not leaving. A worker publishes a generation only
  once it applied that assignment, its released partitions flushed and committed. A leaving worker
  released everything before it said so, and takes nothing any more.

The leader remembers the takings it has not seen acknowledged (:data:`Unacknowledged`) between
plans. A leader that starts without that memory rebuilds it from the assignment nodes
(:func:`unacknowledged_at_takeover`): any worker whose status does not acknowledge its node's
generation may hold any partition that no node names.

A worker that is not live blocks nothing: it crashed, or its session is gone. Before a write that
takes a partition from it, or gives another worker a partition it may hold, the leader fences its
transactional writer of the partition's route (``fence`` of :class:`Handoff`), so nothing it
writes afterwards commits; the takings it had not acknowledged are settled by that fence. On an
at-least-once route the fence does nothing: that path may copy again what the dead worker had sent
but not committed, and never loses a record.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from ferry.common.model import PartitionKey, WorkerAssignment, WorkerStatus
from ferry.common.vocabulary import HELD_STATES as HELD_STATES

Unacknowledged = dict[PartitionKey, dict[str, int]]
"""Partition -> worker -> the generation of the write that took the partition from that worker's
assignment, while the worker has not acknowledged it."""


def acknowledged(status: WorkerStatus | None, generation: int) -> bool:
    """Whether a worker whose status is ``status`` has applied the assignment written at ``generation``
    (and so released whatever that write took from it)."""
    return status is not None and (status.leaving or status.generation >= generation)


def _leaving(status: WorkerStatus | None) -> bool:
    return status is not None and status.leaving


def holders(statuses: Mapping[str, WorkerStatus]) -> dict[PartitionKey, set[str]]:
    """Partition -> workers that report holding it (ONLINE, ERROR or PAUSED)."""
    held: dict[PartitionKey, set[str]] = {}
    for worker, status in statuses.items():
        for partition, partition_status in status.partitions.items():
            if partition_status.state in HELD_STATES:
                held.setdefault(partition, set()).add(worker)
    return held


@dataclass(frozen=True)
class Handoff:
    """What the assignment nodes must name once written at ``generation``, what to fence first, and the
    takings left to acknowledge after that write."""

    assignments: dict[str, frozenset[PartitionKey]]  # every worker named in the ideal state or granted
    fence: dict[str, set[str]] = field(default_factory=dict)  # worker -> routes, fenced before the write
    unacknowledged: Unacknowledged = field(default_factory=dict)


def hand_off(
    ideal: Mapping[PartitionKey, str],
    statuses: Mapping[str, WorkerStatus],
    live: Collection[str],
    written: Mapping[str, frozenset[PartitionKey]],
    unacknowledged: Mapping[PartitionKey, Mapping[str, int]],
    generation: int,
) -> Handoff:
    """The assignment nodes to write at ``generation``, given what they name now (``written``) and the
    takings not yet acknowledged."""
    held = holders(statuses)
    granted_to = {p: w for w, partitions in written.items() for p in partitions}
    waiting: Unacknowledged = {}
    for partition, takings in unacknowledged.items():
        open_takings = {w: g for w, g in takings.items() if not acknowledged(statuses.get(w), g)}
        if open_takings:
            waiting[partition] = open_takings
    result: dict[str, set[PartitionKey]] = {w: set() for w in ideal.values()}
    fence: dict[str, set[str]] = {}
    for partition in set(ideal) | set(granted_to) | set(waiting):
        target = ideal.get(partition)
        old = granted_to.get(partition)
        takings = waiting.get(partition, {})
        may_hold = held.get(partition, set()) | set(takings)
        if old is not None and not _leaving(statuses.get(old)):
            may_hold.add(old)
        blocked = any(w != target and w in live for w in may_hold)
        grant = target if target is not None and not blocked else None
        if grant != old:
            for worker in may_hold:
                if worker != grant and worker not in live:
                    fence.setdefault(worker, set()).add(partition.route)
                    takings.pop(worker, None)
        if grant is not None:
            result.setdefault(grant, set()).add(partition)
            takings.pop(grant, None)
    for worker, partitions in written.items():
        if worker in live and not _leaving(statuses.get(worker)):
            for partition in partitions - result.get(worker, set()):
                waiting.setdefault(partition, {})[worker] = generation
    return Handoff(
        assignments={w: frozenset(ps) for w, ps in result.items()},
        fence=fence,
        unacknowledged={p: takings for p, takings in waiting.items() if takings},
    )


def unacknowledged_at_takeover(
    partitions: Iterable[PartitionKey],
    assignments: Mapping[str, WorkerAssignment],
    statuses: Mapping[str, WorkerStatus],
) -> Unacknowledged:
    """The takings a leader that starts without memory must assume: every worker whose status does not
    acknowledge its node's generation may hold any of ``partitions`` that no node names (live or not:
    one that is not live is fenced before such a partition goes to another worker)."""
    unsettled = unsettled_workers(assignments, statuses)
    if not unsettled:
        return {}
    named = {p for assignment in assignments.values() for p in assignment.partitions}
    return {p: dict(unsettled) for p in partitions if p not in named}


def unsettled_workers(
    assignments: Mapping[str, WorkerAssignment], statuses: Mapping[str, WorkerStatus]
) -> dict[str, int]:
    """Worker -> its node's generation, for the workers whose status does not acknowledge it."""
    return {
        worker: assignment.generation
        for worker, assignment in assignments.items()
        if not acknowledged(statuses.get(worker), assignment.generation)
    }
