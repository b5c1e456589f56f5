"""The fewest moves a rebalance can make: what the assignment tests hold ``common.core.assignment`` to."""

from __future__ import annotations

from ferry.common.core.assignment import loads
from ferry.common.model import PartitionKey


def minimal_moves(assignment: dict[PartitionKey, str], live: set[str]) -> int:
    """Fewest moves that leave live loads within one: the busiest workers keep the extra partitions."""
    load = loads({p: w for p, w in assignment.items() if w in live}, live)
    low, extra = divmod(sum(load.values()), len(live))
    ordered = sorted(load.values(), reverse=True)
    return sum(max(0, n - (low + (1 if i < extra else 0))) for i, n in enumerate(ordered))
