"""What the leader should write, given what it read: the whole desired state, from plain data.

Pure: no I/O, no clock (``now`` comes in as a number). The controller reads a
:class:`controller.lead.store.Snapshot`, calls :func:`plan`, and writes the differences (deleting
the assignment nodes the plan does not name).

Rules (see docs/design.md):

- a live worker whose status says ``leaving`` gets nothing and keeps nothing;
- a worker that vanished keeps its partitions (is *retained*) until ``failover_delay_s`` after the
  leader first saw it gone (``departed_at``), then they go to the least-loaded live workers;
- partitions without a (live or retained) worker go to the least-loaded live workers;
- with ``rebalance`` true, the fewest partitions move so live workers' counts differ by at most one;
- each worker's assignment follows the acknowledged two-step handoff of :mod:`common.core.handoff`
  (a partition goes to its new owner only once no other live worker may hold it; the takings not
  yet acknowledged are the leader's memory, like ``departed_at``);
- a live worker always has an assignment node; one that is not live keeps a node only while it
  names partitions (emptied first, then deleted; never created empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ferry.common.core import assignment, handoff
from ferry.common.core.diff import external_views
from ferry.common.model import ExternalView, IdealState, PartitionKey, TopicKey, WorkerStatus


@dataclass(frozen=True)
class Plan:
    ideal: dict[TopicKey, IdealState]
    assignments: dict[str, frozenset[PartitionKey]]  # every assignment node there must be, with its partitions
    external: dict[TopicKey, ExternalView]
    departed_at: dict[str, float]  # the leader's memory, updated
    retained_until: dict[str, float] = field(default_factory=dict)  # worker -> when its partitions move
    moved: int = 0
    fence: dict[str, set[str]] = field(default_factory=dict)  # worker -> routes, fenced before the write
    unacknowledged: handoff.Unacknowledged = field(default_factory=dict)  # the leader's memory, updated


def active_workers(live: Mapping[str, object], statuses: Mapping[str, WorkerStatus]) -> set[str]:
    """Live workers that may receive partitions: registered and not leaving."""
    return {w for w in live if not (w in statuses and statuses[w].leaving)}


def plan(
    ideal: Mapping[TopicKey, IdealState],
    live: Mapping[str, object],
    statuses: Mapping[str, WorkerStatus],
    written: Mapping[str, frozenset[PartitionKey]],
    departed_at: Mapping[str, float],
    now: float,
    failover_delay_s: float,
    rebalance: bool = False,
    unacknowledged: Mapping[PartitionKey, Mapping[str, int]] | None = None,
    generation: int = 1,
) -> Plan:
    """The desired ideal states, worker assignments and external views.

    ``written`` is what the assignment nodes hold now (worker -> partitions), ``unacknowledged`` the
    takings the leader has not seen acknowledged, ``generation`` the one this plan is written at. The plan's
    ``assignments`` are the nodes there must be once it is written, with what they hold; a node
    it does not name is deleted. A worker reads an absent node as an empty one, so:

    - a live worker always has a node, empty when it should copy nothing (it is always told to stop);
    - a worker that is not live (it died, left, or only its live node vanished) has a node only
      while it is granted partitions or its node still names some: that node is first emptied,
      deleted at the next plan (deleted nodes are written among the gains, so a node that named
      partitions is emptied first to keep every prefix of a batch safe), and never created empty.
    """
    active = active_workers(live, statuses)
    # A worker that said it leaves is never retained, even once its live node is gone.
    leaving = (set(live) - active) | {w for w, status in statuses.items() if status.leaving}
    current: dict[PartitionKey, str] = {}
    partitions: list[PartitionKey] = []
    for key, state in ideal.items():
        for p in range(state.partitions):
            partitions.append(PartitionKey(key.route, key.topic, p))
        for p, worker in state.assignment.items():
            if p < state.partitions:
                current[PartitionKey(key.route, key.topic, p)] = worker

    departed = {w: t for w, t in departed_at.items() if w not in live}
    for worker in set(current.values()):
        if worker not in live:
            departed.setdefault(worker, now)
    retained_until = {
        w: t + failover_delay_s for w, t in departed.items() if t + failover_delay_s > now and w not in leaving
    }
    desired = assignment.assign(partitions, current, active, retained=set(retained_until))
    if rebalance:
        desired = assignment.rebalance(desired, active)

    # One pass over the partitions, not one per topic: planning stays linear in the partitions.
    by_topic: dict[TopicKey, dict[int, str]] = {key: {} for key in ideal}
    for partition, worker in desired.items():
        by_topic[TopicKey(partition.route, partition.topic)][partition.partition] = worker
    new_ideal = {
        key: IdealState(route=key.route, topic=key.topic, partitions=state.partitions, assignment=by_topic[key])
        for key, state in ideal.items()
    }
    handed = handoff.hand_off(desired, statuses, set(live), written, unacknowledged or {}, generation)
    per_worker = handed.assignments
    assignments: dict[str, frozenset[PartitionKey]] = {}
    for worker in set(live) | set(written) | set(per_worker):
        granted = per_worker.get(worker, frozenset())
        if worker in live or granted or written.get(worker):
            assignments[worker] = granted
    # Views only for topics Ferry mirrors: a partition of a deleted topic that a worker still
    # reports shows up in validation, not in a view of its own.
    views = {k: v for k, v in external_views(statuses).items() if k in ideal}
    for key in ideal:
        views.setdefault(key, ExternalView(route=key.route, topic=key.topic))
    # Forget workers that hold nothing any more.
    holding = set(desired.values())
    departed = {w: t for w, t in departed.items() if w in holding}
    return Plan(
        ideal=new_ideal,
        assignments=assignments,
        external=views,
        departed_at=departed,
        retained_until={w: t for w, t in retained_until.items() if w in holding},
        moved=len(assignment.moved(current, desired)),
        fence=handed.fence,
        unacknowledged=handed.unacknowledged,
    )
