"""The leader state: the leader's in-memory copy of Ferry's ZooKeeper state, and the incremental planner over it.

Pure: no I/O, no clock (``now`` comes in as a number). The reconciler
(:class:`controller.lead.reconciler.Reconciler`) builds it from one snapshot of ZooKeeper at the
first reconcile of a lead (``LeaderState(store.snapshot(), departed_at)``), feeds it what the
watches saw (:meth:`LeaderState.set_live`, :meth:`LeaderState.set_status`) and what the lead wrote
itself (:meth:`LeaderState.put_topic`), asks :meth:`LeaderState.plan` for the changes to write, and
records them with :meth:`LeaderState.applied` once ZooKeeper took them. A failed write makes the
reconciler drop the leader state and build it again.

States (no state field: what an event touched is kept in ``_touched``, ``_touched_topics`` and
``_check_workers``)::

    SETTLED --set_live / set_status / put_topic--> TOUCHED   the next plan looks at what changed
    TOUCHED --plan()--> SETTLED      returns the Changes; the mirrors still hold the old values
    any     --applied(changes)--> same state; the mirrors hold the changes ZooKeeper took
    any     --> (dropped)            after a failed write, or when the lead ends

It decides exactly as ``plan`` of ``tests/oracles/planner.py`` (the specification, kept as plain loops;
tests/unit/test_leader_state.py checks both agree after random events), but a plan costs what
the events since the last one touched, not the whole state:

- a worker's status change recomputes the handoff of the partitions in its old and new status, and
  (when its generation changed) of those it had not acknowledged giving up, and the external views
  of their topics;
- a new, grown or deleted topic places (with :func:`common.core.assignment.assign`, with the other
  topics' loads as ``base_load``) only its own partitions;
- a worker whose partitions must move (retention over, or leaving) places only those;
- a rebalance runs :func:`common.core.assignment.rebalance` over every partition (O(P log P));
- with ``rates`` (balance by load: :mod:`controller.lead.load_balance`), placement is
  :func:`common.core.assignment.assign_by_load` (the workers' loads summed over their reports, O(P)),
  and ``moves`` computed from the leader state are applied as given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ferry.common.core import assignment
from ferry.common.core.assignment import Rate
from ferry.common.core.diff import Mismatch, compare, summarize, view_entry
from ferry.common.core.handoff import acknowledged, unsettled_workers
from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionStatus,
    TopicKey,
    ViewEntry,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
)
from ferry.common.vocabulary import HELD_STATES
from ferry.controller.lead.store import Snapshot


def _topic(partition: PartitionKey) -> TopicKey:
    return TopicKey(partition.route, partition.topic)


@dataclass
class Changes:
    """What a plan wants written (only what differs from the mirrors), and the planner's memory."""

    ideal: dict[TopicKey, IdealState] = field(default_factory=dict)  # set
    assignments: dict[str, frozenset[PartitionKey]] = field(default_factory=dict)  # create or set
    delete_assignments: set[str] = field(default_factory=set)
    views: dict[TopicKey, ExternalView] = field(default_factory=dict)  # create or set
    delete_views: set[TopicKey] = field(default_factory=set)
    departed_at: dict[str, float] = field(default_factory=dict)
    retained_until: dict[str, float] = field(default_factory=dict)
    # Worker -> routes whose transactional writers must be fenced before these changes are written:
    # partitions a worker that is not live held or was assigned go to another worker.
    fence: dict[str, set[str]] = field(default_factory=dict)
    moved: int = 0

    def empty(self) -> bool:
        return not (self.ideal or self.assignments or self.delete_assignments or self.views or self.delete_views)


