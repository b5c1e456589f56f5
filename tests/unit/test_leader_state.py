"""ferry.controller.lead.leader_state.LeaderState decides exactly as the planner oracle
(tests/oracles/planner.py), after any events.

The specification side keeps ZooKeeper's content as plain dicts, runs the whole-state
``plan`` of ``tests/oracles/planner.py`` at every step and writes what it returns (deleting the
assignment nodes it does not name); the incremental side gets only the events and writes only
what its plan says. After every step both must hold the same ideal states, assignments and
external views, and agree on what moved, which workers are retained and until when.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ferry.common.core.diff import compare, summarize
from ferry.common.core.handoff import Unacknowledged, unacknowledged_at_takeover
from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    TopicKey,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
)
from ferry.common.zk.layout import ZkLayout
from ferry.controller.lead.leader_state import LeaderState
from ferry.controller.lead.store import Snapshot, chunks
from ferry.controller.lead.write_order import ordered_ops
from tests.oracles.planner import plan

pytestmark = pytest.mark.unit

ROUTE = "src.dst"
DELAY = 10.0
WORKERS = [f"w{i}" for i in range(6)]
TOPICS = [f"t{i}" for i in range(5)]


@dataclass
class Zk:
    """What ZooKeeper holds, and what only the workers write."""

    ideal: dict[TopicKey, IdealState] = field(default_factory=dict)
    assignments: dict[str, frozenset[PartitionKey]] = field(default_factory=dict)
    external: dict[TopicKey, ExternalView] = field(default_factory=dict)
    live: dict[str, WorkerInfo] = field(default_factory=dict)
    statuses: dict[str, WorkerStatus] = field(default_factory=dict)
    node_generations: dict[str, int] = field(default_factory=dict)  # each assignment node's generation
    generation: int = 0
    # The spec leader's memory of takings not yet acknowledged.
    unacknowledged: Unacknowledged = field(default_factory=dict)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            live=dict(self.live),
            statuses=dict(self.statuses),
            ideal=dict(self.ideal),
            ideal_versions=dict.fromkeys(self.ideal, 0),
            external=dict(self.external),
            assignments={w: WorkerAssignment(self.node_generations[w], ps) for w, ps in self.assignments.items()},
            generation=self.generation,
            generation_exists=self.generation > 0,
        )

    def new_leader(self) -> None:
        """A leader starts without memory: it assumes what :func:`unacknowledged_at_takeover` says."""
        partitions = [
            PartitionKey(k.route, k.topic, p) for k, state in self.ideal.items() for p in range(state.partitions)
        ]
        self.unacknowledged = unacknowledged_at_takeover(partitions, self.snapshot().assignments, self.statuses)

    def report(self, worker: str, states: dict[PartitionKey, PartitionStatus] | None = None) -> WorkerStatus:
        """The worker applied its assignment node and says so (its generation, what it holds)."""
        assigned = self.assignments.get(worker, frozenset())
        if states is None:
            states = {p: PartitionStatus(PartitionState.ONLINE) for p in assigned}
        self.statuses[worker] = WorkerStatus(self.node_generations.get(worker, 0), states)
        return self.statuses[worker]


Step = tuple[int, dict[str, float], dict[str, set[str]]]


def spec_step(zk: Zk, departed: dict[str, float], now: float, rebalance: bool) -> Step:
    generation = zk.generation + 1
    result = plan(
        zk.ideal,
        zk.live,
        zk.statuses,
        dict(zk.assignments),
        departed,
        now,
        DELAY,
        rebalance=rebalance,
        unacknowledged=zk.unacknowledged,
        generation=generation,
    )
    written = {w: ps for w, ps in result.assignments.items() if zk.assignments.get(w) != ps}
    for worker in written:
        zk.node_generations[worker] = generation
    if written:
        zk.generation = generation
    zk.assignments = dict(result.assignments)
    zk.ideal = dict(result.ideal)
    zk.external = dict(result.external)
    zk.unacknowledged = result.unacknowledged
    departed.clear()
    departed.update(result.departed_at)
    return result.moved, result.retained_until, result.fence


def state_step(leader_state: LeaderState, now: float, rebalance: bool) -> Step:
    changes = leader_state.plan(now, DELAY, rebalance=rebalance)
    leader_state.applied(changes, leader_state.generation + 1)
    return changes.moved, changes.retained_until, changes.fence


def same(zk: Zk, leader_state: LeaderState) -> None:
    assert leader_state.ideal == zk.ideal
    assert {w: a.partitions for w, a in leader_state.assignments.items()} == zk.assignments
    assert leader_state.external == zk.external
    assert leader_state.validation() == (compare(zk.ideal, zk.external, set(zk.live)), summarize(zk.ideal, zk.external))


events = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "join",
                "die",
                "live_gone",
                "report",
                "report_mixed",
                "leave",
                "add",
                "expand",
                "delete",
                "tick",
                "rebalance",
                "new_leader",
            ]
        ),
        st.sampled_from(WORKERS),
        st.sampled_from(TOPICS),
        st.integers(1, 6),
        st.floats(0, 15),
    ),
    max_size=25,
)


@settings(max_examples=400, deadline=None)
@given(
    st.sets(st.sampled_from(WORKERS), max_size=4), st.dictionaries(st.sampled_from(TOPICS), st.integers(1, 6)), events
)
# A retained worker whose partition is withheld (another live worker still copies it) gets no
# node: neither at the plans after it died, nor when only its live node vanished and it reports again.
@example(
    {"w1"},
    {"t0": 1, "t1": 1},
    [
        ("join", "w0", "t0", 1, 0.0),
        ("report", "w1", "t0", 1, 0.0),
        ("rebalance", "w0", "t0", 1, 0.0),
        ("die", "w0", "t0", 1, 0.0),
        ("tick", "w0", "t0", 1, 0.0),
        ("tick", "w0", "t0", 1, 0.0),
    ],
)
@example(
    {"w1"},
    {"t0": 1, "t1": 1},
    [
        ("join", "w0", "t0", 1, 0.0),
        ("report", "w1", "t0", 1, 0.0),
        ("rebalance", "w0", "t0", 1, 0.0),
        ("live_gone", "w0", "t0", 1, 0.0),
        ("report", "w0", "t0", 1, 0.0),
        ("tick", "w0", "t0", 1, 0.0),
    ],
)
def test_the_incremental_planner_decides_as_the_whole_state_plan(
    workers: set[str], topics: dict[str, int], steps: list[tuple[str, str, str, int, float]]
) -> None:
    zk = Zk()
    for worker in workers:
        zk.live[worker] = WorkerInfo(worker, "h", 1)
        zk.statuses[worker] = WorkerStatus(0)
    for topic, count in topics.items():
        zk.ideal[TopicKey(ROUTE, topic)] = IdealState(ROUTE, topic, count)
    now = 1000.0
    departed: dict[str, float] = {}
    snapshot = Snapshot(
        live=dict(zk.live), statuses=dict(zk.statuses), ideal=dict(zk.ideal), ideal_versions={k: 0 for k in zk.ideal}
    )
    leader_state = LeaderState(snapshot)
    assert spec_step(zk, departed, now, False) == state_step(leader_state, now, False)
    same(zk, leader_state)
    for kind, worker, topic, number, seconds in steps:
        key = TopicKey(ROUTE, topic)
        rebalance = False
        if kind == "join" and worker not in zk.live:
            zk.live[worker] = WorkerInfo(worker, "h", 1)
            zk.statuses[worker] = WorkerStatus(0)
            leader_state.set_live(zk.live)
            leader_state.set_status(worker, zk.statuses[worker])
        elif kind == "die" and worker in zk.live:
            del zk.live[worker]
            zk.statuses.pop(worker, None)
            leader_state.set_live(zk.live)
            leader_state.set_status(worker, None)
        elif kind == "live_gone" and worker in zk.live:
            del zk.live[worker]
            leader_state.set_live(zk.live)
        elif kind in ("report", "report_mixed") and worker in zk.statuses:
            assigned = sorted(zk.assignments.get(worker, frozenset()))
            states = [PartitionState.ONLINE, PartitionState.ERROR, PartitionState.OFFLINE]
            reported = zk.report(
                worker,
                {
                    p: PartitionStatus(
                        states[(i + number) % 3] if kind == "report_mixed" else PartitionState.ONLINE,
                        "why" if kind == "report_mixed" and (i + number) % 3 == 1 else None,
                    )
                    for i, p in enumerate(assigned)
                },
            )
            leader_state.set_status(worker, reported)
        elif kind == "leave" and worker in zk.statuses:
            zk.statuses[worker] = WorkerStatus(0, {}, leaving=True)
            leader_state.set_status(worker, zk.statuses[worker])
        elif kind == "add" and key not in zk.ideal:
            zk.ideal[key] = IdealState(ROUTE, topic, number)
            leader_state.put_topic(key, zk.ideal[key])
        elif kind == "expand" and key in zk.ideal:
            old = zk.ideal[key]
            zk.ideal[key] = IdealState(ROUTE, topic, old.partitions + number, dict(old.assignment))
            leader_state.put_topic(key, zk.ideal[key])
        elif kind == "delete" and key in zk.ideal:
            del zk.ideal[key]
            leader_state.put_topic(key, None)
        elif kind == "tick":
            now += seconds
        elif kind == "rebalance":
            rebalance = True
        elif kind == "new_leader":
            zk.new_leader()
            leader_state = LeaderState(zk.snapshot(), departed)
        assert spec_step(zk, departed, now, rebalance) == state_step(leader_state, now, rebalance), kind
        same(zk, leader_state)


def test_a_partition_held_by_a_worker_whose_live_node_vanished_goes_to_its_new_owner_at_once() -> None:
    """Rebalance moves p from w0 to w1 while w0 reports it: withheld; w0's live node goes: w1 gets it."""
    topic = TopicKey(ROUTE, "t0")
    held = {PartitionKey(ROUTE, "t0", p) for p in range(4)}
    zk = Zk(
        ideal={topic: IdealState(ROUTE, "t0", 4, dict.fromkeys(range(4), "w0"))},
        live={w: WorkerInfo(w, "h", 1) for w in ("w0", "w1")},
        statuses={
            "w0": WorkerStatus(1, {p: PartitionStatus(PartitionState.ONLINE) for p in held}),
            "w1": WorkerStatus(0),
        },
    )
    leader_state = LeaderState(
        Snapshot(live=dict(zk.live), statuses=dict(zk.statuses), ideal=dict(zk.ideal), ideal_versions={topic: 0})
    )
    departed: dict[str, float] = {}
    assert spec_step(zk, departed, 1000.0, True) == state_step(leader_state, 1000.0, True)
    same(zk, leader_state)
    assert zk.assignments["w1"] == frozenset()  # withheld while w0 still holds them
    del zk.live["w0"]
    leader_state.set_live(zk.live)
    assert spec_step(zk, departed, 1001.0, False) == state_step(leader_state, 1001.0, False)
    same(zk, leader_state)
    assert len(zk.assignments["w1"]) == 2


