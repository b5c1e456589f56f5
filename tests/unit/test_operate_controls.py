"""An operator's controls (pure): pauses, cordons, throttle shares, the token bucket, and the
leader's planner with cordoned and drained workers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.core.operate.controls import (
    CORDON,
    DRAIN,
    Controls,
    Throttle,
    shares,
    shares_from_bytes,
    shares_to_bytes,
)
from ferry.common.core.operate.rate import RouteThrottle, TokenBucket
from ferry.common.model import IdealState, PartitionKey, TopicKey, WorkerInfo, WorkerStatus
from ferry.controller.lead.leader_state import LeaderState
from ferry.controller.lead.store import Snapshot

pytestmark = pytest.mark.unit

ROUTE = "src.dst"


def key(topic: str, partition: int, route: str = ROUTE) -> PartitionKey:
    return PartitionKey(route, topic, partition)


# -- controls ------------------------------------------------------------------------------------


def test_pausing_some_partitions_and_a_whole_topic() -> None:
    controls = Controls().pause(ROUTE, "a", [1, 2]).pause(ROUTE, "b", None)
    assert controls.paused_among([key("a", 0), key("a", 1), key("a", 2), key("b", 7)]) == {
        key("a", 1),
        key("a", 2),
        key("b", 7),
    }
    assert not controls.is_paused(key("a", 1, route="x.y"))
    resumed = controls.resume(ROUTE, "a", [1]).resume(ROUTE, "b", None)
    assert resumed.paused == {ROUTE: {"a": frozenset({2})}}
    assert resumed.resume(ROUTE, "a", [2]).paused == {}


def test_a_topic_paused_whole_is_resumed_whole() -> None:
    controls = Controls().pause(ROUTE, "a", None)
    assert controls.pause(ROUTE, "a", [3]).paused == {ROUTE: {"a": None}}  # stays whole
    with pytest.raises(ValueError, match="whole"):
        controls.resume(ROUTE, "a", [0])


def test_controls_round_trip_through_their_payload() -> None:
    controls = (
        Controls()
        .pause(ROUTE, "a", [0])
        .cordon("w1", CORDON)
        .cordon("w2", DRAIN)
        .with_autobalancing(False)
        .throttle(ROUTE, Throttle(None, 100.0))
    )
    assert Controls.from_bytes(controls.to_bytes()) == controls
    assert controls.drained() == {"w2"}
    assert controls.uncordon("w2").drained() == set()
    assert controls.throttle(ROUTE, Throttle()).throttles == {}  # no limit at all: back to the config's
    assert Controls.from_bytes(None) == Controls()
    with pytest.raises(ValueError):
        Controls.from_bytes(b"[1]")


def test_a_routes_budget_splits_by_each_workers_share_of_its_partitions() -> None:
    assignment = {
        key("a", 0): "w1",
        key("a", 1): "w1",
        key("a", 2): "w1",
        key("a", 3): "w2",
        key("a", 0, route="x.y"): "w3",
    }
    split = shares({ROUTE: Throttle(1000.0, 100.0)}, assignment)
    assert split == {"w1": {ROUTE: Throttle(750.0, 75.0)}, "w2": {ROUTE: Throttle(250.0, 25.0)}}
    assert shares_from_bytes(shares_to_bytes(split)) == split
    assert shares({}, assignment) == {}


@given(st.dictionaries(st.integers(0, 50), st.sampled_from(["w1", "w2", "w3"]), min_size=1), st.floats(1, 1e6))
def test_the_shares_add_up_to_the_budget(placement: dict[int, str], rate: float) -> None:
    split = shares({ROUTE: Throttle(None, rate)}, {key("t", p): w for p, w in placement.items()})
    total = sum(t[ROUTE].max_records_per_s or 0 for t in split.values())
    assert total == pytest.approx(rate)


# -- the token bucket ----------------------------------------------------------------------------


def test_an_unlimited_bucket_allows_everything() -> None:
    bucket = TokenBucket(None)
    assert bucket.allowance(0.0) is None
    assert bucket.wait_s(10, 0.0) == 0.0


def test_a_bucket_starts_full_refills_at_its_rate_and_never_above_capacity() -> None:
    bucket = TokenBucket(100.0, burst_s=0.5)
    assert bucket.allowance(0.0) == 50.0
    bucket.spend(50, 0.0)
    assert bucket.allowance(0.1) == pytest.approx(10.0)
    assert bucket.allowance(100.0) == 50.0


def test_an_overdrawn_bucket_allows_nothing_until_the_debt_is_paid() -> None:
    bucket = TokenBucket(10.0, burst_s=1.0)
    bucket.spend(30, 0.0)  # a whole batch, more than the allowance
    assert bucket.allowance(0.5) == 0.0
    assert bucket.wait_s(1, 0.5) == pytest.approx(1.6)
    assert bucket.allowance(2.1) == pytest.approx(1.0)


def test_a_new_rate_keeps_what_was_saved_up_to_the_new_capacity() -> None:
    bucket = TokenBucket(100.0, burst_s=1.0)
    bucket.allowance(0.0)
    bucket.set_rate(10.0, 0.0)
    assert bucket.allowance(0.0) == 10.0


@settings(max_examples=30, deadline=None)
@given(st.floats(5, 500), st.integers(1, 2000), st.lists(st.floats(0.00001, 0.0001), min_size=1, max_size=30))
def test_batches_that_take_what_the_bucket_allows_hold_the_rate_over_30_seconds(
    rate: float, batch: int, steps: list[float]
) -> None:
    """A copy loop taking, per batch, min(batch, allowance) records holds the rate within 10 % over 30 s."""
    throttle = RouteThrottle(None, rate)
    now, taken, i = 0.0, 0, 0
    while now < 30.0:
        allowed = throttle.records_allowed(batch, now)
        if allowed:
            throttle.used(allowed, allowed * 100, now)
            taken += allowed
            now += steps[i % len(steps)]  # the batch's own time: faster than the budget allows
        else:
            now += max(throttle.wait_s(now), 0.0001)
        i += 1
    # The demand is always there (a busy source): the rate is the throttle's within 10 %.
    assert taken <= rate * 30 * 1.1 + 1
    assert taken >= rate * 30 * 0.9 - batch


def test_a_byte_budget_spent_stops_the_next_batch() -> None:
    throttle = RouteThrottle(1000.0, None, burst_s=1.0)
    assert throttle.records_allowed(500, 0.0) == 500
    throttle.used(500, 5000, 0.0)
    assert throttle.records_allowed(500, 1.0) == 0
    assert throttle.wait_s(1.0) == pytest.approx(3.0, abs=0.01)


# -- the planner with cordoned and drained workers -------------------------------------------------


def _leader_state(assignment: dict[int, str], workers: list[str], partitions: int = 8) -> LeaderState:
    topic = TopicKey(ROUTE, "t")
    return LeaderState(
        Snapshot(
            live={w: WorkerInfo(w, "h", 1) for w in workers},
            statuses={w: WorkerStatus(0) for w in workers},
            ideal={topic: IdealState(ROUTE, "t", partitions, assignment)},
            ideal_versions={topic: 0},
        )
    )


def _holding(leader_state: LeaderState) -> dict[str, int]:
    return {w: len(held) for w, held in leader_state.holding().items()}


def test_a_cordoned_worker_keeps_its_partitions_and_receives_nothing_new() -> None:
    leader_state = _leader_state({}, ["w1", "w2"])
    leader_state.set_cordoned(frozenset({"w1"}), frozenset())
    leader_state.plan(0.0, 10.0)
    assert _holding(leader_state) == {"w2": 8}
    leader_state.set_cordoned(frozenset(), frozenset())
    leader_state.plan(1.0, 10.0, rebalance=True)
    assert _holding(leader_state) == {"w1": 4, "w2": 4}
    leader_state.set_cordoned(frozenset({"w1"}), frozenset())
    leader_state.plan(2.0, 10.0, rebalance=True)  # neither moves nor counts
    assert _holding(leader_state) == {"w1": 4, "w2": 4}


def test_a_drained_worker_gives_its_partitions_to_the_others() -> None:
    leader_state = _leader_state({p: ("w1" if p < 4 else "w2") for p in range(8)}, ["w1", "w2", "w3"])
    leader_state.set_cordoned(frozenset({"w1"}), frozenset({"w1"}))
    changes = leader_state.plan(0.0, 10.0)
    assert _holding(leader_state) == {"w2": 4, "w3": 4}  # placed on the least loaded
    assert changes.moved == 4
    leader_state.plan(1.0, 10.0, rebalance=True)
    assert _holding(leader_state) == {"w2": 4, "w3": 4}  # and it receives nothing from a rebalance


def test_the_paused_partitions_of_the_ideal_state_cost_what_is_paused() -> None:
    ideal = {
        TopicKey(ROUTE, "a"): IdealState(ROUTE, "a", 3),
        TopicKey(ROUTE, "b"): IdealState(ROUTE, "b", 2),
    }
    controls = Controls().pause(ROUTE, "a", [1, 5]).pause(ROUTE, "b", None).pause(ROUTE, "gone", None)
    # Partition 5 of a is beyond its count; the topic "gone" is not in the ideal state.
    assert controls.paused_partitions(ideal) == {key("a", 1), key("b", 0), key("b", 1)}
    assert Controls().paused_partitions(ideal) == set()


def test_partitions_left_unassigned_by_cordons_are_counted_as_the_operators_choice() -> None:
    leader_state = _leader_state({p: "w1" for p in range(8)}, ["w1", "w2"])
    leader_state.set_cordoned(frozenset({"w1", "w2"}), frozenset({"w1"}))  # w1 drained, w2 cordoned: no taker
    leader_state.plan(0.0, 10.0)
    assert _holding(leader_state) == {}
    assert leader_state.cordoned_unassigned == 8
    leader_state.set_cordoned(frozenset({"w1"}), frozenset({"w1"}))  # w2 takes them
    leader_state.plan(1.0, 10.0)
    assert _holding(leader_state) == {"w2": 8}
    assert leader_state.cordoned_unassigned == 0


def test_partitions_without_any_live_worker_are_not_the_operators_choice() -> None:
    leader_state = _leader_state({}, [])
    leader_state.plan(0.0, 10.0)
    assert _holding(leader_state) == {}
    assert leader_state.cordoned_unassigned == 0
