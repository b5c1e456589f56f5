"""Which worker copies each partition: initial placement and rebalancing.

Pure: plain data in, plain data out; no I/O, no clock. Deterministic: the same input always
gives the same output, whatever the iteration order of the input collections.

- :func:`assign` places partitions that have no (usable) worker and keeps every other one where
  it is, so a worker joining or leaving moves nothing by itself;
- :func:`rebalance` then moves the fewest partitions that even out the live workers' loads.
Both spread each topic's partitions across workers, so one busy topic does not land on one worker.
:func:`assign_by_load`, :func:`rebalance_by_load` and :func:`relieve_stuck` do the same by measured
bytes/s and records/s (:class:`Rate`), given as plain data.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Generator, Iterable, Mapping
from contextlib import closing
from typing import NamedTuple

from ferry.common.model import PartitionKey, TopicKey


def _topic(partition: PartitionKey) -> TopicKey:
    return TopicKey(partition.route, partition.topic)


def loads(assignment: Mapping[PartitionKey, str], workers: Iterable[str]) -> dict[str, int]:
    """Worker -> number of partitions; every worker in ``workers`` gets an entry, 0 when it has none."""
    result = dict.fromkeys(workers, 0)
    for worker in assignment.values():
        result[worker] = result.get(worker, 0) + 1
    return result


class _LeastLoaded:
    """Workers in (load, id) order, for "the least-loaded worker that ..." in O(k log W).

    A lazy heap: a worker's load only grows (:meth:`bump`) or it leaves (:meth:`drop`); entries that
    no longer match are skipped when they surface. :meth:`scan` yields valid workers in order and
    puts back what it took when the caller stops.
    """

    def __init__(self, load: dict[str, int], workers: Iterable[str]) -> None:
        self._load = load
        self._heap = [(load[w], w) for w in workers]
        heapq.heapify(self._heap)
        self._dropped: set[str] = set()

    def bump(self, worker: str) -> None:
        self._load[worker] += 1
        heapq.heappush(self._heap, (self._load[worker], worker))

    def drop(self, worker: str) -> None:
        self._dropped.add(worker)

    def load(self, worker: str) -> int:
        return self._load[worker]

    def scan(self) -> Generator[tuple[int, str], None, None]:
        taken: list[tuple[int, str]] = []
        try:
            while self._heap:
                entry = heapq.heappop(self._heap)
                load, worker = entry
                if worker in self._dropped or self._load[worker] != load:
                    continue  # stale: the worker left or its load grew since
                taken.append(entry)
                yield entry
        finally:
            for entry in taken:
                heapq.heappush(self._heap, entry)


def assign(
    partitions: Iterable[PartitionKey],
    current: Mapping[PartitionKey, str],
    live: Collection[str],
    retained: Collection[str] = (),
    base_load: Mapping[str, int] | None = None,
) -> dict[PartitionKey, str]:
    """Partition -> worker for every partition in ``partitions`` that can have one.

    ``current[p]`` is kept when that worker is live or retained (a departed worker still inside
    its failover delay); partitions not in ``partitions`` are dropped. Every other partition, in
    sorted order, goes to the live worker with the fewest partitions (retained workers' partitions
    count for them, but they never receive new ones); ties go to the worker with the fewest
    partitions of the same route/topic, then the lowest worker id. With no live worker a
    partition stays unassigned (absent from the result).

    O(P log W): each placement looks only at the least-loaded workers, in (load, id) order, and
    stops at the first one holding nothing of the topic.

    ``base_load`` (worker -> partitions it holds outside ``partitions``) lets a caller place the
    partitions of a few topics alone: the result is the same as placing them among all partitions,
    as long as every other partition already has a kept worker (the incremental planner's case).
    """
    wanted, result, candidates = _kept(partitions, current, live, retained)
    if not candidates:
        return result
    load = loads(result, candidates)
    if base_load:
        for worker in candidates:
            load[worker] += base_load.get(worker, 0)
    per_topic: dict[str, Counter[TopicKey]] = {w: Counter() for w in candidates}
    for partition, worker in result.items():
        if worker in per_topic:
            per_topic[worker][_topic(partition)] += 1
    least = _LeastLoaded({w: load[w] for w in candidates}, candidates)
    for partition in sorted(wanted - result.keys()):
        topic = _topic(partition)
        worker = _least_loaded_for(topic, least, per_topic)
        result[partition] = worker
        least.bump(worker)
        per_topic[worker][topic] += 1
    return result


def _kept(
    partitions: Iterable[PartitionKey],
    current: Mapping[PartitionKey, str],
    live: Collection[str],
    retained: Collection[str],
) -> tuple[set[PartitionKey], dict[PartitionKey, str], list[str]]:
    """(the wanted partitions, those kept on their live or retained worker, the workers that may receive)."""
    wanted, keep = set(partitions), set(live) | set(retained)
    return wanted, {p: w for p, w in current.items() if p in wanted and w in keep}, sorted(set(live) - set(retained))


def _least_loaded_for(topic: TopicKey, least: _LeastLoaded, per_topic: Mapping[str, Counter[TopicKey]]) -> str:
    """min over workers of (load, partitions of ``topic``, id)."""
    lowest: list[str] = []
    min_load = None
    with closing(least.scan()) as scan:
        for load, worker in scan:
            if min_load is None:
                min_load = load
            if load != min_load:
                break
            if not per_topic[worker][topic]:
                return worker  # the lowest id among the least loaded with none of the topic
            lowest.append(worker)
    return min(lowest, key=lambda w: (per_topic[w][topic], w))


def rebalance(assignment: Mapping[PartitionKey, str], live: Collection[str]) -> dict[PartitionKey, str]:
    """Move the fewest partitions so the live workers' counts differ by at most one.

    Partitions on workers not in ``live`` neither move nor count. The busiest workers keep the
    extra partitions when the count does not divide evenly. A worker above its target gives away,
    one at a time, a partition (its highest-numbered) of the route/topic it holds most of compared
    with the worker below target that holds fewest of it, and that worker receives it (ties: the
    donor's bigger topic, the lowest topic; the receiver with fewer partitions, the lowest id).

    O(P log P + M log W) for M moves: the donor's topics wait in a heap by size, and a topic's
    receiver is found among the least-loaded receivers, so a move looks at a few topics and
    workers instead of all of them.
    """
    result = dict(assignment)
    workers = sorted(set(live))
    if not workers:
        return result
    held: dict[str, list[PartitionKey]] = {w: [] for w in workers}
    for partition, worker in assignment.items():
        if worker in held:
            held[worker].append(partition)
    load = {w: len(held[w]) for w in workers}
    low, extra = divmod(sum(load.values()), len(workers))
    # The busiest workers keep one more: no other choice of targets moves fewer partitions.
    by_load = sorted(workers, key=lambda w: (-load[w], w))
    target = {w: low + (1 if i < extra else 0) for i, w in enumerate(by_load)}
    need = {w: target[w] - load[w] for w in workers if load[w] < target[w]}
    if not need:
        return result
    # Only donors and receivers are ever asked what they hold of a topic.
    per_topic = {w: Counter(_topic(p) for p in held[w]) for w in workers if w in need or load[w] > target[w]}
    receivers = _LeastLoaded({w: load[w] for w in need}, need)
    for donor in (w for w in by_load if load[w] > target[w]):
        counts = per_topic[donor]
        # The donor's partitions by topic, highest-numbered last; its topics by (-count, name).
        pools: dict[TopicKey, list[PartitionKey]] = {}
        for partition in sorted(held[donor]):
            pools.setdefault(_topic(partition), []).append(partition)
        topics = [(-n, t) for t, n in counts.items()]
        heapq.heapify(topics)
        for _ in range(load[donor] - target[donor]):
            topic, receiver = _best_move(counts, topics, need, receivers, per_topic)
            partition = pools[topic].pop()
            counts[topic] -= 1
            if counts[topic]:
                heapq.heappush(topics, (-counts[topic], topic))
            else:
                del counts[topic]
            load[donor] -= 1
            load[receiver] += 1
            receivers.bump(receiver)
            per_topic[receiver][topic] += 1
            need[receiver] -= 1
            if not need[receiver]:
                del need[receiver]
                receivers.drop(receiver)
            result[partition] = receiver
    return result


def _best_move(
    counts: Counter[TopicKey],
    topics: list[tuple[int, TopicKey]],
    need: Mapping[str, int],
    receivers: _LeastLoaded,
    per_topic: Mapping[str, Counter[TopicKey]],
) -> tuple[TopicKey, str]:
    """The (topic, receiver) minimizing (receiver's count - donor's count, -donor's count, topic).

    Topics come off the heap biggest first; a topic of donor count c scores at least -c, so the
    search stops at the first topic that cannot beat the best found.
    """
    best: tuple[tuple[int, int, TopicKey], str] | None = None
    taken: list[tuple[int, TopicKey]] = []
    while topics:
        negative_count, topic = topics[0]
        if counts.get(topic, 0) != -negative_count:
            heapq.heappop(topics)  # stale entry: the donor gave some of this topic away since
            continue
        if best is not None and negative_count >= best[0][0]:
            break
        taken.append(heapq.heappop(topics))
        receiver = _fewest_of(topic, need, receivers, per_topic)
        key = (per_topic[receiver][topic] + negative_count, negative_count, topic)
        if best is None or key < best[0]:
            best = (key, receiver)
    for entry in taken:
        heapq.heappush(topics, entry)
    assert best is not None, "a donor above its target holds partitions"
    return best[0][2], best[1]


def _fewest_of(
    topic: TopicKey, need: Mapping[str, int], receivers: _LeastLoaded, per_topic: Mapping[str, Counter[TopicKey]]
) -> str:
    """min over the receivers of (partitions of ``topic``, load, id)."""
    with closing(receivers.scan()) as scan:
        for _, worker in scan:
            if not per_topic[worker][topic]:
                return worker  # holds none of the topic, and the least loaded of those that hold none
    return min(need, key=lambda w: (per_topic[w][topic], receivers.load(w), w))


def moved(before: Mapping[PartitionKey, str], after: Mapping[PartitionKey, str]) -> set[PartitionKey]:
    """Partitions present in both whose worker changed."""
    return {p for p, worker in before.items() if p in after and after[p] != worker}


# -- by measured load ------------------------------------------------------------------------------


class Rate(NamedTuple):
    """What a partition copies per second; whole numbers, so sums are exact and orders repeatable."""

    bytes_per_s: int = 0
    records_per_s: int = 0


def _estimate(rates: Mapping[PartitionKey, Rate]) -> Rate:
    """A partition nobody measured yet counts as the mean measured partition (0 when none is)."""
    n = max(1, len(rates))
    return Rate(sum(r.bytes_per_s for r in rates.values()) // n, sum(r.records_per_s for r in rates.values()) // n)


def _totals(
    assignment: Mapping[PartitionKey, str], workers: Iterable[str], rates: Mapping[PartitionKey, Rate], guess: Rate
) -> dict[str, list[int]]:
    """Worker -> [bytes/s, records/s, partitions] of what ``assignment`` gives it (unmeasured at ``guess``)."""
    totals = {w: [0, 0, 0] for w in workers}
    for partition, worker in assignment.items():
        total = totals.get(worker)
        if total is not None:
            rate = rates.get(partition, guess)
            total[0] += rate.bytes_per_s
            total[1] += rate.records_per_s
            total[2] += 1
    return totals


def assign_by_load(
    partitions: Iterable[PartitionKey],
    current: Mapping[PartitionKey, str],
    live: Collection[str],
    rates: Mapping[PartitionKey, Rate],
    retained: Collection[str] = (),
    base_load: Mapping[str, tuple[int, int, int]] | None = None,
) -> dict[PartitionKey, str]:
    """:func:`assign` onto the least-loaded worker by bytes/s, then records/s, partitions, id; with no
    rate measured at all it is :func:`assign`. ``base_load``: worker -> (bytes/s, records/s, partitions)
    it holds outside ``partitions``."""
    if not any(rates.values()):
        counts = None if base_load is None else {w: n for w, (_, _, n) in base_load.items()}
        return assign(partitions, current, live, retained, counts)
    wanted, result, candidates = _kept(partitions, current, live, retained)
    if not candidates:
        return result
    guess = _estimate(rates)
    totals = _totals(result, candidates, rates, guess)
    heap = [
        (b + base[0], r + base[1], n + base[2], w)
        for w, (b, r, n) in totals.items()
        for base in [(base_load or {}).get(w, (0, 0, 0))]
    ]
    heapq.heapify(heap)
    for partition in sorted(wanted - result.keys()):
        load_bytes, load_records, count, worker = heapq.heappop(heap)
        rate = rates.get(partition, guess)
        result[partition] = worker
        heapq.heappush(heap, (load_bytes + rate.bytes_per_s, load_records + rate.records_per_s, count + 1, worker))
    return result


def rebalance_by_load(
    assignment: Mapping[PartitionKey, str],
    workers: Collection[str],
    rates: Mapping[PartitionKey, Rate],
    imbalance_ratio: float,
) -> dict[PartitionKey, str]:
    """Moves few partitions so no worker copies more than ``imbalance_ratio`` times the mean bytes/s.

    Only ``workers`` (the eligible ones) give or receive. Nothing moves while the most loaded is within
    ``imbalance_ratio`` of the mean. Then (1) a partition hotter than the mean gets a worker of its own
    while there are more workers than such partitions (the mean taken again without them, until no
    other is hotter): it stays and its neighbours leave, or it moves to the worker with fewer
    neighbours, whichever moves less; (2) among the others, the most loaded gives the least loaded
    the partition that brings the two closest together (bytes/s, records/s; among equals, the highest
    -numbered of the topic the donor holds most of) while that makes the busier one less busy, until
    the most loaded is within ``imbalance_ratio`` of their mean. With equal rates and a ratio of 1.0
    it balances counts within one with as few moves as :func:`rebalance` (tested).
    """
    result = dict(assignment)
    eligible = sorted(set(workers))
    if len(eligible) < 2:
        return result
    guess = _estimate(rates)
    weight = {p: rates.get(p, guess) for p, w in assignment.items() if w in eligible}
    held: dict[str, set[PartitionKey]] = {w: set() for w in eligible}
    for partition in weight:
        held[assignment[partition]].add(partition)
    load = {
        w: Rate(sum(weight[p].bytes_per_s for p in held[w]), sum(weight[p].records_per_s for p in held[w]))
        for w in eligible
    }
    total = sum(r.bytes_per_s for r in load.values())
    if total <= 0 or max(r.bytes_per_s for r in load.values()) * len(eligible) <= imbalance_ratio * total:
        return result
    loose: list[PartitionKey] = []  # evicted from a dedicated worker: placed on the others
    dedicated = _dedicate(held, weight, eligible, total, loose)
    others = [w for w in eligible if w not in dedicated]
    for partition in sorted(loose):
        receiver = min(others, key=lambda w: (*_sum(held[w], weight), len(held[w]), w))
        held[receiver].add(partition)
    _even_out(held, weight, others, imbalance_ratio)
    for worker, partitions in held.items():
        for partition in partitions:
            result[partition] = worker
    return result


def _sum(partitions: Iterable[PartitionKey], weight: Mapping[PartitionKey, Rate]) -> tuple[int, int]:
    return sum(weight[p].bytes_per_s for p in partitions), sum(weight[p].records_per_s for p in partitions)


def _dedicate(
    held: dict[str, set[PartitionKey]],
    weight: Mapping[PartitionKey, Rate],
    eligible: list[str],
    total: int,
    loose: list[PartitionKey],
) -> set[str]:
    """Step 1 of :func:`rebalance_by_load`: gives each partition hotter than the mean a worker of its own."""
    dedicated: dict[str, PartitionKey] = {}
    owner = {p: w for w, ps in held.items() for p in ps}
    hottest = sorted(weight, key=lambda p: (-weight[p].bytes_per_s, p))
    remaining, spare = total, len(eligible)
    for partition in hottest:
        if spare < 2 or weight[partition].bytes_per_s * spare <= remaining:
            break  # not hotter than the mean of what is left, or no worker left for the rest
        free = [w for w in eligible if w not in dedicated]
        here = owner[partition]
        # Moves: the neighbours that must leave, plus one when the partition itself moves.
        worker = min(free, key=lambda w: (len(held[w] - {partition}) + (w != here), w != here, w))
        for neighbour in sorted(held[worker] - {partition}):
            held[worker].discard(neighbour)
            loose.append(neighbour)
        if worker != here:
            held[here].discard(partition)
            held[worker].add(partition)
        dedicated[worker] = partition
        remaining -= weight[partition].bytes_per_s
        spare -= 1
    return set(dedicated)


def _even_out(
    held: dict[str, set[PartitionKey]], weight: Mapping[PartitionKey, Rate], workers: list[str], imbalance_ratio: float
) -> None:
    """Step 2 of :func:`rebalance_by_load`, in place. Each move lowers the sum of squared loads, so it ends."""
    load = {w: _sum(held[w], weight) for w in workers}
    total = sum(b for b, _ in load.values())
    for _ in range(sum(len(held[w]) for w in workers)):
        donor = max(workers, key=lambda w: (load[w], len(held[w]), w))
        receiver = min(workers, key=lambda w: (load[w], len(held[w]), w))
        if load[donor][0] * len(workers) <= imbalance_ratio * total or donor == receiver:
            return
        gap = (load[donor][0] - load[receiver][0], load[donor][1] - load[receiver][1])
        topics = Counter(_topic(p) for p in held[donor])
        theirs = Counter(_topic(p) for p in held[receiver])
        best: tuple[tuple[int, int, int, int, int], PartitionKey] | None = None
        for partition in held[donor]:
            rate = weight[partition]
            if (rate.bytes_per_s, rate.records_per_s) >= gap or (rate.bytes_per_s, rate.records_per_s) <= (0, 0):
                continue  # the receiver would end as busy as the donor was, or nothing changes
            topic = _topic(partition)
            key = (
                abs(gap[0] - 2 * rate.bytes_per_s),
                abs(gap[1] - 2 * rate.records_per_s),
                theirs[topic] - topics[topic],
                -topics[topic],
                -partition.partition,
            )
            if best is None or key < best[0]:
                best = (key, partition)
        if best is None:
            return
        partition, rate = best[1], weight[best[1]]
        held[donor].discard(partition)
        held[receiver].add(partition)
        load[donor] = (load[donor][0] - rate.bytes_per_s, load[donor][1] - rate.records_per_s)
        load[receiver] = (load[receiver][0] + rate.bytes_per_s, load[receiver][1] + rate.records_per_s)


def relieve_stuck(
    assignment: Mapping[PartitionKey, str],
    workers: Collection[str],
    rates: Mapping[PartitionKey, Rate],
    stuck: Iterable[PartitionKey],
) -> dict[PartitionKey, str]:
    """Moves each ``stuck`` partition (its lag grows while its worker is saturated) to the least-loaded
    eligible worker (bytes/s, records/s, partitions, id), unless it is there already."""
    result = dict(assignment)
    eligible = sorted(set(workers))
    if len(eligible) < 2:
        return result
    guess = _estimate(rates)
    totals = _totals(assignment, eligible, rates, guess)
    for partition in sorted(set(stuck)):
        here = result.get(partition)
        if here not in totals:
            continue
        target = min(eligible, key=lambda w: (*totals[w], w))
        if target == here:
            continue
        rate = rates.get(partition, guess)
        for worker, sign in ((here, -1), (target, 1)):
            totals[worker] = [
                totals[worker][0] + sign * rate.bytes_per_s,
                totals[worker][1] + sign * rate.records_per_s,
                totals[worker][2] + sign,
            ]
        result[partition] = target
    return result