def test_a_retained_worker_whose_partition_is_withheld_gets_no_assignment_node() -> None:
    """A rebalance gives w0 a partition w1 still copies, then w0 dies: retained, granted nothing, no node.

    A worker reads an absent node as an empty one; one that is not live is never given an empty
    node (else the whole-state plan would create it and delete it at alternate plans)."""
    t0, t1 = TopicKey(ROUTE, "t0"), TopicKey(ROUTE, "t1")
    zk = Zk(
        ideal={t0: IdealState(ROUTE, "t0", 1), t1: IdealState(ROUTE, "t1", 1)},
        live={"w1": WorkerInfo("w1", "h", 1)},
        statuses={"w1": WorkerStatus(0)},
    )
    leader_state = LeaderState(
        Snapshot(
            live=dict(zk.live),
            statuses=dict(zk.statuses),
            ideal=dict(zk.ideal),
            ideal_versions=dict.fromkeys(zk.ideal, 0),
        )
    )
    departed: dict[str, float] = {}

    def step(now: float, rebalance: bool = False) -> None:
        assert spec_step(zk, departed, now, rebalance) == state_step(leader_state, now, rebalance)
        same(zk, leader_state)

    step(1000.0)
    zk.live["w0"], zk.statuses["w0"] = WorkerInfo("w0", "h", 1), WorkerStatus(0)
    leader_state.set_live(zk.live)
    leader_state.set_status("w0", zk.statuses["w0"])
    step(1000.0)
    zk.statuses["w1"] = WorkerStatus(1, {p: PartitionStatus(PartitionState.ONLINE) for p in zk.assignments["w1"]})
    leader_state.set_status("w1", zk.statuses["w1"])
    step(1000.0, rebalance=True)
    given_to_w0 = leader_state.holding()["w0"]
    assert len(given_to_w0) == 1 and zk.assignments["w0"] == frozenset()  # withheld: w1 still reports it
    del zk.live["w0"], zk.statuses["w0"]
    leader_state.set_live(zk.live)
    leader_state.set_status("w0", None)
    step(1001.0)
    assert "w0" not in zk.assignments  # its empty node is deleted
    for now in (1002.0, 1003.0):  # and never created again while retained and granted nothing
        step(now)
        assert "w0" not in zk.assignments and leader_state.holding()["w0"] == given_to_w0
    # Once w1 released it (it applied the node that took it), the retained w0 is granted it: its node is created then.
    zk.statuses["w1"] = WorkerStatus(
        zk.node_generations["w1"],
        {
            p: PartitionStatus(PartitionState.OFFLINE if p in given_to_w0 else PartitionState.ONLINE)
            for p in zk.statuses["w1"].partitions
        },
    )
    leader_state.set_status("w1", zk.statuses["w1"])
    step(1004.0)
    assert zk.assignments["w0"] == frozenset(given_to_w0)


