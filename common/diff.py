"""Where the ideal state (what should be copied, and by whom) and the external view (what workers
report) disagree.

Pure: plain data in, plain data out; no I/O, no clock.

:func:`external_views` builds the external view from the workers' statuses; :func:`compare`
lists one :class:`Mismatch` per partition that is not ONLINE on its ideal worker, with the most
important problem (see :class:`Problem`); :func:`summarize` counts partitions by state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from common.model import ExternalView, IdealState, PartitionKey, PartitionState, TopicKey, WorkerStatus

HELD_STATES = frozenset({PartitionState.ONLINE, PartitionState.ERROR})


class Problem:
    """What is wrong with a partition, most important first (a partition reports only the first)."""

    ERROR = "error"  # a worker reports it ERROR (the reason is carried)
    UNASSIGNED = "unassigned"  # the ideal state has no worker for it
    WORKER_DEAD = "worker_dead"  # its ideal worker is not live
    WRONG_WORKER = "wrong_worker"  # another worker than the ideal one reports it ONLINE
    MISSING = "missing"  # no worker reports it ONLINE or ERROR
    NOT_ONLINE = "not_online"  # its ideal worker reports it OFFLINE
    UNEXPECTED = "unexpected"  # a worker reports it ONLINE or ERROR, but the ideal state does not have it


@dataclass(frozen=True)
class Mismatch:
    """One partition whose ideal and reported states disagree.

    ``reported_worker`` is the worker the external view names for the partition, in whatever state.
    """

    partition: PartitionKey
    problem: str  # a Problem value
    ideal_worker: str | None
    reported_worker: str | None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partition": str(self.partition),
            "problem": self.problem,
            "idealWorker": self.ideal_worker,
            "reportedWorker": self.reported_worker,
        }
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def external_views(statuses: Mapping[str, WorkerStatus]) -> dict[TopicKey, ExternalView]:
    """Topic -> external view built from the workers' statuses.

    Per partition, a worker reporting it ONLINE or ERROR wins over one reporting it OFFLINE; among
    equals, the lowest worker id wins.
    """
    entries: dict[TopicKey, dict[int, dict[str, str]]] = {}
    for worker in sorted(statuses):
        for partition, status in statuses[worker].partitions.items():
            topic = entries.setdefault(TopicKey(partition.route, partition.topic), {})
            known = topic.get(partition.partition)
            if known is not None and (known["state"] in HELD_STATES or status.state not in HELD_STATES):
                continue
            entry = {"worker": worker, "state": status.state}
            if status.reason:
                entry["reason"] = status.reason
            topic[partition.partition] = entry
    return {
        key: ExternalView(key.route, key.topic, dict(sorted(parts.items())))
        for key, parts in sorted(entries.items())
    }


def _reported(external: Mapping[TopicKey, ExternalView], key: PartitionKey) -> Mapping[str, str] | None:
    view = external.get(TopicKey(key.route, key.topic))
    return None if view is None else view.partitions.get(key.partition)


def _problem(ideal_worker: str | None, reported: Mapping[str, str] | None, live: Collection[str]) -> str | None:
    state = reported.get("state") if reported else None
    worker = reported.get("worker") if reported else None
    if state == PartitionState.ERROR:
        return Problem.ERROR
    if ideal_worker is None:
        return Problem.UNASSIGNED
    if ideal_worker not in live:
        return Problem.WORKER_DEAD
    if state in HELD_STATES and worker != ideal_worker:
        return Problem.WRONG_WORKER
    if state not in HELD_STATES and worker != ideal_worker:
        return Problem.MISSING
    if state != PartitionState.ONLINE:
        return Problem.NOT_ONLINE
    return None


def compare(
    ideal: Mapping[TopicKey, IdealState],
    external: Mapping[TopicKey, ExternalView],
    live: Collection[str],
) -> list[Mismatch]:
    """Every partition that is not ONLINE on its live ideal worker, plus unexpected ones; sorted by partition.

    One mismatch per partition: the first problem in the order error, unassigned, worker_dead,
    wrong_worker, missing, not_online. Partitions reported ONLINE or ERROR but not in the ideal
    state (unknown topic, or partition beyond the topic's count) are ``unexpected``.
    """
    found: list[Mismatch] = []
    for topic_key, state in ideal.items():
        for number in range(state.partitions):
            key = PartitionKey(topic_key.route, topic_key.topic, number)
            ideal_worker = state.assignment.get(number)
            reported = _reported(external, key)
            problem = _problem(ideal_worker, reported, live)
            if problem is not None:
                found.append(Mismatch(
                    key, problem, ideal_worker,
                    reported.get("worker") if reported else None,
                    reported.get("reason") if reported else None,
                ))
    for topic_key, view in external.items():
        known = ideal.get(topic_key)
        for number, reported in view.partitions.items():
            if known is not None and 0 <= number < known.partitions:
                continue
            if reported.get("state") in HELD_STATES:
                key = PartitionKey(topic_key.route, topic_key.topic, number)
                found.append(Mismatch(key, Problem.UNEXPECTED, None, reported.get("worker"), reported.get("reason")))
    return sorted(found, key=lambda m: m.partition)


def summarize(ideal: Mapping[TopicKey, IdealState], external: Mapping[TopicKey, ExternalView]) -> dict[str, int]:
    """Counts over the ideal partitions: ``partitions`` = ``online`` + ``offline`` + ``error``.

    A partition is online only when its ideal worker reports it ONLINE, error when any worker
    reports it ERROR, offline otherwise.
    """
    counts = {"partitions": 0, "online": 0, "offline": 0, "error": 0}
    for topic_key, state in ideal.items():
        for number in range(state.partitions):
            reported = _reported(external, PartitionKey(topic_key.route, topic_key.topic, number))
            ideal_worker = state.assignment.get(number)
            counts["partitions"] += 1
            if reported and reported.get("state") == PartitionState.ERROR:
                counts["error"] += 1
            elif (reported and reported.get("state") == PartitionState.ONLINE
                  and ideal_worker is not None and reported.get("worker") == ideal_worker):
                counts["online"] += 1
            else:
                counts["offline"] += 1
    return counts
