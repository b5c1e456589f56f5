"""The acknowledged handoff: a partition goes to its next worker only once no other live worker may hold it.

The specification (:func:`common.core.handoff.hand_off`) is checked on its own here, and the leader's
incremental planner against a simulated fleet whose workers apply, report and die whenever they like:
every acknowledgement may be late, a worker may copy what its node names before it says so, and a
worker whose session ended may go on copying (an exactly-once route does) until it is fenced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ferry.common.core.handoff import acknowledged, hand_off, unacknowledged_at_takeover
from ferry.common.model import (
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    TopicKey,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
)
from ferry.controller.lead.leader_state import LeaderState
from ferry.controller.lead.store import Snapshot

ROUTE = "src.dst"
P = [PartitionKey(ROUTE, "t", i) for i in range(4)]
ONLINE = PartitionStatus(PartitionState.ONLINE)


def status(generation: int, *held: PartitionKey, leaving: bool = False) -> WorkerStatus:
    return WorkerStatus(generation, dict.fromkeys(held, ONLINE), leaving=leaving)


def test_a_partition_moves_only_after_the_live_holder_released_it() -> None:
    ideal = {P[0]: "w2", P[1]: "w1"}
    statuses = {"w1": status(1, P[0], P[1]), "w2": status(1)}
    written = {"w1": frozenset({P[0], P[1]}), "w2": frozenset()}
    step1 = hand_off(ideal, statuses, {"w1", "w2"}, written, {}, generation=2)
    assert step1.assignments == {"w2": frozenset(), "w1": frozenset({P[1]})}
    assert step1.unacknowledged == {P[0]: {"w1": 2}}

    released = {"w1": status(2, P[1]), "w2": status(1)}
    step2 = hand_off(ideal, released, {"w1", "w2"}, step1.assignments, step1.unacknowledged, generation=3)
    assert step2.assignments == {"w2": frozenset({P[0]}), "w1": frozenset({P[1]})}
    assert not step2.fence and not step2.unacknowledged


def test_a_grant_not_yet_reported_still_counts_as_a_hold() -> None:
    """w1 was granted p0 at generation 2 and has not reported yet: it may already copy p0."""
    ideal = {P[0]: "w2"}
    statuses = {"w1": status(1), "w2": status(1)}
    step = hand_off(ideal, statuses, {"w1", "w2"}, {"w1": frozenset({P[0]})}, {}, generation=3)
    assert step.assignments["w2"] == frozenset() and step.assignments.get("w1", frozenset()) == frozenset()
    assert step.unacknowledged == {P[0]: {"w1": 3}}
    # w1 applies generation 2 only (acquires p0, reports it), then generation 3 (releases it):
    step = hand_off(ideal, {"w1": status(2, P[0]), "w2": status(1)}, {"w1", "w2"}, {}, step.unacknowledged, 4)
    assert step.assignments["w2"] == frozenset()
    step = hand_off(ideal, {"w1": status(3), "w2": status(1)}, {"w1", "w2"}, {}, step.unacknowledged, 5)
    assert step.assignments["w2"] == frozenset({P[0]})


def test_a_taking_a_worker_never_acknowledged_is_settled_by_fencing_it_once_it_is_gone() -> None:
    ideal = {P[0]: "w2"}
    pending = {P[0]: {"w1": 3}}
    live_step = hand_off(ideal, {"w1": status(2)}, {"w1", "w2"}, {}, pending, 4)
    assert live_step.assignments["w2"] == frozenset()
    gone_step = hand_off(ideal, {}, {"w2"}, {}, pending, 4)
    assert gone_step.assignments["w2"] == frozenset({P[0]})
    assert gone_step.fence == {"w1": {ROUTE}} and not gone_step.unacknowledged


def test_a_leaving_worker_acknowledged_everything() -> None:
    assert acknowledged(status(0, leaving=True), 9)
    assert not acknowledged(status(8), 9) and not acknowledged(None, 1)
    step = hand_off({P[0]: "w2"}, {"w1": status(0, leaving=True)}, {"w1", "w2"}, {}, {P[0]: {"w1": 9}}, 10)
    assert step.assignments["w2"] == frozenset({P[0]})


def test_a_dead_grantee_is_fenced_even_when_nobody_gets_its_partition_yet() -> None:
    """w1 (not live) was granted p0; p0 now goes to w2 but w3 (live) still reports it: w1 is fenced now."""
    step = hand_off({P[0]: "w2"}, {"w3": status(1, P[0])}, {"w2", "w3"}, {"w1": frozenset({P[0]})}, {}, generation=2)
    assert step.assignments["w2"] == frozenset() and step.fence == {"w1": {ROUTE}}


def test_a_new_leader_assumes_an_unsettled_worker_may_hold_any_partition_no_node_names() -> None:
    nodes = {"w1": WorkerAssignment(5, frozenset({P[1]})), "w2": WorkerAssignment(4, frozenset())}
    statuses = {"w1": status(3, P[1]), "w2": status(4)}
    assert unacknowledged_at_takeover(P, nodes, statuses) == {P[0]: {"w1": 5}, P[2]: {"w1": 5}, P[3]: {"w1": 5}}
    assert unacknowledged_at_takeover(P, nodes, {"w1": status(5, P[1]), "w2": status(4)}) == {}


@given(
    ideal=st.dictionaries(st.sampled_from(P), st.sampled_from(["w1", "w2", "w3"])),
    held=st.dictionaries(st.sampled_from(["w1", "w2", "w3"]), st.sets(st.sampled_from(P))),
    granted=st.dictionaries(st.sampled_from(P), st.sampled_from(["w1", "w2", "w3"])),
    takings=st.dictionaries(
        st.sampled_from(P), st.dictionaries(st.sampled_from(["w1", "w2", "w3"]), st.integers(1, 4))
    ),
    generations=st.dictionaries(st.sampled_from(["w1", "w2", "w3"]), st.integers(0, 4)),
    live=st.sets(st.sampled_from(["w1", "w2", "w3"])),
)
def test_a_partition_is_granted_only_where_no_other_live_worker_may_hold_it(
    ideal: dict[PartitionKey, str],
    held: dict[str, set[PartitionKey]],
    granted: dict[PartitionKey, str],
    takings: dict[PartitionKey, dict[str, int]],
    generations: dict[str, int],
    live: set[str],
) -> None:
    statuses = {w: status(generations.get(w, 0), *ps) for w, ps in held.items()}
    written: dict[str, frozenset[PartitionKey]] = {}
    for partition, worker in granted.items():
        written[worker] = written.get(worker, frozenset()) | {partition}
    step = hand_off(ideal, statuses, live, written, takings, generation=5)
    for partition in P:
        grantees = {w for w, ps in step.assignments.items() if partition in ps}
        assert len(grantees) <= 1
        for grantee in grantees:
            may_hold = {w for w, ps in held.items() if partition in ps}
            may_hold |= {w for w, g in takings.get(partition, {}).items() if not acknowledged(statuses.get(w), g)}
            may_hold |= {granted[partition]} if partition in granted else set()
            assert not {w for w in may_hold - {grantee} if w in live}
            # every other worker that may hold it and is not live is fenced before the write
            for worker in may_hold - {grantee} - live:
                if granted.get(partition) != grantee:
                    assert ROUTE in step.fence.get(worker, set())


# -- the leader against a simulated fleet ----------------------------------------------------

WORKERS = ["w0", "w1", "w2", "w3"]
TOPIC = TopicKey(ROUTE, "t")
DELAY = 5.0


@dataclass
class SimWorker:
    """A worker process as the leader cannot see it: what it copies, and what it said last."""

    live: bool = False  # its live node (and status node) exist
    node: WorkerAssignment | None = None  # its assignment node in ZooKeeper
    applied: int = 0  # the generation of the node it last applied
    copying: set[PartitionKey] = field(default_factory=set)  # what it copies (and would commit)
    fenced: bool = False  # its writer was fenced: nothing it copies commits until it registers again
    leaving: bool = False
    exists: bool = True  # the process runs


class FleetUnderMoves(RuleBasedStateMachine):
    """Workers apply and report at their own pace; the leader plans, moves, fences and is replaced."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1000.0
        self.workers = {w: SimWorker() for w in WORKERS}
        self.ideal = {TOPIC: IdealState(ROUTE, "t", len(P))}
        self.statuses: dict[str, WorkerStatus] = {}
        self.generation = 0
        self.departed: dict[str, float] = {}
        self.cordoned: frozenset[str] = frozenset()
        self.drained: frozenset[str] = frozenset()
        for worker in WORKERS[:2]:
            self._register(worker)
        self.leader = self._new_leader()

    # -- the leader ---------------------------------------------------------------------------

    def _live(self) -> dict[str, WorkerInfo]:
        return {w: WorkerInfo(w, "h", 1) for w, sim in self.workers.items() if sim.live}

    def _new_leader(self) -> LeaderState:
        snapshot = Snapshot(
            live=self._live(),
            statuses=dict(self.statuses),
            ideal=dict(self.ideal),
            ideal_versions=dict.fromkeys(self.ideal, 0),
            assignments={w: sim.node for w, sim in self.workers.items() if sim.node is not None},
            generation=self.generation,
            generation_exists=self.generation > 0,
        )
        leader = LeaderState(snapshot, self.departed)
        leader.set_cordoned(self.cordoned, self.drained)
        return leader

    @rule(rebalance=st.booleans(), move=st.none() | st.tuples(st.sampled_from(P), st.sampled_from(WORKERS)))
    def plan(self, rebalance: bool, move: tuple[PartitionKey, str] | None) -> None:
        changes = self.leader.plan(self.now, DELAY, rebalance=rebalance, moves=dict([move]) if move else None)
        generation = self.generation + 1
        for worker in changes.fence:  # before the write, as the reconciler does
            sim = self.workers[worker]
            assert not sim.live, "only a worker that is not live is fenced"
            sim.fenced = True
        for worker, partitions in changes.assignments.items():
            self.workers[worker].node = WorkerAssignment(generation, partitions)
        for worker in changes.delete_assignments:
            self.workers[worker].node = None
        self.ideal.update(changes.ideal)
        self.leader.applied(changes, generation)
        if changes.assignments:
            self.generation = generation
        self.departed = dict(self.leader.departed_at)

    @rule()
    def leader_replaced(self) -> None:
        self.leader = self._new_leader()

    @rule(cordon=st.frozensets(st.sampled_from(WORKERS), max_size=2), drain=st.booleans())
    def cordon(self, cordon: frozenset[str], drain: bool) -> None:
        self.cordoned, self.drained = cordon, cordon if drain else frozenset()
        self.leader.set_cordoned(self.cordoned, self.drained)

    @rule(seconds=st.sampled_from([0.5, 2.0, 6.0]))
    def tick(self, seconds: float) -> None:
        self.now += seconds

    # -- the workers ---------------------------------------------------------------------------

    def _publish(self, worker: str) -> None:
        sim = self.workers[worker]
        self.statuses[worker] = WorkerStatus(sim.applied, dict.fromkeys(sim.copying, ONLINE), leaving=sim.leaving)
        self.leader.set_status(worker, self.statuses[worker])

    def _register(self, worker: str) -> None:
        sim = self.workers[worker]
        if sim.fenced:  # it learnt of the fence: released everything, new writer
            sim.copying, sim.fenced = set(), False
        sim.live, sim.applied, sim.leaving, sim.exists = True, 0, False, True
        self.statuses[worker] = WorkerStatus(0, dict.fromkeys(sim.copying, ONLINE))
        if hasattr(self, "leader"):
            self.leader.set_live(self._live())
            self.leader.set_status(worker, self.statuses[worker])

    @rule(worker=st.sampled_from(WORKERS))
    def apply(self, worker: str) -> None:
        """Releases (flushed, committed) what its node no longer names, starts what it names; says
        nothing yet (it copies before it publishes its status)."""
        sim = self.workers[worker]
        if sim.live and not sim.fenced and sim.node is not None:
            sim.copying = set() if sim.leaving else set(sim.node.partitions)
            sim.applied = sim.node.generation

    @rule(worker=st.sampled_from(WORKERS))
    def publish(self, worker: str) -> None:
        if self.workers[worker].live:
            self._publish(worker)

    @rule(worker=st.sampled_from(WORKERS))
    def session_expires(self, worker: str) -> None:
        """Its live and status nodes go; the process copies on (an exactly-once route does)."""
        sim = self.workers[worker]
        if sim.live:
            sim.live = False
            self.statuses.pop(worker, None)
            self.leader.set_live(self._live())
            self.leader.set_status(worker, None)

    @rule(worker=st.sampled_from(WORKERS))
    def killed(self, worker: str) -> None:
        self.session_expires(worker)
        sim = self.workers[worker]
        sim.copying, sim.exists = set(), False

    @rule(worker=st.sampled_from(WORKERS))
    def registers(self, worker: str) -> None:
        if not self.workers[worker].live:
            self._register(worker)

    @rule(worker=st.sampled_from(WORKERS))
    def drains(self, worker: str) -> None:
        """SIGTERM: releases everything, then says it is leaving."""
        sim = self.workers[worker]
        if sim.live:
            sim.copying, sim.leaving = set(), True
            self._publish(worker)

    @precondition(lambda self: any(sim.leaving and sim.live for sim in self.workers.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def drained_worker_exits(self, worker: str) -> None:
        if self.workers[worker].leaving:
            self.killed(worker)

    # -- the property --------------------------------------------------------------------------

    @invariant()
    def no_partition_is_held_or_granted_by_two_live_workers(self) -> None:
        for partition in P:
            live = [
                w
                for w, sim in self.workers.items()
                if sim.live
                and not sim.fenced
                and (partition in sim.copying or (sim.node is not None and partition in sim.node.partitions))
            ]
            zombies = [
                w for w, sim in self.workers.items() if not sim.live and not sim.fenced and partition in sim.copying
            ]
            assert len(live) + len(zombies) <= 1, (partition, live, zombies)

    @invariant()
    def the_leader_never_sees_a_partition_held_twice(self) -> None:
        assert self.leader.held_twice == 0


FleetUnderMoves.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
test_no_partition_is_ever_held_or_granted_by_two_live_workers = FleetUnderMoves.TestCase