def test_a_batch_of_several_transactions_never_names_a_partition_in_two_assignments() -> None:
    """A rebalance onto new workers, written in small transactions: every prefix is safe."""
    topics = {TopicKey(ROUTE, f"t{i}"): IdealState(ROUTE, f"t{i}", 8) for i in range(30)}
    first = [f"w{i}" for i in range(4)]
    leader_state = LeaderState(
        Snapshot(live={w: WorkerInfo(w, "h", 1) for w in first}, ideal=topics, ideal_versions=dict.fromkeys(topics, 0))
    )
    leader_state.applied(leader_state.plan(1000.0, DELAY), 1)
    stored = {w: a.partitions for w, a in leader_state.assignments.items()}
    # The new workers sort before the old ones: in plain order their gains would come first.
    leader_state.set_live({w: WorkerInfo(w, "h", 1) for w in [*first, "a4", "a5", "a6"]})
    changes = leader_state.plan(1001.0, DELAY, rebalance=True)
    assert changes.moved > 0
    layout = ZkLayout("/")
    ops = ordered_ops(layout, leader_state, changes, 2, max_bytes=3000)
    transactions = chunks(ops, 3000)
    assert len(transactions) > 3
    for transaction in transactions:
        for op in transaction:
            if op.path.startswith(layout.assignments + "/"):
                worker = op.path.rsplit("/", 1)[1]
                if op.kind == "delete":
                    stored.pop(worker, None)
                else:
                    stored[worker] = WorkerAssignment.from_bytes(op.data).partitions
        named = Counter(p for partitions in stored.values() for p in partitions)
        assert not [p for p, n in named.items() if n > 1]  # after every transaction
    assert stored == {w: frozenset(p) for w, p in changes.assignments.items()} | {
        w: a.partitions for w, a in leader_state.assignments.items() if w not in changes.assignments
    }


