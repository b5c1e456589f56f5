"""A route's throttle split across its workers by measured demand (``controller.balance: load``).

Pure: plain data in, plain data out; no I/O, no clock (times come in as numbers).

With ``balance: load`` the planner evens out the bytes each worker copies, so a worker may hold one hot
partition and few others. A split by partition count would give it less than it must copy; it falls
behind, its measured rate is its share, and the planner moves partitions on a rate the throttle made.
:func:`shares_by_load` splits each route's budget by what the workers' partitions *demand* instead.

**Demand, not the copied rate.** A worker copies at most its share, so whenever its share is short its
measured rate *is* its share: a split by measured rate alone hands each worker what it already had.
What the source asks of a partition is what its worker copied plus how fast its lag grew (what was
produced and not copied): that is the produce rate, measured through the throttle, whatever the share
was (:func:`next_demand`). A lag that shrinks (a backlog caught up) adds nothing: the partition then
copies above its produce rate, and that rate is what it uses.

**The rest of the budget by demand too.** Each worker gets the reserve's part (below) plus the rest of
the budget in proportion to its demand. With a budget above the route's demand every worker gets more
than it needs, none is throttled, and what the workers measure next is again their demand: the split
is a fixed point, and the planner balancing by measured bytes sees rates the throttle did not cut. A
worker that copies all of its share (catching up after a move, or a lag not measured yet) is weighed at
that share, and the slack the others leave scales it up at each report until it has what it uses.

**A floor: the reserve.** ``reserve`` of each budget is split evenly among the workers that serve the
route, so a worker whose partitions show no load yet (just moved there, idle, not reported) can start
copying; its next report shows its demand. The busiest worker still gets at least ``1 - reserve`` of
the budget times its part of the demand, so a budget of the route's demand divided by ``1 - reserve``
covers every worker, however skewed the load.

A partition nobody has reported yet weighs as the route's mean measured partition; a route none of
whose partitions is measured yet splits by partition count (each partition weighs one). Bytes/s and
records/s split separately, each by its own demand.

:func:`settled` says when shares written before are close enough to the wanted ones to keep (measured
demand moves a little at every report; the workers need not hear of every move).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ferry.common.core.assignment import Rate
from ferry.common.core.operate.controls import Shares, Throttle
from ferry.common.model import PartitionKey, PartitionLoad

RESERVE = 0.1
"""The part of a route's budget split evenly among its workers whatever their demand (the floor)."""

SETTLED_TOLERANCE = 0.02
"""Shares within this part of their route's budget of the wanted ones are kept (:func:`settled`)."""


class Demand(NamedTuple):
    """What the leader knows of one partition's demand: the report it last took it from and the estimate."""

    worker: str  # the worker whose report it came from
    lag: int  # the lag in that report
    at: float  # when that report was seen
    rate: Rate  # the estimated demand (bytes/s, records/s)


def next_demand(previous: Demand | None, worker: str, load: PartitionLoad, now: float) -> Demand:
    """A partition's demand after ``worker``'s report ``load`` seen at ``now`` (``previous``: the last one).

    The copied rate plus the lag's growth since the previous report of the same worker (records/s; in
    bytes at the partition's mean record size). No growth is counted from a lag of 0 (a partition just
    acquired may not have measured its lag yet, and a jump from 0 would look like a burst), nor when the
    lag shrank. A new owner's first report covers a window it held the partition for only a part of:
    the estimate keeps the former owner's where that is higher.
    """
    copied = Rate(load.bytes_per_s, load.records_per_s)
    if previous is None:
        return Demand(worker, load.lag, now, copied)
    if previous.worker != worker:
        kept = Rate(
            max(copied.bytes_per_s, previous.rate.bytes_per_s), max(copied.records_per_s, previous.rate.records_per_s)
        )
        return Demand(worker, load.lag, now, kept)
    elapsed = now - previous.at
    if elapsed <= 0 or previous.lag <= 0 or load.lag <= previous.lag:
        return Demand(worker, load.lag, now, copied)
    growth = (load.lag - previous.lag) / elapsed
    sized = copied if copied.records_per_s > 0 else previous.rate
    record_size = sized.bytes_per_s / sized.records_per_s if sized.records_per_s > 0 else 0.0
    estimate = Rate(copied.bytes_per_s + round(growth * record_size), copied.records_per_s + round(growth))
    return Demand(worker, load.lag, now, estimate)


