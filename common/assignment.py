"""Which worker copies each partition: initial placement and rebalancing.

Pure: plain data in, plain data out; no I/O, no clock. Deterministic: the same input always
gives the same output, whatever the iteration order of the input collections.

- :func:`assign` places partitions that have no (usable) worker and keeps every other one where
  it is, so a worker joining or leaving moves nothing by itself;
- :func:`rebalance` then moves the fewest partitions that even out the live workers' loads.

Both spread each topic's partitions across workers, so one busy topic does not land on one worker.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from common.model import PartitionKey, TopicKey


def _topic(partition: PartitionKey) -> TopicKey:
    return TopicKey(partition.route, partition.topic)


def loads(assignment: Mapping[PartitionKey, str], workers: Iterable[str]) -> dict[str, int]:
    """Worker -> number of partitions; every worker in ``workers`` gets an entry, 0 when it has none."""
    result = dict.fromkeys(workers, 0)
    for worker in assignment.values():
        result[worker] = result.get(worker, 0) + 1
    return result


def assign(
    partitions: Iterable[PartitionKey],
    current: Mapping[PartitionKey, str],
    live: Collection[str],
    retained: Collection[str] = (),
) -> dict[PartitionKey, str]:
    """Partition -> worker for every partition in ``partitions`` that can have one.

    ``current[p]`` is kept when that worker is live or retained (a departed worker still inside
    its failover delay); partitions not in ``partitions`` are dropped. Every other partition, in
    sorted order, goes to the live worker with the fewest partitions (retained workers' partitions
    count for them, but they never receive new ones); ties go to the worker with the fewest
    partitions of the same route/topic, then the lowest worker id. With no live worker a
    partition stays unassigned (absent from the result).
    """
    wanted = set(partitions)
    keep = set(live) | set(retained)
    result = {p: w for p, w in current.items() if p in wanted and w in keep}
    candidates = sorted(set(live) - set(retained))
    if not candidates:
        return result
    load = loads(result, candidates)
    per_topic: dict[str, Counter[TopicKey]] = {w: Counter() for w in candidates}
    for partition, worker in result.items():
        if worker in per_topic:
            per_topic[worker][_topic(partition)] += 1
    for partition in sorted(wanted - result.keys()):
        topic = _topic(partition)
        worker = min(candidates, key=lambda w: (load[w], per_topic[w][topic], w))
        result[partition] = worker
        load[worker] += 1
        per_topic[worker][topic] += 1
    return result


def rebalance(assignment: Mapping[PartitionKey, str], live: Collection[str]) -> dict[PartitionKey, str]:
    """Move the fewest partitions so the live workers' counts differ by at most one.

    Partitions on workers not in ``live`` neither move nor count. The busiest workers keep the
    extra partitions when the count does not divide evenly. A worker above its target gives away,
    one at a time, a partition (its highest-numbered) of the route/topic it holds most of compared
    with the worker below target that holds fewest of it, and that worker receives it (ties: the
    donor's bigger topic, the lowest topic; the receiver with fewer partitions, the lowest id).
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
    per_topic = {w: Counter(_topic(p) for p in held[w]) for w in workers}
    for donor in (w for w in by_load if load[w] > target[w]):
        pool = held[donor]
        for _ in range(load[donor] - target[donor]):
            counts = per_topic[donor]
            # For each topic the donor holds, the receiver that has the fewest of it; move the topic
            # that evens out most (donor's count minus receiver's), then the donor's biggest one.
            best = {t: _fewest_of(t, need, per_topic, load) for t in counts}
            topic = min(counts, key=lambda t: (per_topic[best[t]][t] - counts[t], -counts[t], t))
            receiver = best[topic]
            partition = max(p for p in pool if _topic(p) == topic)
            pool.remove(partition)
            counts[topic] -= 1
            if not counts[topic]:
                del counts[topic]
            load[donor] -= 1
            load[receiver] += 1
            per_topic[receiver][topic] += 1
            need[receiver] -= 1
            if not need[receiver]:
                del need[receiver]
            result[partition] = receiver
    return result


def _fewest_of(
    topic: TopicKey, candidates: Iterable[str], per_topic: Mapping[str, Counter[TopicKey]], load: Mapping[str, int]
) -> str:
    return min(candidates, key=lambda w: (per_topic[w][topic], load[w], w))


def moved(before: Mapping[PartitionKey, str], after: Mapping[PartitionKey, str]) -> set[PartitionKey]:
    """Partitions present in both whose worker changed."""
    return {p for p, worker in before.items() if p in after and after[p] != worker}
