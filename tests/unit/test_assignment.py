from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.assignment import assign, loads, moved, rebalance
from ferry.common.model import PartitionKey
from tests.oracles.assignment import minimal_moves

pytestmark = pytest.mark.unit

WORKERS = ["w1", "w2", "w3", "w4"]
TOPICS = [("a.b", "orders"), ("a.b", "clicks"), ("b.a", "orders")]
ALL = [PartitionKey(r, t, p) for r, t in TOPICS for p in range(6)]


def topic(name: str, count: int, route: str = "a.b") -> list[PartitionKey]:
    return [PartitionKey(route, name, p) for p in range(count)]


def test_loads_counts_every_worker() -> None:
    p = topic("t", 3)
    assert loads({p[0]: "w1", p[1]: "w1", p[2]: "w9"}, ["w1", "w2"]) == {"w1": 2, "w2": 0, "w9": 1}


def test_a_new_topic_spreads_across_workers() -> None:
    result = assign(topic("t", 8), {}, live={"w1", "w2"})
    assert Counter(result.values()) == {"w1": 4, "w2": 4}


def test_ties_prefer_the_worker_with_fewer_partitions_of_the_topic() -> None:
    a, b = topic("a", 2), topic("b", 2)
    current = {a[0]: "w1", b[0]: "w2"}
    result = assign([*a, *b], current, live={"w1", "w2"})
    assert result == {a[0]: "w1", b[0]: "w2", a[1]: "w2", b[1]: "w1"}


def test_assign_keeps_live_and_retained_workers_and_drops_removed_partitions() -> None:
    p = topic("t", 4)
    current = {p[0]: "w1", p[1]: "gone", p[2]: "leaving", p[3]: "w1", PartitionKey("a.b", "old", 0): "w1"}
    result = assign(p, current, live={"w1", "w2"}, retained={"leaving"})
    assert result == {p[0]: "w1", p[1]: "w2", p[2]: "leaving", p[3]: "w1"}


def test_retained_workers_count_but_never_receive() -> None:
    p = topic("t", 4)
    result = assign(p, {p[0]: "r", p[1]: "r"}, live={"w1"}, retained={"r"})
    assert result == {p[0]: "r", p[1]: "r", p[2]: "w1", p[3]: "w1"}
    assert assign(topic("u", 2), {}, live={"r"}, retained={"r"}) == {}


def test_no_live_worker_leaves_partitions_unassigned() -> None:
    p = topic("t", 2)
    assert assign(p, {p[0]: "dead"}, live=set()) == {}


def test_rebalance_moves_the_fewest_and_keeps_topics_spread() -> None:
    a, b = topic("a", 4), topic("b", 2)
    before = {**dict.fromkeys(a, "w1"), **dict.fromkeys(b, "w1")}
    after = rebalance(before, live={"w1", "w2"})
    assert Counter(after.values()) == {"w1": 3, "w2": 3}
    assert len(moved(before, after)) == 3
    # w1 gave away partitions of the topic it held most of first
    assert Counter(p.topic for p, w in after.items() if w == "w2") == {"a": 2, "b": 1}


def test_rebalance_leaves_non_live_workers_alone() -> None:
    p = topic("t", 6)
    before = {p[0]: "old", p[1]: "old", p[2]: "old", p[3]: "w1", p[4]: "w1", p[5]: "w1"}
    after = rebalance(before, live={"w1", "w2"})
    assert {q for q, w in after.items() if w == "old"} == {p[0], p[1], p[2]}
    assert Counter(after.values()) == {"old": 3, "w1": 2, "w2": 1}
    assert rebalance(before, live=set()) == before


def test_moved_compares_common_partitions_only() -> None:
    p = topic("t", 3)
    assert moved({p[0]: "w1", p[1]: "w1", p[2]: "w1"}, {p[0]: "w1", p[1]: "w2"}) == {p[1]}


assignments = st.dictionaries(st.sampled_from(ALL), st.sampled_from([*WORKERS, "dead"]))
live_sets = st.sets(st.sampled_from(WORKERS), min_size=1)


@given(
    partitions=st.sets(st.sampled_from(ALL)),
    current=assignments,
    live=st.sets(st.sampled_from(WORKERS)),
    retained=st.sets(st.sampled_from(["dead", "w4"])),
)
def test_assign_places_every_partition_once_and_keeps_usable_workers(
    partitions: set[PartitionKey], current: dict[PartitionKey, str], live: set[str], retained: set[str]
) -> None:
    result = assign(partitions, current, live, retained)
    assert set(result) <= partitions
    for partition, worker in result.items():
        if current.get(partition) == worker:
            assert worker in live or worker in retained
        else:
            assert worker in live and worker not in retained
    for partition in partitions:
        if current.get(partition) in live or current.get(partition) in retained:
            assert result[partition] == current[partition]
    if live - retained:
        assert set(result) == partitions
    assert assign(sorted(partitions, reverse=True), dict(reversed(current.items())), live, retained) == result


@given(partitions=st.sets(st.sampled_from(ALL)), live=live_sets)
def test_assign_then_rebalance_from_scratch_is_balanced(partitions: set[PartitionKey], live: set[str]) -> None:
    placed = assign(partitions, {}, live)
    counts = loads(placed, live).values()
    assert max(counts) - min(counts) <= 1
    assert rebalance(placed, live) == placed


@given(current=assignments, live=live_sets)
def test_rebalance_moves_the_minimal_number_and_balances(current: dict[PartitionKey, str], live: set[str]) -> None:
    after = rebalance(current, live)
    assert set(after) == set(current)
    counts = [n for w, n in loads(after, live).items() if w in live]
    assert max(counts) - min(counts) <= 1
    changed = moved(current, after)
    assert len(changed) == minimal_moves(current, live)
    on_live = sum(1 for w in current.values() if w in live)
    low = on_live // len(live)
    ceil = math.ceil(on_live / len(live))
    load = loads({p: w for p, w in current.items() if w in live}, live)
    assert sum(max(0, n - ceil) for n in load.values()) <= len(changed) <= sum(max(0, n - low) for n in load.values())
    for partition in changed:
        assert current[partition] in live and after[partition] in live
    assert rebalance(after, live) == after
    assert rebalance(dict(reversed(current.items())), set(reversed(sorted(live)))) == after