def test_views_not_read_at_takeover_are_written_once_or_deleted() -> None:
    topic, gone = TopicKey(ROUTE, "t0"), TopicKey(ROUTE, "old")
    leader_state = LeaderState(
        Snapshot(
            live={"w0": WorkerInfo("w0", "h", 1)},
            ideal={topic: IdealState(ROUTE, "t0", 2)},
            ideal_versions={topic: 0},
            unread_views={topic, gone},
        )
    )
    changes = leader_state.plan(1000.0, DELAY)
    assert set(changes.views) == {topic} and changes.delete_views == {gone}
    ops = {op.path: op.kind for op in ordered_ops(ZkLayout("/"), leader_state, changes, 1)}
    assert ops["/external/src.dst/t0"] == "set" and ops["/external/src.dst/old"] == "delete"
    leader_state.applied(changes, 1)
    assert not leader_state.unread_views and leader_state.plan(1001.0, DELAY).empty()


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_at_a_larger_size_the_incremental_planner_still_decides_as_the_whole_state_plan(seed: int) -> None:
    """~2,000 partitions, 40 workers: joins, deaths, reports, new and deleted topics, a rebalance."""
    import random

    rng = random.Random(seed)
    workers = [f"w{i:02d}" for i in range(40)]
    zk = Zk(
        live={w: WorkerInfo(w, "h", 1) for w in workers[:30]},
        statuses={w: WorkerStatus(0) for w in workers[:30]},
        ideal={TopicKey(ROUTE, f"t{i}"): IdealState(ROUTE, f"t{i}", rng.randint(1, 12)) for i in range(300)},
    )
    leader_state = LeaderState(
        Snapshot(
            live=dict(zk.live),
            statuses=dict(zk.statuses),
            ideal=dict(zk.ideal),
            ideal_versions=dict.fromkeys(zk.ideal, 0),
        )
    )
    departed: dict[str, float] = {}
    now = 1000.0
    for step in range(12):
        kind = rng.choice(["join", "die", "report", "add", "delete", "tick", "rebalance"]) if step else "report"
        worker = rng.choice(workers)
        if kind == "join" and worker not in zk.live:
            zk.live[worker], zk.statuses[worker] = WorkerInfo(worker, "h", 1), WorkerStatus(0)
            leader_state.set_live(zk.live)
            leader_state.set_status(worker, zk.statuses[worker])
        elif kind == "die" and worker in zk.live:
            del zk.live[worker]
            zk.statuses.pop(worker, None)
            leader_state.set_live(zk.live)
            leader_state.set_status(worker, None)
        elif kind == "add":
            key = TopicKey(ROUTE, f"n{step}")
            zk.ideal[key] = IdealState(ROUTE, key.topic, rng.randint(1, 12))
            leader_state.put_topic(key, zk.ideal[key])
        elif kind == "delete":
            key = rng.choice(sorted(zk.ideal))
            del zk.ideal[key]
            leader_state.put_topic(key, None)
        elif kind == "tick":
            now += rng.choice([1.0, 20.0])
        if kind in ("report", "join", "tick"):  # every live worker reports what it was assigned
            for w in zk.statuses:
                zk.statuses[w] = WorkerStatus(
                    1, {p: PartitionStatus(PartitionState.ONLINE) for p in zk.assignments.get(w, frozenset())}
                )
                leader_state.set_status(w, zk.statuses[w])
        rebalance = kind == "rebalance"
        assert spec_step(zk, departed, now, rebalance) == state_step(leader_state, now, rebalance), kind
        same(zk, leader_state)


