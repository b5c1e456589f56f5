"""The planner oracle (tests/oracles/planner.py): the leader's whole desired state from plain data (time driven by
``now``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    TopicKey,
    WorkerInfo,
    WorkerStatus,
)
from tests.oracles.planner import Plan, active_workers, plan

ROUTE = "src.dst"
ORDERS = TopicKey(ROUTE, "orders")
DELAY = 10.0


def key(p: int, topic: TopicKey = ORDERS) -> PartitionKey:
    return PartitionKey(topic.route, topic.topic, p)


def live(*workers: str) -> dict[str, WorkerInfo]:
    return {w: WorkerInfo(w, "host", 1) for w in workers}


def status(
    partitions: Iterable[PartitionKey] = (),
    state: str = PartitionState.ONLINE,
    leaving: bool = False,
    generation: int = 1,
) -> WorkerStatus:
    return WorkerStatus(generation, {p: PartitionStatus(state) for p in partitions}, leaving=leaving)


def ideal(
    count: int, assignment: Mapping[int, str] | None = None, topic: TopicKey = ORDERS
) -> dict[TopicKey, IdealState]:
    return {topic: IdealState(topic.route, topic.topic, count, dict(assignment or {}))}


def run(
    ideal_states: Mapping[TopicKey, IdealState],
    workers: Mapping[str, WorkerInfo],
    statuses: Mapping[str, WorkerStatus] | None = None,
    written: Mapping[str, Iterable[PartitionKey]] | None = None,
    departed_at: Mapping[str, float] | None = None,
    now: float = 1000.0,
    rebalance: bool = False,
) -> Plan:
    nodes = {w: frozenset(partitions) for w, partitions in (written or {}).items()}
    return plan(ideal_states, workers, statuses or {}, nodes, departed_at or {}, now, DELAY, rebalance=rebalance)


def counts(result: Plan, topic: TopicKey = ORDERS) -> Counter[str]:
    return Counter(result.ideal[topic].assignment.values())


def test_a_new_topic_is_spread_evenly_over_the_live_workers() -> None:
    result = run(ideal(8), live("w1", "w2"))
    assert counts(result) == {"w1": 4, "w2": 4}
    assert set(result.ideal[ORDERS].assignment) == set(range(8))
    # Nobody holds anything yet, so each worker is told its whole share at once.
    assert result.assignments == {
        w: frozenset(key(p) for p, owner in result.ideal[ORDERS].assignment.items() if owner == w) for w in ("w1", "w2")
    }
    assert result.moved == 0
    assert result.departed_at == {} and result.retained_until == {}


def test_with_no_live_worker_partitions_stay_unassigned() -> None:
    result = run(ideal(3), {})
    assert result.ideal[ORDERS].assignment == {}
    assert result.assignments == {}


def test_a_departed_worker_keeps_its_partitions_until_the_failover_delay_ends() -> None:
    state = ideal(4, {0: "w1", 1: "w1", 2: "w2", 3: "w2"})
    t0 = 1000.0

    first = run(state, live("w1"), now=t0)  # w2 is gone: first seen now
    assert first.ideal[ORDERS].assignment == {0: "w1", 1: "w1", 2: "w2", 3: "w2"}
    assert first.departed_at == {"w2": t0}
    assert first.retained_until == {"w2": t0 + DELAY}
    assert first.moved == 0

    # Just before the delay ends nothing moves, and the first sighting is remembered (not reset).
    later = run(first.ideal, live("w1"), departed_at=first.departed_at, now=t0 + DELAY - 0.01)
    assert later.ideal[ORDERS].assignment == first.ideal[ORDERS].assignment
    assert later.departed_at == {"w2": t0}
    assert later.retained_until == {"w2": t0 + DELAY}

    # At departed_at + failover_delay_s they move to the live worker, and w2 is forgotten.
    moved = run(later.ideal, live("w1"), departed_at=later.departed_at, now=t0 + DELAY)
    assert moved.ideal[ORDERS].assignment == dict.fromkeys(range(4), "w1")
    assert moved.moved == 2
    assert moved.departed_at == {} and moved.retained_until == {}
    assert moved.assignments["w1"] == frozenset(key(p) for p in range(4))


def test_a_departed_worker_that_returns_keeps_its_partitions() -> None:
    state = ideal(4, {0: "w1", 1: "w1", 2: "w2", 3: "w2"})
    gone = run(state, live("w1"), now=1000.0)
    back = run(gone.ideal, live("w1", "w2"), departed_at=gone.departed_at, now=1005.0)
    assert back.ideal[ORDERS].assignment == {0: "w1", 1: "w1", 2: "w2", 3: "w2"}
    assert back.departed_at == {} and back.retained_until == {}


def test_a_retained_worker_receives_no_new_partitions() -> None:
    state = ideal(4, {0: "w2"})
    result = run(state, live("w1"), now=1000.0)
    assert result.ideal[ORDERS].assignment == {0: "w2", 1: "w1", 2: "w1", 3: "w1"}


def test_a_leaving_worker_gets_nothing_and_is_not_retained() -> None:
    state = ideal(4, {0: "w1", 1: "w1", 2: "w2", 3: "w2"})
    # w1 drains: it reports leaving with every partition released (OFFLINE).
    statuses = {"w1": status([key(0), key(1)], PartitionState.OFFLINE, leaving=True), "w2": status([key(2), key(3)])}
    result = run(state, live("w1", "w2"), statuses, written={"w1": [key(0), key(1)], "w2": [key(2), key(3)]})
    assert result.ideal[ORDERS].assignment == dict.fromkeys(range(4), "w2")
    assert result.assignments["w1"] == frozenset()
    assert result.assignments["w2"] == frozenset(key(p) for p in range(4))
    assert "w1" not in result.retained_until and "w1" not in result.departed_at
    assert active_workers(live("w1", "w2"), statuses) == {"w2"}


def test_a_leaving_worker_gets_no_partition_of_a_new_topic() -> None:
    statuses = {"w1": status(leaving=True)}
    result = run(ideal(5), live("w1", "w2"), statuses)
    assert result.ideal[ORDERS].assignment == dict.fromkeys(range(5), "w2")
    assert result.assignments["w1"] == frozenset()


def test_a_leaving_worker_whose_live_node_is_already_gone_is_not_retained() -> None:
    # A draining worker writes leaving=true, deletes its live node, then exits: the leader may
    # read the snapshot between the last two steps (status still there, live node gone).
    state = ideal(4, {0: "w1", 1: "w1", 2: "w2", 3: "w2"})
    statuses = {"w1": status([key(0), key(1)], PartitionState.OFFLINE, leaving=True), "w2": status([key(2), key(3)])}
    result = run(state, live("w2"), statuses, written={"w1": [key(0), key(1)], "w2": [key(2), key(3)]})
    assert result.ideal[ORDERS].assignment == dict.fromkeys(range(4), "w2")
    assert "w1" not in result.retained_until
    assert result.assignments["w1"] == frozenset()  # emptied now, deleted at the next plan


def test_without_rebalance_a_joining_worker_takes_nothing() -> None:
    state = ideal(8, dict.fromkeys(range(8), "w1"))
    result = run(state, live("w1", "w2"))
    assert counts(result) == {"w1": 8}
    assert result.moved == 0
    assert result.assignments["w2"] == frozenset()


def test_rebalance_after_a_join_moves_the_minimum_to_balance_within_one() -> None:
    state = ideal(9, dict.fromkeys(range(9), "w1"))
    result = run(state, live("w1", "w2"), rebalance=True)
    assert sorted(counts(result).values()) == [4, 5]
    assert result.moved == 4  # the fewest that balance 9 over two workers
    before = state[ORDERS].assignment
    assert sum(before[p] != w for p, w in result.ideal[ORDERS].assignment.items()) == 4


def test_rebalance_of_a_balanced_assignment_moves_nothing() -> None:
    state = ideal(5, {0: "w1", 1: "w2", 2: "w1", 3: "w2", 4: "w1"})
    result = run(state, live("w1", "w2"), rebalance=True)
    assert result.moved == 0
    assert result.ideal[ORDERS].assignment == state[ORDERS].assignment


def test_a_move_from_a_live_worker_waits_until_it_released_the_partition() -> None:
    state = ideal(4, dict.fromkeys(range(4), "a"))
    holding = {"a": status([key(p) for p in range(4)])}
    step1 = run(state, live("a", "b"), holding, written={"a": [key(p) for p in range(4)]}, rebalance=True)
    moving = {key(p) for p, w in step1.ideal[ORDERS].assignment.items() if w == "b"}
    staying = {key(p) for p in range(4)} - moving
    assert len(moving) == 2
    # a stops copying what moves; b does not get it while a still reports it ONLINE.
    assert step1.assignments["a"] == frozenset(staying)
    assert step1.assignments["b"] == frozenset()

    # a reported the moved partitions OFFLINE: now b is told to copy them.
    released = {
        "a": WorkerStatus(
            2,
            {
                **{p: PartitionStatus(PartitionState.ONLINE) for p in staying},
                **{p: PartitionStatus(PartitionState.OFFLINE) for p in moving},
            },
        )
    }
    step2 = run(step1.ideal, live("a", "b"), released, written=step1.assignments)
    assert step2.ideal[ORDERS].assignment == step1.ideal[ORDERS].assignment
    assert step2.assignments == {"a": frozenset(staying), "b": frozenset(moving)}


def test_a_partition_in_error_on_the_old_worker_must_be_released_too() -> None:
    state = ideal(1, {0: "b"})
    statuses = {"a": status([key(0)], PartitionState.ERROR)}
    result = run(state, live("a", "b"), statuses, written={"a": [key(0)], "b": []})
    assert result.assignments["b"] == frozenset()


def test_a_dead_holder_does_not_block_a_move() -> None:
    # a's session is gone (not live) but its last status was still read: b may start at once.
    state = ideal(1, {0: "b"})
    statuses = {"a": status([key(0)])}
    result = run(state, live("b"), statuses, written={"a": [key(0)], "b": []})
    assert result.assignments["b"] == frozenset({key(0)})


def test_every_live_worker_has_a_node_and_an_empty_one_of_a_departed_worker_is_deleted() -> None:
    result = run(ideal(2), live("w1", "w2", "w3", "w4"), written={"old": [], "w1": []})
    assert set(result.assignments) == {"w1", "w2", "w3", "w4"}  # "old" is not named: its node is deleted
    assert sum(len(parts) for parts in result.assignments.values()) == 2
    assert all(isinstance(parts, frozenset) for parts in result.assignments.values())


def test_a_departed_worker_s_node_is_emptied_then_deleted() -> None:
    # w2 left (leaving, live node gone) with its node still naming what it copied.
    state = ideal(2, {0: "w1", 1: "w2"})
    statuses = {"w1": status([key(0)]), "w2": status([key(1)], PartitionState.OFFLINE, leaving=True)}
    first = run(state, live("w1"), statuses, written={"w1": [key(0)], "w2": [key(1)]})
    assert first.assignments == {"w1": frozenset({key(0), key(1)}), "w2": frozenset()}
    second = run(first.ideal, live("w1"), statuses, written=first.assignments, departed_at=first.departed_at)
    assert second.assignments == {"w1": frozenset({key(0), key(1)})}
    third = run(second.ideal, live("w1"), statuses, written=second.assignments, departed_at=second.departed_at)
    assert third.assignments == second.assignments


def test_a_retained_worker_whose_partitions_are_withheld_gets_no_node() -> None:
    # A rebalance gave w0 a partition that w1 still copies, then w0 died: w0 is retained (the ideal
    # state still names it) but granted nothing, and a worker that is not live is never given an
    # empty node, neither now nor at any later plan (it would be created and deleted in turn).
    state = ideal(1, {0: "w0"})
    statuses = {"w1": status([key(0)])}
    first = run(state, live("w1"), statuses, written={"w1": []}, now=1000.0)
    assert first.retained_until == {"w0": 1000.0 + DELAY}
    assert first.assignments == {"w1": frozenset()}
    again = run(first.ideal, live("w1"), statuses, written=first.assignments, departed_at=first.departed_at, now=1001.0)
    assert again.assignments == {"w1": frozenset()}
    # Once w1 released it, the partition is granted to w0 (still retained): its node is created then.
    released = {"w1": status([key(0)], PartitionState.OFFLINE)}
    granted = run(
        again.ideal, live("w1"), released, written=again.assignments, departed_at=again.departed_at, now=1002.0
    )
    assert granted.assignments == {"w1": frozenset(), "w0": frozenset({key(0)})}


def test_partitions_beyond_the_count_are_dropped() -> None:
    state = {ORDERS: IdealState(ROUTE, "orders", 2, {0: "w1", 1: "w1", 5: "w1"})}
    result = run(state, live("w1"))
    assert result.ideal[ORDERS].assignment == {0: "w1", 1: "w1"}


def test_external_views_are_built_for_every_ideal_topic() -> None:
    clicks = TopicKey(ROUTE, "clicks")
    other_route = TopicKey("dst.src", "orders")
    deleted = TopicKey(ROUTE, "deleted")
    states = {**ideal(2, {0: "w1", 1: "w2"}), **ideal(1, topic=clicks), **ideal(1, topic=other_route)}
    statuses = {
        "w1": WorkerStatus(
            1, {key(0): PartitionStatus(PartitionState.ONLINE), key(0, deleted): PartitionStatus(PartitionState.ONLINE)}
        ),
        "w2": WorkerStatus(1, {key(1): PartitionStatus(PartitionState.ERROR, "MSG_SIZE_TOO_LARGE")}),
    }
    result = run(states, live("w1", "w2"), statuses)
    assert set(result.external) == {ORDERS, clicks, other_route}  # not the deleted topic a worker still reports
    assert result.external[ORDERS] == ExternalView(
        ROUTE,
        "orders",
        {
            0: {"worker": "w1", "state": "ONLINE"},
            1: {"worker": "w2", "state": "ERROR", "reason": "MSG_SIZE_TOO_LARGE"},
        },
    )
    assert result.external[clicks] == ExternalView(ROUTE, "clicks")
    assert result.external[other_route] == ExternalView("dst.src", "orders")


def test_plan_is_deterministic() -> None:
    states = {**ideal(7), **ideal(5, topic=TopicKey(ROUTE, "clicks"))}
    first = run(states, live("w3", "w1", "w2"))
    second = run(dict(reversed(list(states.items()))), live("w2", "w3", "w1"))
    assert first.ideal == second.ideal
    assert first.assignments == second.assignments
