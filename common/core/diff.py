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

from ferry.common.model import ExternalView, IdealState, PartitionKey, TopicKey, ViewEntry, WorkerStatus
from ferry.common.vocabulary import HELD_STATES as HELD_STATES
from ferry.common.vocabulary import PartitionState
from ferry.common.vocabulary import Problem as Problem


@dataclass(frozen=True)
class Mismatch:
    """One partition whose ideal and reported states disagree.

    ``reported_worker`` is the worker the external view names for the partition, in whatever state.
    """

    partition: PartitionKey
    problem: Problem
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
    entries: dict[TopicKey, dict[int, ViewEntry]] = {}
    for worker in sorted(statuses):
        for partition, status in statuses[worker].partitions.items():
            topic = entries.setdefault(TopicKey(partition.route, partition.topic), {})
            known = topic.get(partition.partition)
            if known is not None and (known["state"] in HELD_STATES or status.state not in HELD_STATES):
                continue
            entry = view_entry(worker, status.state, status.reason)
            topic[partition.partition] = entry
    return {
        key: ExternalView(key.route, key.topic, dict(sorted(parts.items()))) for key, parts in sorted(entries.items())
    }


def view_entry(worker: str, state: PartitionState, reason: str | None) -> ViewEntry:
    """An external view's entry for a partition ``worker`` reports in ``state`` (``reason`` when it gave one)."""
    entry = ViewEntry(worker=worker, state=state)
    if reason:
        entry["reason"] = reason
    return entry


def _reported(external: Mapping[TopicKey, ExternalView], key: PartitionKey) -> ViewEntry | None:
    view = external.get(TopicKey(key.route, key.topic))
    return None if view is None else view.partitions.get(key.partition)


def _problem(ideal_worker: str | None, reported: ViewEntry | None, live: Collection[str]) -> Problem | None:
    state = reported["state"] if reported else None
    worker = reported["worker"] if reported else None
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
    if state != PartitionState.ONLINE and state != PartitionState.PAUSED:  # paused: the operator's choice
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
                found.append(
                    Mismatch(
                        key,
                        problem,
                        ideal_worker,
                        reported["worker"] if reported else None,
                        reported.get("reason") if reported else None,
                    )
                )
    for topic_key, view in external.items():
        known = ideal.get(topic_key)
        for number, reported in view.partitions.items():
            if known is not None and 0 <= number < known.partitions:
                continue
            if reported["state"] in HELD_STATES:
                key = PartitionKey(topic_key.route, topic_key.topic, number)
                found.append(Mismatch(key, Problem.UNEXPECTED, None, reported["worker"], reported.get("reason")))
    return sorted(found, key=lambda m: m.partition)


def summarize(ideal: Mapping[TopicKey, IdealState], external: Mapping[TopicKey, ExternalView]) -> dict[str, int]:
    """Counts over the ideal partitions: ``partitions`` = ``online`` + ``offline`` + ``error`` + ``paused``.

    A partition is online only when its ideal worker reports it ONLINE, paused when its ideal
    worker reports it PAUSED, error when any worker reports it ERROR, offline otherwise.
    """
    counts = {"partitions": 0, "online": 0, "offline": 0, "error": 0, "paused": 0}
    for topic_key, state in ideal.items():
        for number in range(state.partitions):
            reported = _reported(external, PartitionKey(topic_key.route, topic_key.topic, number))
            ideal_worker = state.assignment.get(number)
            counts["partitions"] += 1
            if reported and reported["state"] == PartitionState.ERROR:
                counts["error"] += 1
            elif (
                reported
                and reported["state"] == PartitionState.ONLINE
                and ideal_worker is not None
                and reported["worker"] == ideal_worker
            ):
                counts["online"] += 1
            elif (
                reported
                and reported["state"] == PartitionState.PAUSED
                and ideal_worker is not None
                and reported["worker"] == ideal_worker
            ):
                counts["paused"] += 1
            else:
                counts["offline"] += 1
    return counts