def test_partitions_of_a_worker_that_is_not_live_are_granted_only_with_its_writer_to_fence_first() -> None:
    """w0 holds every partition and is assigned them; its live node goes, and after its retention w1
    gets them: the plan names w0's writer of the route to fence before the grant is written. Moves
    between live workers (the two-step handoff) fence nothing."""
    topic = TopicKey(ROUTE, "t0")
    held = {PartitionKey(ROUTE, "t0", p) for p in range(4)}
    live = {w: WorkerInfo(w, "h", 1) for w in ("w0", "w1")}
    statuses = {
        "w0": WorkerStatus(1, {p: PartitionStatus(PartitionState.ONLINE) for p in held}),
        "w1": WorkerStatus(1),
    }
    leader_state = LeaderState(
        Snapshot(
            live=live,
            statuses=statuses,
            ideal={topic: IdealState(ROUTE, "t0", 4, dict.fromkeys(range(4), "w0"))},
            ideal_versions={topic: 0},
            assignments={"w0": WorkerAssignment(1, frozenset(held)), "w1": WorkerAssignment(1)},
        )
    )
    rebalanced = leader_state.plan(1000.0, DELAY, rebalance=True)
    leader_state.applied(rebalanced, leader_state.generation + 1)
    assert rebalanced.fence == {}  # w0 is live: it releases first
    leader_state.set_live({"w1": live["w1"]})
    leader_state.set_status("w0", None)
    at_once = leader_state.plan(1001.0, DELAY)
    leader_state.applied(at_once, leader_state.generation + 1)
    later = leader_state.plan(1001.0 + DELAY + 1, DELAY)
    granted = {**at_once.assignments, **later.assignments}.get("w1", frozenset())
    assert granted == held
    assert {**at_once.fence, **later.fence} == {"w0": {ROUTE}}
