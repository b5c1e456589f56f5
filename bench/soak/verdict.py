"""The soak's verdict: what was acknowledged on the source against what the destination holds (pure).

Per partition, from the values the source acknowledged (in source order) and the values read at the
destination (in destination order):

* lost: acknowledged on the source, absent at the destination;
* duplicated: copies beyond the first of an acknowledged value;
* disordered: the first copies of the partition's values are not in source order (a later copy of
  a value, a duplicate, is counted as duplicated, not as disorder);
* unacknowledged: values at the destination the source never acknowledged (a send whose answer was
  lost may still have been written): counted, not judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

V = TypeVar("V", bound=Hashable)  # a record's value: VerifiableProducer's sequence number


@dataclass(frozen=True, kw_only=True)
class PartitionVerdict:
    partition: int
    produced: int
    read: int
    lost: int
    duplicated: int
    disordered: bool
    unacknowledged: int


@dataclass(frozen=True)
class SoakVerdict:
    partitions: tuple[PartitionVerdict, ...]

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.partitions)

    @property
    def duplicated(self) -> int:
        return sum(p.duplicated for p in self.partitions)

    @property
    def disordered(self) -> list[int]:
        """The partitions whose first copies are out of source order."""
        return [p.partition for p in self.partitions if p.disordered]

    @property
    def unacknowledged(self) -> int:
        return sum(p.unacknowledged for p in self.partitions)


def judge_partition(partition: int, produced: Sequence[V], read: Sequence[V]) -> PartitionVerdict:
    rank = {value: index for index, value in enumerate(produced)}
    copies = Counter(read)
    last_rank = -1
    disordered = False
    seen: set[V] = set()
    for value in read:
        if value in seen or value not in rank:
            continue
        seen.add(value)
        if rank[value] < last_rank:
            disordered = True
        last_rank = rank[value]
    return PartitionVerdict(
        partition=partition,
        produced=len(produced),
        read=len(read),
        lost=sum(1 for value in rank if copies[value] == 0),
        duplicated=sum(copies[value] - 1 for value in rank if copies[value] > 1),
        disordered=disordered,
        unacknowledged=sum(count for value, count in copies.items() if value not in rank),
    )


def judge(produced: Mapping[int, Sequence[V]], read: Mapping[int, Sequence[V]]) -> SoakVerdict:
    """The verdict over every partition either side names."""
    partitions = sorted(set(produced) | set(read))
    return SoakVerdict(tuple(judge_partition(p, produced.get(p, ()), read.get(p, ())) for p in partitions))
