"""The leader's balance by load: load reports in the status, lag watches, stuck partitions, the moves."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from ferry.common.config import ControllerConfig
from ferry.common.core.assignment import Rate, rebalance_by_load
from ferry.common.model import (
    IdealState,
    PartitionKey,
    PartitionLoad,
    PartitionStatus,
    TopicKey,
    WorkerInfo,
    WorkerStatus,
)
from ferry.common.vocabulary import PartitionState
from ferry.controller.lead.leader_state import LeaderState
from ferry.controller.lead.load_balance import LoadBalancer
from ferry.controller.lead.reconciler import describe_moves
from ferry.controller.lead.store import Snapshot

pytestmark = pytest.mark.unit

P = [PartitionKey("a.b", "t", p) for p in range(4)]
ONLINE = PartitionStatus(PartitionState.ONLINE)


def status(load: dict[PartitionKey, PartitionLoad], busy: float | None) -> WorkerStatus:
    return WorkerStatus(3, dict.fromkeys(load, ONLINE), load=load, busy=busy)


def balancer(**settings: object) -> LoadBalancer:
    config = ControllerConfig.model_validate({"stuck_after_s": 60, "load_balance_min_bytes_per_s": 0, **settings})
    return LoadBalancer(config, CollectorRegistry())


def test_a_status_with_its_load_round_trips_and_one_without_keeps_its_old_bytes() -> None:
    loaded = status({P[0]: PartitionLoad(1000, 10, 7)}, 0.5)
    assert WorkerStatus.from_bytes(loaded.to_bytes()) == loaded
    assert b"load" not in WorkerStatus(1, {P[0]: ONLINE}).to_bytes()


def test_a_partition_whose_lag_grows_on_a_saturated_worker_is_stuck_after_the_delay() -> None:
    lb = balancer()
    for t, lag in [(0, 10), (30, 20), (60, 30)]:
        lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, lag), P[1]: PartitionLoad(10, 1, 0)}, 0.95), t)
    assert lb.stuck(60) == set()  # growing since 30
    lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, 40), P[1]: PartitionLoad(10, 1, 0)}, 0.95), 90)
    assert lb.stuck(90) == {P[0]}
    holding = {P[0]: "w1", P[1]: "w1"}
    assert lb.plan(holding, {"w1", "w2"}, 90) == {P[0]: "w2"}
    assert lb.stuck(90) == set()  # its new owner's reports start again


@pytest.mark.parametrize(
    ("busy", "lags"), [(0.5, [10, 20, 30, 40]), (0.95, [10, 20, 15, 40]), (None, [10, 20, 30, 40])]
)
def test_no_stuck_partition_without_saturation_or_with_a_pause_in_the_growth(
    busy: float | None, lags: list[int]
) -> None:
    lb = balancer()
    for t, lag in zip([0, 30, 60, 90], lags, strict=True):
        lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, lag)}, busy), t)
    assert lb.stuck(90) == set()


def test_the_same_report_seen_twice_is_one_report() -> None:
    lb = balancer()
    lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, 10)}, 0.95), 0)
    lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, 20)}, 0.95), 10)
    lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, 20)}, 0.95), 20)
    lb.observe("w1", status({P[0]: PartitionLoad(1000, 10, 30)}, 0.95), 70)
    assert lb.stuck(70) == {P[0]}


def test_plan_rebalances_by_the_reported_rates_and_the_gauges_show_them() -> None:
    lb = balancer()
    lb.observe("w1", status({P[0]: PartitionLoad(5000, 50, 0), P[1]: PartitionLoad(5000, 50, 0)}, 0.2), 0)
    lb.observe("w2", status({P[2]: PartitionLoad(10, 1, 0), P[3]: PartitionLoad(10, 1, 0)}, 0.1), 0)
    assert lb.rates()[P[0]] == Rate(5000, 50)
    assert lb.bytes_gauge.labels("w1")._value.get() == 10_000
    holding = {P[0]: "w1", P[1]: "w1", P[2]: "w2", P[3]: "w2"}
    moves = lb.plan(holding, {"w1", "w2"}, 0)
    assert len(moves) == 1 and set(moves.values()) == {"w2"}
    assert lb.plan(holding, {"w1"}, 0) == {}
    assert balancer(load_balance_min_bytes_per_s=1_000_000).plan(holding, {"w1", "w2"}, 0) == {}  # no report yet
    lb.observe("w1", None, 1)
    assert "w1" not in {s.labels.get("worker") for m in lb.bytes_gauge.collect() for s in m.samples}


def test_little_traffic_is_not_rebalanced() -> None:
    lb = balancer(load_balance_min_bytes_per_s=1_000_000)
    lb.observe("w1", status({P[0]: PartitionLoad(5000, 50, 0), P[1]: PartitionLoad(5000, 50, 0)}, 0.2), 0)
    assert lb.plan({P[0]: "w1", P[1]: "w1"}, {"w1", "w2"}, 0) == {}


def test_the_leader_state_places_by_rates_and_applies_moves_onto_active_workers_only() -> None:
    hot, new = TopicKey("a.b", "hot"), TopicKey("a.b", "new")
    live = {w: WorkerInfo(w, "h", 1) for w in ("w1", "w2")}
    leader_state = LeaderState(
        Snapshot(live=live, ideal={hot: IdealState("a.b", "hot", 2, {0: "w1", 1: "w1"})}, ideal_versions={hot: 0})
    )
    leader_state.applied(leader_state.plan(0.0, 10.0), 1)
    rates = {PartitionKey("a.b", "hot", 0): Rate(9000, 9), PartitionKey("a.b", "hot", 1): Rate(9000, 9)}
    leader_state.put_topic(new, IdealState("a.b", "new", 2), 1)
    changes = leader_state.plan(1.0, 10.0, rates=lambda: rates)
    assert changes.ideal[new].assignment == {0: "w2", 1: "w2"}  # w1 copies 18,000 B/s, w2 nothing
    leader_state.applied(changes, 2)
    changes = leader_state.plan(
        2.0, 10.0, moves={PartitionKey("a.b", "hot", 1): "w2", PartitionKey("a.b", "hot", 0): "gone"}
    )
    assert changes.ideal[hot].assignment == {0: "w1", 1: "w2"} and changes.moved == 1


def test_a_load_balance_run_is_logged_with_each_workers_bytes_and_each_move_with_its_rate() -> None:
    holding = {P[0]: "w1", P[1]: "w1", P[2]: "w2"}
    rates = {P[0]: Rate(3000, 3), P[1]: Rate(1000, 1), P[2]: Rate(500, 1)}
    line = describe_moves(holding, {P[1]: "w2"}, rates)
    assert line == "worker bytes/s w1 4000, w2 500; moving a.b/t/1 w1->w2 (1000 B/s)"


def test_a_moved_partition_weighs_at_least_its_former_rate_until_a_full_window_at_its_new_owner() -> None:
    lb = balancer()
    lb.observe("w1", status({P[0]: PartitionLoad(5000, 50, 0), P[1]: PartitionLoad(5000, 50, 0)}, 0.2), 0)
    lb.observe("w2", status({P[2]: PartitionLoad(2000, 20, 0), P[3]: PartitionLoad(5000, 50, 0)}, 0.1), 0)
    # P[1] and P[3] swapped owners; w2 held P[1] for a fiftieth of its window: it looks far lighter than it is.
    lb.observe("w1", status({P[0]: PartitionLoad(5000, 50, 0), P[3]: PartitionLoad(5000, 50, 0)}, 0.2), 10)
    lb.observe("w2", status({P[1]: PartitionLoad(100, 1, 0), P[2]: PartitionLoad(2000, 20, 0)}, 0.1), 10)
    holding = {P[0]: "w1", P[1]: "w2", P[2]: "w2", P[3]: "w1"}
    assert rebalance_by_load(holding, {"w1", "w2"}, lb.rates(holding), 1.2) != holding  # on the partial rate
    assert lb.partial(holding, {"w1", "w2"}) == {P[1], P[3]}
    assert lb.plan(holding, {"w1", "w2"}, 10) == {}
    lb.observe("w2", status({P[1]: PartitionLoad(5000, 50, 0), P[2]: PartitionLoad(2000, 20, 0)}, 0.1), 20)
    assert lb.partial(holding, {"w1", "w2"}) == {P[3]}  # w1's window repeats its last: the same report
    assert lb.plan(holding, {"w1", "w2"}, 20) == {}  # within 1.2 of the mean, nothing to undo
    lb.observe("w2", status({P[1]: PartitionLoad(100, 1, 0), P[2]: PartitionLoad(2000, 20, 0)}, 0.1), 30)
    assert lb.plan(holding, {"w1", "w2"}, 30) != {}  # a real imbalance, over a full window, moves at once
