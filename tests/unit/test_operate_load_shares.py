"""A route's throttle split by measured demand (pure), and the demand the leader estimates from load reports."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from ferry.common.config import ControllerConfig
from ferry.common.core.assignment import Rate
from ferry.common.core.operate.controls import Throttle, shares
from ferry.common.core.operate.load_shares import (
    RESERVE,
    Demand,
    next_demand,
    settled,
    shares_by_load,
    split,
)
from ferry.common.model import PartitionKey, PartitionLoad, PartitionStatus, WorkerStatus
from ferry.common.vocabulary import PartitionState
from ferry.controller.lead.load_balance import LoadBalancer

pytestmark = pytest.mark.unit

ROUTE = "src.dst"
WORKERS = ["w1", "w2", "w3", "w4"]


def key(topic: str, partition: int, route: str = ROUTE) -> PartitionKey:
    return PartitionKey(route, topic, partition)


# -- the split ------------------------------------------------------------------------------------


def test_a_worker_with_a_hot_partition_gets_the_budget_by_demand_not_by_count() -> None:
    assignment = {key("t", 0): "w1", key("t", 1): "w2", key("t", 2): "w2", key("t", 3): "w2"}
    demand = {key("t", 0): Rate(3000, 30), key("t", 1): Rate(500, 5), key("t", 2): Rate(500, 5), key("t", 3): Rate()}
    split_ = shares_by_load({ROUTE: Throttle(5000.0, None)}, assignment, demand)
    # 10 % evenly (250 each), the other 4500 by demand: 3/4 and 1/4.
    assert split_ == {"w1": {ROUTE: Throttle(250.0 + 3375.0, None)}, "w2": {ROUTE: Throttle(250.0 + 1125.0, None)}}
    by_count = shares({ROUTE: Throttle(5000.0, None)}, assignment)
    assert by_count["w1"][ROUTE].max_bytes_per_s == 1250.0  # below the 3000 it must copy


def test_unmeasured_partitions_weigh_as_the_mean_and_a_route_measured_nowhere_splits_by_count() -> None:
    assignment = {key("t", 0): "w1", key("t", 1): "w2", key("t", 2): "w2", key("u", 0, route="x.y"): "w1"}
    budgets = {ROUTE: Throttle(None, 1000.0), "x.y": Throttle(None, 10.0)}
    measured_one = shares_by_load(budgets, assignment, {key("t", 0): Rate(0, 100)})
    # t/1 and t/2 weigh 100 each as the mean measured partition: w2 has twice w1's demand.
    assert measured_one["w1"][ROUTE].max_records_per_s == pytest.approx(50 + 900 / 3)
    assert measured_one["w2"][ROUTE].max_records_per_s == pytest.approx(50 + 900 * 2 / 3)
    assert measured_one["w1"]["x.y"] == Throttle(None, 10.0)
    measured_none = shares_by_load(budgets, assignment, {})
    assert measured_none["w1"][ROUTE].max_records_per_s == pytest.approx(50 + 900 / 3)
    assert shares_by_load({}, assignment, {}) == {}


def test_a_route_measured_idle_everywhere_splits_evenly() -> None:
    assignment = {key("t", 0): "w1", key("t", 1): "w2", key("t", 2): "w2"}
    idle = dict.fromkeys(assignment, Rate())
    assert shares_by_load({ROUTE: Throttle(600.0, 60.0)}, assignment, idle) == {
        "w1": {ROUTE: Throttle(300.0, 30.0)},
        "w2": {ROUTE: Throttle(300.0, 30.0)},
    }


loads = st.dictionaries(st.sampled_from(WORKERS), st.floats(0, 1e7), min_size=1)


@given(loads, st.floats(1, 1e9), st.floats(0, 0.5))
def test_the_parts_add_up_to_the_budget_none_is_below_the_floor_and_more_load_gets_no_less(
    worker_loads: dict[str, float], budget: float, reserve: float
) -> None:
    parts = split(budget, worker_loads, reserve)
    assert sum(parts.values()) == pytest.approx(budget)
    floor = budget * reserve / len(worker_loads)
    assert all(part >= floor * (1 - 1e-9) for part in parts.values())
    for a in worker_loads:
        for b in worker_loads:
            if worker_loads[a] > worker_loads[b]:
                assert parts[a] >= parts[b] * (1 - 1e-9)


@given(
    st.dictionaries(st.integers(0, 40), st.sampled_from(WORKERS), min_size=1),
    st.dictionaries(st.integers(0, 40), st.integers(0, 10**6)),
    st.floats(1, 1e9),
)
def test_each_routes_shares_add_up_to_its_budget_over_any_assignment_and_demand(
    placement: dict[int, str], measured: dict[int, int], budget: float
) -> None:
    assignment = {key("t", p): w for p, w in placement.items()}
    demand = {key("t", p): Rate(rate, rate // 100) for p, rate in measured.items()}
    split_ = shares_by_load({ROUTE: Throttle(budget, budget / 100)}, assignment, demand)
    assert set(split_) == set(placement.values())
    assert sum(s[ROUTE].max_bytes_per_s or 0 for s in split_.values()) == pytest.approx(budget)
    assert sum(s[ROUTE].max_records_per_s or 0 for s in split_.values()) == pytest.approx(budget / 100)
    floor = budget * RESERVE / len(split_)
    assert all((s[ROUTE].max_bytes_per_s or 0) >= floor * (1 - 1e-9) for s in split_.values())


# -- shares kept while close ------------------------------------------------------------------------


def test_shares_within_the_tolerance_of_the_same_budget_are_kept() -> None:
    written = {"w1": {ROUTE: Throttle(600.0, None)}, "w2": {ROUTE: Throttle(400.0, None)}}
    assert settled(written, {"w1": {ROUTE: Throttle(610.0, None)}, "w2": {ROUTE: Throttle(390.0, None)}})
    assert not settled(written, {"w1": {ROUTE: Throttle(700.0, None)}, "w2": {ROUTE: Throttle(300.0, None)}})
    assert not settled(written, {"w1": {ROUTE: Throttle(605.0, None)}, "w2": {ROUTE: Throttle(405.0, None)}})  # budget
    assert not settled(written, {"w1": {ROUTE: Throttle(1000.0, None)}})  # w2 holds nothing of it now
    assert not settled(written, {"w1": {ROUTE: Throttle(600.0, 6.0)}, "w2": {ROUTE: Throttle(400.0, 4.0)}})
    assert settled({}, {})


# -- demand from load reports -----------------------------------------------------------------------


def test_demand_is_the_copied_rate_plus_the_lags_growth() -> None:
    first = next_demand(None, "w1", PartitionLoad(100_000, 100, 500), 0.0)
    assert first == Demand("w1", 500, 0.0, Rate(100_000, 100))
    grown = next_demand(first, "w1", PartitionLoad(100_000, 100, 3500), 3.0)  # 1000 records/s not copied
    assert grown.rate == Rate(1_100_000, 1100)
    shrunk = next_demand(grown, "w1", PartitionLoad(150_000, 150, 500), 6.0)  # catching up: what it copies
    assert shrunk.rate == Rate(150_000, 150)
    starved = next_demand(shrunk, "w1", PartitionLoad(0, 0, 1100), 9.0)  # nothing copied: the last record size
    assert starved.rate == Rate(200_000, 200)


def test_no_growth_from_a_lag_of_zero_and_a_new_owner_keeps_the_former_estimate_where_higher() -> None:
    unmeasured = next_demand(None, "w1", PartitionLoad(1000, 1, 0), 0.0)
    assert next_demand(unmeasured, "w1", PartitionLoad(1000, 1, 30_000), 3.0).rate == Rate(1000, 1)
    former = Demand("w1", 900, 0.0, Rate(2000, 20))
    assert next_demand(former, "w2", PartitionLoad(500, 5, 4000), 3.0) == Demand("w2", 4000, 3.0, Rate(2000, 20))
    assert next_demand(former, "w2", PartitionLoad(5000, 50, 40), 3.0).rate == Rate(5000, 50)


def test_the_balancer_estimates_demand_across_a_move_and_forgets_unassigned_partitions() -> None:
    config = ControllerConfig.model_validate({"load_balance_min_bytes_per_s": 0})
    balancer = LoadBalancer(config, CollectorRegistry())
    hot, cold = key("t", 0), key("t", 1)

    def report(worker: str, load: dict[PartitionKey, PartitionLoad], now: float) -> None:
        online = PartitionStatus(PartitionState.ONLINE)
        balancer.observe(worker, WorkerStatus(1, dict.fromkeys(load, online), load=load, busy=0.5), now)

    report("w1", {hot: PartitionLoad(1000, 10, 100), cold: PartitionLoad(100, 1, 5)}, 0.0)
    report("w1", {hot: PartitionLoad(1000, 10, 400), cold: PartitionLoad(100, 1, 5)}, 3.0)
    assert balancer.demand({hot: "w1", cold: "w1"}) == {hot: Rate(11_000, 110), cold: Rate(100, 1)}
    report("w1", {cold: PartitionLoad(100, 1, 5)}, 6.0)  # hot moved to w2
    report("w2", {hot: PartitionLoad(300, 3, 2000)}, 6.5)  # a partial first window
    assert balancer.demand({hot: "w2"}) == {hot: Rate(11_000, 110)}
    balancer.reset()
    assert balancer.demand({hot: "w2"}) == {}


@given(st.dictionaries(st.integers(0, 40), st.tuples(st.sampled_from(WORKERS), st.integers(0, 10**6)), min_size=1))
def test_a_worker_whose_partitions_demand_more_gets_no_smaller_a_share(placed: dict[int, tuple[str, int]]) -> None:
    assignment = {key("t", p): w for p, (w, _) in placed.items()}
    demand = {key("t", p): Rate(rate, 0) for p, (_, rate) in placed.items()}
    split_ = shares_by_load({ROUTE: Throttle(1e6, None)}, assignment, demand)
    load = {w: sum(rate for worker, rate in placed.values() if worker == w) for w in split_}
    for a in load:
        for b in load:
            if load[a] > load[b]:
                assert (split_[a][ROUTE].max_bytes_per_s or 0) >= (split_[b][ROUTE].max_bytes_per_s or 0) * (1 - 1e-9)
