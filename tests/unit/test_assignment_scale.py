"""The heap-based assign and rebalance decide exactly as their specification, written plainly.

``spec_assign`` and ``spec_rebalance`` are the rules of :mod:`common.core.assignment`'s docstrings as
direct O(P * W) loops (the implementation before it scaled); the fast functions must agree with
them on every input, so the property tests of test_assignment.py keep their meaning at any size.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Collection, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.core.assignment import assign, loads, moved, rebalance
from ferry.common.model import PartitionKey, TopicKey
from tests.oracles.assignment import minimal_moves

pytestmark = pytest.mark.unit


def _topic(p: PartitionKey) -> TopicKey:
    return TopicKey(p.route, p.topic)


def spec_assign(
    partitions: Collection[PartitionKey],
    current: Mapping[PartitionKey, str],
    live: Collection[str],
    retained: Collection[str] = (),
) -> dict[PartitionKey, str]:
    wanted = set(partitions)
    result = {p: w for p, w in current.items() if p in wanted and w in set(live) | set(retained)}
    candidates = sorted(set(live) - set(retained))
    if not candidates:
        return result
    load = loads(result, candidates)
    per_topic = {w: Counter(_topic(p) for p, x in result.items() if x == w) for w in candidates}
    for partition in sorted(wanted - result.keys()):
        worker = min(candidates, key=lambda w: (load[w], per_topic[w][_topic(partition)], w))
        result[partition] = worker
        load[worker] += 1
        per_topic[worker][_topic(partition)] += 1
    return result


def spec_rebalance(assignment: Mapping[PartitionKey, str], live: Collection[str]) -> dict[PartitionKey, str]:
    result = dict(assignment)
    workers = sorted(set(live))
    if not workers:
        return result
    held = {w: [p for p, x in assignment.items() if x == w] for w in workers}
    load = {w: len(held[w]) for w in workers}
    low, extra = divmod(sum(load.values()), len(workers))
    by_load = sorted(workers, key=lambda w: (-load[w], w))
    target = {w: low + (1 if i < extra else 0) for i, w in enumerate(by_load)}
    need = {w: target[w] - load[w] for w in workers if load[w] < target[w]}
    per_topic = {w: Counter(_topic(p) for p in held[w]) for w in workers}
    for donor in (w for w in by_load if load[w] > target[w]):
        for _ in range(load[donor] - target[donor]):
            counts = per_topic[donor]
            best = {t: min(need, key=lambda w, t=t: (per_topic[w][t], load[w], w)) for t in +counts}
            topic = min(+counts, key=lambda t: (per_topic[best[t]][t] - counts[t], -counts[t], t))
            receiver = best[topic]
            partition = max(p for p in held[donor] if _topic(p) == topic)
            held[donor].remove(partition)
            counts[topic] -= 1
            load[donor] -= 1
            load[receiver] += 1
            per_topic[receiver][topic] += 1
            need[receiver] -= 1
            if not need[receiver]:
                del need[receiver]
            result[partition] = receiver
    return result


WORKERS = [f"w{i}" for i in range(7)]
PARTITIONS = [PartitionKey(r, t, p) for r in ("a.b", "b.a") for t in ("t1", "t2", "t3", "t4") for p in range(5)]


@settings(max_examples=300)
@given(
    partitions=st.sets(st.sampled_from(PARTITIONS)),
    current=st.dictionaries(st.sampled_from(PARTITIONS), st.sampled_from([*WORKERS, "dead"])),
    live=st.sets(st.sampled_from(WORKERS)),
    retained=st.sets(st.sampled_from(["dead", "w6"])),
)
def test_assign_decides_as_its_specification(
    partitions: set[PartitionKey], current: dict[PartitionKey, str], live: set[str], retained: set[str]
) -> None:
    assert assign(partitions, current, live, retained) == spec_assign(partitions, current, live, retained)


@settings(max_examples=300)
@given(
    current=st.dictionaries(st.sampled_from(PARTITIONS), st.sampled_from([*WORKERS, "dead"])),
    live=st.sets(st.sampled_from(WORKERS)),
)
def test_rebalance_decides_as_its_specification(current: dict[PartitionKey, str], live: set[str]) -> None:
    assert rebalance(current, live) == spec_rebalance(current, live)


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_at_a_larger_size_every_partition_is_placed_once_balanced_and_moves_are_minimal(seed: int) -> None:
    # Up to 6,000 partitions, from 50 workers to up to 200.
    rng = random.Random(seed)
    partitions = [PartitionKey("a.b", f"t{i}", p) for i in range(500) for p in range(rng.randint(1, 12))]
    before = assign(partitions, {}, [f"w{i:03d}" for i in range(50)])
    live = [f"w{i:03d}" for i in range(rng.randint(50, 200))]
    after = rebalance(before, live)
    assert set(after) == set(partitions)
    counts = loads(after, live).values()
    assert max(counts) - min(counts) <= 1
    assert len(moved(before, after)) == minimal_moves(before, set(live))
