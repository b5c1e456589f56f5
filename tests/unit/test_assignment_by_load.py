"""The planner by measured load: placement, rebalance with a ratio, hot partitions, stuck partitions."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.assignment import (
    Rate,
    assign,
    assign_by_load,
    loads,
    moved,
    rebalance,
    rebalance_by_load,
    relieve_stuck,
)
from ferry.common.model import PartitionKey
from tests.oracles.assignment import minimal_moves

pytestmark = pytest.mark.unit

WORKERS = ["w1", "w2", "w3", "w4"]
ALL = [PartitionKey(r, t, p) for r, t in [("a.b", "orders"), ("a.b", "clicks"), ("b.a", "orders")] for p in range(6)]


def topic(name: str, count: int) -> list[PartitionKey]:
    return [PartitionKey("a.b", name, p) for p in range(count)]


def bytes_of(
    assignment: dict[PartitionKey, str], rates: dict[PartitionKey, Rate], workers: list[str]
) -> dict[str, int]:
    result = dict.fromkeys(workers, 0)
    for partition, worker in assignment.items():
        if worker in result:
            result[worker] += rates[partition].bytes_per_s
    return result


def test_new_partitions_go_to_the_least_loaded_worker_by_bytes() -> None:
    hot, new = topic("hot", 2), topic("new", 2)
    rates = {hot[0]: Rate(9000, 9), hot[1]: Rate(100, 1)}
    current = {hot[0]: "w1", hot[1]: "w2"}
    result = assign_by_load([*hot, *new], current, {"w1", "w2"}, rates)
    # Each unmeasured partition weighs the mean measured one (4550 B/s): both fit on w2 before w1.
    assert result == {hot[0]: "w1", hot[1]: "w2", new[0]: "w2", new[1]: "w2"}


def test_records_then_count_break_ties() -> None:
    a = topic("a", 3)
    rates = {a[0]: Rate(100, 5), a[1]: Rate(100, 1), a[2]: Rate(0, 0)}
    result = assign_by_load(
        [*a, PartitionKey("a.b", "b", 0)], {a[0]: "w1", a[1]: "w2", a[2]: "w2"}, {"w1", "w2", "w3"}, rates
    )
    assert result[PartitionKey("a.b", "b", 0)] == "w3"
    result = assign_by_load([*a, PartitionKey("a.b", "b", 0)], {a[0]: "w1", a[1]: "w2"}, {"w1", "w2"}, rates)
    assert result[a[2]] == "w2" and result[PartitionKey("a.b", "b", 0)] == "w2"


def test_a_balanced_fleet_moves_nothing() -> None:
    p = topic("t", 4)
    rates = {p[0]: Rate(100), p[1]: Rate(100), p[2]: Rate(110), p[3]: Rate(100)}
    current = {p[0]: "w1", p[1]: "w2", p[2]: "w1", p[3]: "w2"}
    assert rebalance_by_load(current, {"w1", "w2"}, rates, 1.2) == current


def test_skewed_load_is_spread_with_few_moves() -> None:
    hot, cold = topic("hot", 8), topic("cold", 24)
    rates = {p: Rate(26_000 if p.partition in (0, 3, 6) else 0) for p in hot} | {p: Rate(830) for p in cold}
    current = assign([*hot, *cold], {}, {"w1", "w2", "w3"})
    assert {current[hot[0]], current[hot[3]], current[hot[6]]} == {"w1"}  # the count-based planner's worst case
    after = rebalance_by_load(current, {"w1", "w2", "w3"}, rates, 1.2)
    load = bytes_of(after, rates, ["w1", "w2", "w3"])
    assert max(load.values()) * 3 <= 1.2 * sum(load.values())
    assert len({after[hot[0]], after[hot[3]], after[hot[6]]}) == 3
    assert len(moved(current, after)) <= 6


def test_a_partition_hotter_than_the_mean_gets_a_worker_of_its_own() -> None:
    p = topic("t", 6)
    rates = {p[0]: Rate(10_000), **{q: Rate(500) for q in p[1:]}}
    current = {p[0]: "w1", p[1]: "w1", p[2]: "w2", p[3]: "w2", p[4]: "w3", p[5]: "w3"}
    after = rebalance_by_load(current, {"w1", "w2", "w3"}, rates, 1.2)
    assert [q for q, w in after.items() if w == after[p[0]]] == [p[0]]
    assert len(moved(current, after)) == 1  # its one neighbour left; it stayed


def test_hot_partitions_share_when_workers_are_too_few() -> None:
    p = topic("t", 2)
    rates = {p[0]: Rate(10_000), p[1]: Rate(10_000)}
    current = {p[0]: "w1", p[1]: "w1"}
    after = rebalance_by_load(current, {"w1", "w2"}, rates, 1.2)
    assert sorted(after.values()) == ["w1", "w2"]


def test_stuck_partitions_move_to_the_least_loaded_worker() -> None:
    p = topic("t", 3)
    rates = {p[0]: Rate(5000), p[1]: Rate(5000), p[2]: Rate(100)}
    current = {p[0]: "w1", p[1]: "w1", p[2]: "w2"}
    assert relieve_stuck(current, {"w1", "w2", "w3"}, rates, [p[1]]) == {**current, p[1]: "w3"}
    assert relieve_stuck(current, {"w1", "w2", "w3"}, rates, [p[2]]) == {**current, p[2]: "w3"}
    assert relieve_stuck(current, {"w2"}, rates, [p[0]]) == current  # not an eligible worker's
    assert relieve_stuck({p[0]: "w3"}, {"w1", "w3"}, {p[0]: Rate(1)}, [p[0]]) == {p[0]: "w1"}


assignments = st.dictionaries(st.sampled_from(ALL), st.sampled_from([*WORKERS, "gone"]))
live_sets = st.sets(st.sampled_from(WORKERS), min_size=1)
rate_maps = st.dictionaries(st.sampled_from(ALL), st.builds(Rate, st.integers(0, 10_000), st.integers(0, 100)))


@given(partitions=st.sets(st.sampled_from(ALL)), current=assignments, live=live_sets, rate=st.integers(1, 10_000))
def test_with_equal_rates_placement_balances_as_the_count_planner(
    partitions: set[PartitionKey], current: dict[PartitionKey, str], live: set[str], rate: int
) -> None:
    rates = dict.fromkeys(ALL, Rate(rate, 1))
    by_load = assign_by_load(partitions, current, live, rates)
    by_count = assign(partitions, current, live)
    assert set(by_load) == set(by_count)
    assert {p: w for p, w in by_load.items() if current.get(p) == w} == {
        p: w for p, w in by_count.items() if current.get(p) == w
    }
    assert sorted(loads(by_load, live).values()) == sorted(loads(by_count, live).values())
    assert assign_by_load(partitions, current, live, {}) == by_count  # nothing measured: the same result


@given(current=assignments, live=live_sets, rate=st.integers(1, 10_000))
def test_with_equal_rates_rebalance_balances_as_the_count_planner_with_as_few_moves(
    current: dict[PartitionKey, str], live: set[str], rate: int
) -> None:
    rates = dict.fromkeys(ALL, Rate(rate, 1))
    after = rebalance_by_load(current, live, rates, 1.0)
    counts = [n for w, n in loads(after, live).items() if w in live]
    assert max(counts) - min(counts) <= 1
    assert len(moved(current, after)) == len(moved(current, rebalance(current, live))) == minimal_moves(current, live)


@given(current=assignments, live=live_sets, rates=rate_maps, ratio=st.sampled_from([1.0, 1.2, 1.5]))
def test_load_rebalance_only_improves_and_moves_only_between_eligible_workers(
    current: dict[PartitionKey, str], live: set[str], rates: dict[PartitionKey, Rate], ratio: float
) -> None:
    full = {p: rates.get(p, Rate(0, 0)) for p in ALL}
    after = rebalance_by_load(current, live, full, ratio)
    assert set(after) == set(current)
    for partition in moved(current, after):
        assert current[partition] in live and after[partition] in live
    before_load, after_load = bytes_of(current, full, sorted(live)), bytes_of(after, full, sorted(live))
    total = sum(before_load.values())
    if max(before_load.values()) * len(live) <= ratio * total:
        assert after == current  # within the ratio: nothing moves
    hot = [p for p in after if after[p] in live and full[p].bytes_per_s * len(live) > total]
    if not hot:
        assert max(after_load.values()) <= max(before_load.values())
    assert rebalance_by_load(dict(reversed(current.items())), set(reversed(sorted(live))), full, ratio) == after


@given(current=assignments, live=live_sets, rates=rate_maps, stuck=st.sets(st.sampled_from(ALL)))
def test_stuck_partitions_move_only_to_eligible_workers(
    current: dict[PartitionKey, str], live: set[str], rates: dict[PartitionKey, Rate], stuck: set[PartitionKey]
) -> None:
    after = relieve_stuck(current, live, rates, stuck)
    assert set(moved(current, after)) <= stuck
    assert all(after[p] in live for p in moved(current, after))