class LeaderState:
    """See the module docstring. Every public attribute mirrors a ZooKeeper node as last read or written."""

    def __init__(self, snapshot: Snapshot, departed_at: Mapping[str, float] | None = None) -> None:
        # Mirrors of ZooKeeper.
        self.live: dict[str, WorkerInfo] = dict(snapshot.live)
        self.statuses: dict[str, WorkerStatus] = dict(snapshot.statuses)
        self.ideal: dict[TopicKey, IdealState] = dict(snapshot.ideal)
        self.ideal_versions: dict[TopicKey, int] = dict(snapshot.ideal_versions)
        self.external: dict[TopicKey, ExternalView] = dict(snapshot.external)
        self.unread_views: set[TopicKey] = set(snapshot.unread_views)  # exist; content unknown
        self.assignments: dict[str, WorkerAssignment] = dict(snapshot.assignments)
        self.generation = snapshot.generation
        self.generation_exists = snapshot.generation_exists
        self.departed_at: dict[str, float] = dict(departed_at or {})
        # An operator's controls: cordoned workers receive nothing new, drained ones also give away what they hold.
        self.cordoned: frozenset[str] = frozenset()
        self.drained: frozenset[str] = frozenset()
        # The desired assignment (what the ideal states will say), indexed both ways.
        self._desired: dict[TopicKey, dict[int, str]] = {}
        self._held_by: dict[str, set[PartitionKey]] = {}
        self._unplaced: set[PartitionKey] = set()
        # Of those, how many stay unplaced only because an operator cordoned or drained every active worker.
        self.cordoned_unassigned = 0
        # Who reports what: partition -> workers holding it (ONLINE/ERROR); topic -> worker -> reports.
        self._holders: dict[PartitionKey, set[str]] = {}
        self._reports: dict[TopicKey, dict[str, dict[int, PartitionStatus]]] = {}
        # The handoff's answer: partition -> the worker whose assignment has it; worker -> its partitions.
        # Rebuilt from the assignment nodes, so a grantee that is not live is fenced before its partitions move.
        self._grant_of: dict[PartitionKey, str] = {}
        self._granted: dict[str, set[PartitionKey]] = {}
        for worker, written in self.assignments.items():
            if written.partitions:
                self._granted[worker] = set(written.partitions)
                for partition in written.partitions:
                    self._grant_of[partition] = worker
        # Takings not yet acknowledged (:mod:`common.core.handoff`): partition -> worker -> the generation
        # that took it, indexed by worker too. Without memory of them, a new leader assumes that every
        # worker whose status does not acknowledge its node may hold any partition no node names: kept as
        # those workers and those partitions, not as their product.
        self._unacked: dict[PartitionKey, dict[str, int]] = {}
        self._unacked_of: dict[str, set[PartitionKey]] = {}
        self._takeover_unsettled: dict[str, int] = unsettled_workers(self.assignments, self.statuses)
        self._takeover_open: set[PartitionKey] = set()
        if self._takeover_unsettled:
            self._takeover_open = {
                PartitionKey(key.route, key.topic, p)
                for key, state in self.ideal.items()
                for p in range(state.partitions)
                if PartitionKey(key.route, key.topic, p) not in self._grant_of
            }
        # Partitions that two live workers report holding (it must stay empty).
        self._held_twice: set[PartitionKey] = set()
        # Reported states per topic, for the partition-state gauge.
        self._topic_counts: dict[TopicKey, Counter[str]] = {}
        self.state_counts: Counter[str] = Counter()
        # /validation per topic (it depends on the topic's ideal state and view, and the live set).
        self._checks: dict[TopicKey, tuple[list[Mismatch], dict[str, int]]] = {}
        self._checked_live: set[str] = set()
        # What the next plan must look at again.
        self._touched: set[PartitionKey] = set()
        self._touched_topics: set[TopicKey] = set(self.external) | self.unread_views
        self._check_workers: set[str] = set(self.assignments) | set(self.live)
        for key, state in self.ideal.items():
            self._set_desired(key, state)
        for worker, status in self.statuses.items():
            self._index_status(worker, {}, status.partitions)
        self._touched.update(self._grant_of)

    # -- events -----------------------------------------------------------------------------

    def set_live(self, live: Mapping[str, WorkerInfo]) -> None:
        """The live workers now (their infos); a worker's liveness decides the handoff of what it holds."""
        changed = set(live).symmetric_difference(self.live)
        self.live = dict(live)
        for worker in changed:
            self._check_workers.add(worker)
            status = self.statuses.get(worker)
            if status is not None:
                self._touched.update(status.partitions)
            self._touch_takings(worker)

    def set_status(self, worker: str, status: WorkerStatus | None) -> None:
        """A worker's status node changed (None: deleted)."""
        old = self.statuses.get(worker)
        if old == status:
            return
        self._index_status(worker, old.partitions if old else {}, status.partitions if status else {})
        if (old and (old.generation, old.leaving)) != (status and (status.generation, status.leaving)):
            unsettled_at = self._takeover_unsettled.get(worker)
            if unsettled_at is not None and acknowledged(status, unsettled_at):
                del self._takeover_unsettled[worker]
                self._touched.update(self._takeover_open)
                if not self._takeover_unsettled:
                    self._takeover_open.clear()
            self._touch_takings(worker)
        if status is None:
            del self.statuses[worker]
        else:
            self.statuses[worker] = status
        self._check_workers.add(worker)

    def set_cordoned(self, cordoned: frozenset[str], drained: frozenset[str]) -> None:
        """The operator's cordoned workers (``drained`` among them give away what they hold)."""
        if (cordoned, drained) == (self.cordoned, self.drained):
            return
        self._check_workers.update(
            cordoned.symmetric_difference(self.cordoned) | drained.symmetric_difference(self.drained)
        )
        self.cordoned, self.drained = cordoned, drained

    def put_topic(self, key: TopicKey, state: IdealState | None, version: int = 0) -> None:
        """The leader itself wrote (or deleted: None) a topic's ideal state."""
        self._checks.pop(key, None)
        self._drop_desired(key)
        if state is None:
            self.ideal.pop(key, None)
            self.ideal_versions.pop(key, None)
        else:
            self.ideal[key] = state
            self.ideal_versions[key] = version
            self._set_desired(key, state)
        self._touched_topics.add(key)

    # -- planning ---------------------------------------------------------------------------

    def plan(
        self,
        now: float,
        failover_delay_s: float,
        rebalance: bool = False,
        rates: Callable[[], Mapping[PartitionKey, Rate]] | None = None,
        moves: Mapping[PartitionKey, str] | None = None,
    ) -> Changes:
        """The writes that bring ZooKeeper to the desired state; see ``plan`` of ``tests/oracles/planner.py``.

        ``rates`` (balance by load): the measured rates, asked only when partitions are placed;
        ``moves``: partition -> worker, applied after placement for partitions that still exist,
        onto active workers only."""
        active = {w for w in self.live if not (w in self.statuses and self.statuses[w].leaving)}
        leaving = (set(self.live) - active) | {w for w, s in self.statuses.items() if s.leaving}
        departed = {w: t for w, t in self.departed_at.items() if w not in self.live}
        for worker, held in self._held_by.items():
            if held and worker not in self.live:
                departed.setdefault(worker, now)
        retained_until = {
            w: t + failover_delay_s for w, t in departed.items() if t + failover_delay_s > now and w not in leaving
        }
        keep = (active - self.drained) | set(retained_until)
        # Cordoned workers keep what they hold but receive nothing new: to the placement they are retained.
        fenced = (self.cordoned | self.drained) & active
        eligible = active - fenced
        origin: dict[PartitionKey, str] = {}  # partition -> its worker before this plan, for what moved

        for worker in [w for w, held in self._held_by.items() if held and w not in keep]:
            for partition in self._held_by.pop(worker):
                origin.setdefault(partition, worker)
                del self._desired[_topic(partition)][partition.partition]
                self._unplaced.add(partition)
                self._touched.add(partition)
                self._touched_topics.add(_topic(partition))
        if self._unplaced and eligible - set(retained_until):
            self._place(eligible | (fenced - self.drained), set(retained_until) | (fenced - self.drained), rates)
        self.cordoned_unassigned = len(self._unplaced) if fenced and not eligible else 0
        for partition, worker in (moves or {}).items():  # by load: never onto a cordoned worker
            old = self._desired.get(_topic(partition), {}).get(partition.partition)
            if old is not None and old != worker and worker in eligible:
                origin.setdefault(partition, old)
                self._move(partition, worker)
        if rebalance:
            flat = {p: w for w, held in self._held_by.items() for p in held}  # keys made once, at load
            for partition, worker in assignment.rebalance(flat, eligible).items():
                if flat[partition] != worker:
                    origin.setdefault(partition, flat[partition])
                    self._move(partition, worker)

        changes = Changes()
        changes.moved = sum(1 for p, w in origin.items() if self._desired.get(_topic(p), {}).get(p.partition, w) != w)
        for key in self._touched_topics:
            state = self.ideal.get(key)
            if state is not None:
                wanted = IdealState(key.route, key.topic, state.partitions, dict(sorted(self._desired[key].items())))
                if wanted != state:
                    changes.ideal[key] = wanted
        self._handoff(changes)
        self._views(changes)
        holding = {w for w, held in self._held_by.items() if held}
        changes.departed_at = {w: t for w, t in departed.items() if w in holding}
        changes.retained_until = {w: t for w, t in retained_until.items() if w in holding}
        self.departed_at = dict(changes.departed_at)
        self._touched.clear()
        self._touched_topics.clear()
        self._check_workers.clear()
        return changes

    def applied(self, changes: Changes, generation: int) -> None:
        """ZooKeeper took ``changes``: the mirrors now hold them (``generation`` stamped on assignments)."""
        for key in (*changes.ideal, *changes.views, *changes.delete_views):
            self._checks.pop(key, None)
        for key, state in changes.ideal.items():
            self.ideal[key] = state
            self.ideal_versions[key] = self.ideal_versions.get(key, 0) + 1
        for worker, partitions in changes.assignments.items():
            before = self.assignments.get(worker)
            if before is not None and worker in self.live and not self._leaving(worker):
                # A live worker may hold what this write took from it until it acknowledges the generation.
                for partition in before.partitions - partitions:
                    self._unacked.setdefault(partition, {})[worker] = generation
                    self._unacked_of.setdefault(worker, set()).add(partition)
            self.assignments[worker] = WorkerAssignment(generation, partitions)
        for worker in changes.delete_assignments:
            self.assignments.pop(worker, None)
        if changes.assignments:
            self.generation = generation
            self.generation_exists = True
        for key, view in changes.views.items():
            self.external[key] = view
            self.unread_views.discard(key)
        for key in changes.delete_views:
            self.external.pop(key, None)
            self.unread_views.discard(key)

    # -- the parts of a plan ----------------------------------------------------------------

    def _place(
        self, active: set[str], retained: set[str], rates: Callable[[], Mapping[PartitionKey, Rate]] | None = None
    ) -> None:
        """Places the unplaced partitions among the partitions of their topics only."""
        topics = {_topic(p) for p in self._unplaced}
        partitions = [PartitionKey(k.route, k.topic, p) for k in topics for p in range(self.ideal[k].partitions)]
        current = {PartitionKey(k.route, k.topic, p): w for k in topics for p, w in self._desired[k].items()}
        in_topics = Counter(current.values())
        base = {w: len(self._held_by.get(w, ())) - in_topics.get(w, 0) for w in active | retained}
        measured = rates() if rates is not None else {}
        if measured:
            outside: dict[str, tuple[int, int, int]] = {}
            for worker, count in base.items():
                own = [measured[p] for p in self._held_by.get(worker, ()) if p in measured and _topic(p) not in topics]
                outside[worker] = (sum(r.bytes_per_s for r in own), sum(r.records_per_s for r in own), count)
            placed = assignment.assign_by_load(
                partitions, current, active, measured, retained=retained, base_load=outside
            )
        else:
            placed = assignment.assign(partitions, current, active, retained=retained, base_load=base)
        for partition, worker in placed.items():
            if partition not in current:
                self._move(partition, worker)

    def _move(self, partition: PartitionKey, worker: str) -> None:
        key = _topic(partition)
        old = self._desired[key].get(partition.partition)
        if old is not None:
            self._held_by[old].discard(partition)
        self._desired[key][partition.partition] = worker
        self._held_by.setdefault(worker, set()).add(partition)
        self._unplaced.discard(partition)
        self._touched.add(partition)
        self._touched_topics.add(key)

    def _handoff(self, changes: Changes) -> None:
        """The acknowledged handoff of :mod:`common.core.handoff`, for the touched partitions only."""
        changed: set[str] = set(self._check_workers)
        live = self.live
        for partition in self._touched:
            target = self._desired.get(_topic(partition), {}).get(partition.partition)
            holders = self._holders.get(partition, ())
            if sum(1 for h in holders if h in live) > 1:
                self._held_twice.add(partition)
            else:
                self._held_twice.discard(partition)
            old = self._grant_of.get(partition)
            may_hold = {*holders, *self._open_takings(partition)}
            if old is not None and not self._leaving(old):
                may_hold.add(old)
            blocked = any(w != target and w in live for w in may_hold)
            grant = target if target is not None and not blocked else None
            if old == grant:
                continue
            for writer in may_hold:
                if writer != grant and writer not in live:
                    # Its writer is fenced before this write: what it had not acknowledged is settled.
                    changes.fence.setdefault(writer, set()).add(partition.route)
                    self._settle(partition, writer)
            if grant is not None:
                self._settle(partition, grant)
                self._takeover_open.discard(partition)
            if old is not None:
                self._granted[old].discard(partition)
                changed.add(old)
            if grant is None:
                del self._grant_of[partition]
            else:
                self._grant_of[partition] = grant
                self._granted.setdefault(grant, set()).add(partition)
                changed.add(grant)
        # Workers that could need a write although their grants did not change: a new live worker
        # without a node (an empty one is created), a departed one with nothing left (deleted).
        for worker in set(self.live) - set(self.assignments):
            changed.add(worker)
        for worker, stored in self.assignments.items():
            if not stored.partitions and worker not in self.live:
                changed.add(worker)
        for worker in changed:
            partitions = frozenset(self._granted.get(worker, ()))
            written = self.assignments.get(worker)
            # A worker reads an absent node as an empty one. A live worker always has a node; one
            # that is not live (died, left, or only its live node vanished) keeps one only while it
            # is granted partitions or its node still names some (emptied first: a deletion is
            # written among the gains), and never gets an empty node created for it, even while
            # the ideal states retain partitions for it (withheld while another worker holds them).
            if worker in self.live or partitions or (written is not None and written.partitions):
                if written is None or written.partitions != partitions:
                    changes.assignments[worker] = partitions
            elif written is not None:
                changes.delete_assignments.add(worker)  # a departed worker with nothing left

    def _leaving(self, worker: str) -> bool:
        status = self.statuses.get(worker)
        return status is not None and status.leaving

    def _open_takings(self, partition: PartitionKey) -> dict[str, int]:
        """Worker -> generation of the takings of ``partition`` not yet acknowledged (the acknowledged ones
        are forgotten here)."""
        takings: dict[str, int] = {}
        recorded = self._unacked.get(partition)
        if recorded:
            for worker, generation in list(recorded.items()):
                if acknowledged(self.statuses.get(worker), generation):
                    self._settle(partition, worker)
                else:
                    takings[worker] = generation
        if partition in self._takeover_open:
            for worker, generation in self._takeover_unsettled.items():
                if worker not in takings and not acknowledged(self.statuses.get(worker), generation):
                    takings[worker] = generation
        return takings

    def _settle(self, partition: PartitionKey, worker: str) -> None:
        """Forgets a taking: acknowledged, granted back, or its worker's writer fenced."""
        recorded = self._unacked.get(partition)
        if recorded is not None and recorded.pop(worker, None) is not None:
            if not recorded:
                del self._unacked[partition]
            of_worker = self._unacked_of[worker]
            of_worker.discard(partition)
            if not of_worker:
                del self._unacked_of[worker]

    def _touch_takings(self, worker: str) -> None:
        """A worker's liveness or acknowledged generation changed: what it may hold is decided again."""
        self._touched.update(self._unacked_of.get(worker, ()))
        if worker in self._takeover_unsettled:
            self._touched.update(self._takeover_open)

    def _views(self, changes: Changes) -> None:
        for key in self._touched_topics:
            old_counts = self._topic_counts.pop(key, None)
            if old_counts:
                self.state_counts.subtract(old_counts)
            if key not in self.ideal:
                if key in self.external or key in self.unread_views:
                    changes.delete_views.add(key)
                continue
            view = self._view(key)
            if key in self.unread_views or self.external.get(key) != view:
                changes.views[key] = view
            counts = view.state_counts(self.ideal[key].partitions)
            self._topic_counts[key] = counts
            self.state_counts.update(counts)

    def _view(self, key: TopicKey) -> ExternalView:
        """As :func:`common.core.diff.external_views`: a holder wins over OFFLINE; among equals, the lowest id."""
        entries: dict[int, ViewEntry] = {}
        reports = self._reports.get(key, {})
        for worker in sorted(reports):
            for number, status in reports[worker].items():
                known = entries.get(number)
                if known is not None and (known["state"] in HELD_STATES or status.state not in HELD_STATES):
                    continue
                entries[number] = view_entry(worker, status.state, status.reason)
        return ExternalView(key.route, key.topic, dict(sorted(entries.items())))

    # -- indexes ----------------------------------------------------------------------------

    def _set_desired(self, key: TopicKey, state: IdealState) -> None:
        parts = {p: w for p, w in state.assignment.items() if p < state.partitions}
        self._desired[key] = parts
        for p, worker in parts.items():
            self._held_by.setdefault(worker, set()).add(PartitionKey(key.route, key.topic, p))
        for p in range(state.partitions):
            partition = PartitionKey(key.route, key.topic, p)
            if p not in parts:
                self._unplaced.add(partition)
            self._touched.add(partition)
        self._touched_topics.add(key)

    def _drop_desired(self, key: TopicKey) -> None:
        for p, worker in self._desired.pop(key, {}).items():
            partition = PartitionKey(key.route, key.topic, p)
            self._held_by[worker].discard(partition)
            self._touched.add(partition)
        old = self.ideal.get(key)
        if old is not None and self._unplaced:
            for p in range(old.partitions):
                self._unplaced.discard(PartitionKey(key.route, key.topic, p))
        self._touched_topics.add(key)

    def _index_status(
        self, worker: str, old: Mapping[PartitionKey, PartitionStatus], new: Mapping[PartitionKey, PartitionStatus]
    ) -> None:
        """Indexes what changed between a worker's old and new reports (only that is touched)."""
        for partition, reported in old.items():
            if new.get(partition) != reported:
                self._unindex(worker, partition)
        for partition, reported in new.items():
            if old.get(partition) != reported:
                self._index(worker, partition, reported)

    def _index(self, worker: str, partition: PartitionKey, reported: PartitionStatus) -> None:
        key = _topic(partition)
        self._touched.add(partition)
        self._touched_topics.add(key)
        self._reports.setdefault(key, {}).setdefault(worker, {})[partition.partition] = reported
        if reported.state in HELD_STATES:
            self._holders.setdefault(partition, set()).add(worker)

    def _unindex(self, worker: str, partition: PartitionKey) -> None:
        key = _topic(partition)
        self._touched.add(partition)
        self._touched_topics.add(key)
        by_worker = self._reports.get(key, {})
        mine = by_worker.get(worker)
        if mine is not None:
            mine.pop(partition.partition, None)
            if not mine:
                del by_worker[worker]
        if not by_worker:
            self._reports.pop(key, None)
        holders = self._holders.get(partition)
        if holders is not None:
            holders.discard(worker)
            if not holders:
                del self._holders[partition]

    # -- reads for the REST API -------------------------------------------------------------

    def validation(self) -> tuple[list[Mismatch], dict[str, int]]:
        """:func:`common.core.diff.compare` and :func:`common.core.diff.summarize` of the mirrors, kept per topic:
        only topics whose ideal state or view changed since, or whose ideal workers came or went,
        are compared again."""
        live = set(self.live)
        for worker in live.symmetric_difference(self._checked_live):
            # compare() sees the live set only through "is the ideal worker live": only the topics
            # the ideal states give to a worker that came or went are compared again.
            for partition in self._held_by.get(worker, ()):
                self._checks.pop(_topic(partition), None)
        self._checked_live = live
        keys = set(self.ideal) | set(self.external)
        for key in [k for k in self._checks if k not in keys]:
            del self._checks[key]
        for key in keys - set(self._checks):
            ideal = {key: self.ideal[key]} if key in self.ideal else {}
            external = {key: self.external[key]} if key in self.external else {}
            self._checks[key] = (compare(ideal, external, live), summarize(ideal, external))
        mismatches: list[Mismatch] = []
        summary: Counter[str] = Counter({"partitions": 0, "online": 0, "offline": 0, "error": 0, "paused": 0})
        for found, counts in self._checks.values():
            mismatches.extend(found)
            summary.update(counts)
        return sorted(mismatches, key=lambda m: m.partition), dict(summary)

    @property
    def held_twice(self) -> int:
        """How many partitions two live workers report holding at once (a broken handoff if ever above 0)."""
        return len(self._held_twice)

    def holding(self) -> dict[str, list[PartitionKey]]:
        """Worker -> the partitions the ideal states give it, sorted."""
        return {w: sorted(held) for w, held in self._held_by.items() if held}