def split(budget: float, loads: Mapping[str, float], reserve: float = RESERVE) -> dict[str, float]:
    """``budget`` across the workers of ``loads``: ``reserve`` of it evenly, the rest by their load.

    The parts add up to ``budget``; none is below ``budget * reserve / len(loads)``; a worker with more
    load gets no smaller a part. No load at all: even parts.
    """
    if not loads:
        return {}
    total = sum(loads.values())
    if total <= 0:
        return {worker: budget / len(loads) for worker in loads}
    floor = budget * reserve / len(loads)
    rest = budget - floor * len(loads)
    return {worker: floor + rest * (load / total) for worker, load in loads.items()}


def shares_by_load(
    budgets: Mapping[str, Throttle],
    assignment: Mapping[PartitionKey, str],
    demand: Mapping[PartitionKey, Rate],
    reserve: float = RESERVE,
) -> Shares:
    """Each route's budget split across the workers that hold its partitions, by their demand.

    See the module docstring. ``demand``: partition -> its estimated demand (absent: not measured). A
    route with a budget and no assigned partition gets no entry, as with :func:`controls.shares`.
    """
    held: dict[str, dict[str, list[PartitionKey]]] = {}
    for partition, worker in assignment.items():
        if partition.route in budgets:
            held.setdefault(partition.route, {}).setdefault(worker, []).append(partition)
    result: Shares = {}
    for route, by_worker in sorted(held.items()):
        budget = budgets[route]
        measured = [demand[p] for partitions in by_worker.values() for p in partitions if p in demand]
        guess = (
            Rate(
                sum(r.bytes_per_s for r in measured) // len(measured),
                sum(r.records_per_s for r in measured) // len(measured),
            )
            if measured
            else Rate(1, 1)
        )
        loads = {worker: [demand.get(p, guess) for p in partitions] for worker, partitions in sorted(by_worker.items())}
        byte_parts = _parts(
            budget.max_bytes_per_s, {w: sum(r.bytes_per_s for r in rs) for w, rs in loads.items()}, reserve
        )
        record_parts = _parts(
            budget.max_records_per_s, {w: sum(r.records_per_s for r in rs) for w, rs in loads.items()}, reserve
        )
        for worker in loads:
            result.setdefault(worker, {})[route] = Throttle(
                None if byte_parts is None else byte_parts[worker],
                None if record_parts is None else record_parts[worker],
            )
    return result


def _parts(budget: float | None, loads: Mapping[str, float], reserve: float) -> dict[str, float] | None:
    return None if budget is None else split(budget, loads, reserve)


def settled(previous: Shares, wanted: Shares, tolerance: float = SETTLED_TOLERANCE) -> bool:
    """Whether ``previous`` may stay instead of ``wanted``: the same workers and routes, each route's
    parts adding up to the same budget, and every part within ``tolerance`` of its route's budget of
    the wanted one (so the parts written still add up to the budget exactly)."""
    if {w: set(routes) for w, routes in previous.items()} != {w: set(routes) for w, routes in wanted.items()}:
        return False
    for measure in ("max_bytes_per_s", "max_records_per_s"):
        budgets, before = _totals(wanted, measure), _totals(previous, measure)
        if before.keys() != budgets.keys():
            return False
        if any(abs(before[route] - budget) > 1e-9 * max(1.0, budget) for route, budget in budgets.items()):
            return False
        for worker, routes in wanted.items():
            for route, throttle in routes.items():
                old, new = getattr(previous[worker][route], measure), getattr(throttle, measure)
                if old is None or new is None:
                    if old is not new:
                        return False
                elif abs(old - new) > tolerance * budgets[route]:
                    return False
    return True


def _totals(value: Shares, measure: str) -> dict[str, float]:
    """Route -> the sum of its workers' parts of ``measure`` (routes without that limit left out)."""
    totals: dict[str, float] = {}
    for routes in value.values():
        for route, throttle in routes.items():
            part = getattr(throttle, measure)
            if part is not None:
                totals[route] = totals.get(route, 0.0) + part
    return totals
