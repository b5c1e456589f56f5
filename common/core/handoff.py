"""Two-step partition handoff: what each worker must copy *now*, given the ideal state.

Pure: plain data in, plain data out; no I/O, no clock.

The ideal state says who should copy each partition. Writing it straight into the workers'
assignments would let the new owner start from the last committed offset while the old owner
still copies (and has not yet committed) the same partition: duplicates. So a partition moves
in two steps, each a whole-state reconciliation:

1. the old owner's assignment drops it; nobody is assigned it while the old owner still
   reports it (ONLINE or ERROR in its status);
2. once the old owner reports it released (flushed, committed, unassigned), the new owner's
   assignment gets it, and the new owner starts exactly at the committed offset.

A holder that is not live cannot release anything (it crashed, or its session is gone and it
stopped copying), so the new owner gets the partition at once; that path may copy again what
the dead worker had sent but not committed, and never loses a record.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ferry.common.model import PartitionKey, WorkerStatus
from ferry.common.vocabulary import HELD_STATES as HELD_STATES


def holders(statuses: Mapping[str, WorkerStatus]) -> dict[PartitionKey, set[str]]:
    """Partition -> workers that report holding it (ONLINE or ERROR)."""
    held: dict[PartitionKey, set[str]] = {}
    for worker, status in statuses.items():
        for partition, partition_status in status.partitions.items():
            if partition_status.state in HELD_STATES:
                held.setdefault(partition, set()).add(worker)
    return held


def worker_assignments(
    ideal: Mapping[PartitionKey, str],
    statuses: Mapping[str, WorkerStatus],
    live: Collection[str],
) -> dict[str, frozenset[PartitionKey]]:
    """Worker -> the partitions it must copy now (every worker named in ``ideal`` gets an entry).

    A partition is withheld from its ideal worker while another *live* worker still holds it.
    """
    held = holders(statuses)
    result: dict[str, set[PartitionKey]] = {}
    for partition, worker in ideal.items():
        others = {holder for holder in held.get(partition, ()) if holder != worker and holder in live}
        bucket = result.setdefault(worker, set())
        if not others:
            bucket.add(partition)
    return {worker: frozenset(partitions) for worker, partitions in result.items()}
