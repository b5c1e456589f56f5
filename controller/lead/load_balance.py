"""The leader's balance by measured load: what it reads from the workers' load reports, and the moves.

The workers write, every ``worker.load_report_interval_s``, per partition the bytes/s and
records/s they copy and its lag, and how busy their copy loop was (:class:`common.model.WorkerStatus`).
:class:`LoadBalancer` follows those reports (:meth:`LoadBalancer.observe`, for every status the reconciler
feeds the leader state), and, at most every ``controller.load_rebalance_interval_s``, plans moves with the pure
planner (:func:`common.core.assignment.relieve_stuck` then :func:`common.core.assignment.rebalance_by_load`).
From the same reports it estimates each partition's demand (what it copied plus how fast its lag grew:
:func:`common.core.operate.load_shares.next_demand`), which a throttled route's budget is split by
(:meth:`LoadBalancer.demand`). Its per-worker load gauges (``ferry_controller_worker_bytes_per_second``,
``ferry_controller_worker_records_per_second``) show the balance.

Stuck: a partition whose lag grew at every load report of its worker for ``controller.stuck_after_s``
while that worker was *saturated* (its copy loop was busy at least ``controller.saturated_busy_ratio``
of its last window: it never waited for records, so it cannot copy faster). A new owner, or a report
where the lag did not grow, starts the count again.

States of a partition's lag watch: CALM --lag grew, worker saturated--> GROWING(since t)
--lag grew again, worker saturated--> GROWING(since t) --lag did not grow, worker not saturated,
or another worker reports it--> CALM. GROWING for ``stuck_after_s`` or more: stuck.

States of a partition's measured rate: FULL --another worker reports it (a move)--> PARTIAL (that
worker held it for only a part of its window) --that worker's next report--> FULL. The planner weighs
a PARTIAL partition at its estimated demand where that is higher (the former owner's measure, see
below): a rate measured over part of a window makes the new owner look lighter than it is, and a move
made on it would be undone after the next full window.

States of a partition's demand: UNKNOWN --a report--> ESTIMATED (what it copied) --a report of the
same worker--> ESTIMATED (what it copied plus its lag's growth since) --another worker's report-->
ESTIMATED (the former estimate where higher); forgotten when it leaves the ideal states or the lead ends.

Pure: no I/O, no clock (``now`` comes in as a number); the gauges are prometheus_client objects.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping

from prometheus_client import CollectorRegistry, Gauge

from ferry.common.config import ControllerConfig
from ferry.common.core.assignment import Rate, rebalance_by_load, relieve_stuck
from ferry.common.core.operate.load_shares import Demand, next_demand
from ferry.common.model import PartitionKey, PartitionLoad, WorkerStatus


class LoadBalancer:
    def __init__(self, config: ControllerConfig, registry: CollectorRegistry | None = None) -> None:
        self.config = config
        # partition -> (worker reporting it, its last lag, growing since: None when calm)
        self._watch: dict[PartitionKey, tuple[str, int, float | None]] = {}
        self._reports: dict[str, tuple[dict[PartitionKey, PartitionLoad], float | None]] = {}
        # partition -> its estimated demand, kept across a move (its new owner's first window is partial)
        self._demand: dict[PartitionKey, Demand] = {}
        # partition -> the worker whose report last gave its rate, and whether that was its first (PARTIAL)
        self._measured: dict[PartitionKey, tuple[str, bool]] = {}
        self.bytes_gauge = Gauge(
            "ferry_controller_worker_bytes_per_second",
            "Value bytes per second a worker copies, as it last reported (balance by load)",
            ["worker"],
            registry=registry,
        )
        self.records_gauge = Gauge(
            "ferry_controller_worker_records_per_second",
            "Records per second a worker copies, as it last reported (balance by load)",
            ["worker"],
            registry=registry,
        )

    def reset(self) -> None:
        """Forgets every report (a new lead reads them again)."""
        for worker in self._reports:
            self._forget_gauges(worker)
        self._watch, self._reports, self._demand, self._measured = {}, {}, {}, {}

    def observe(self, worker: str, status: WorkerStatus | None, now: float) -> None:
        """A worker's status as the reconciler feeds it to the leader state (None: its node is gone)."""
        if status is None or not status.load:
            if self._reports.pop(worker, None) is not None:
                self._forget_gauges(worker)
            return
        report = (status.load, status.busy)
        if self._reports.get(worker) == report:
            return  # the same window again (a status written for another reason)
        self._reports[worker] = report
        saturated = status.busy is not None and status.busy >= self.config.saturated_busy_ratio
        for partition, load in status.load.items():
            seen = self._watch.get(partition)
            if seen is None or seen[0] != worker or load.lag <= seen[1] or not saturated:
                self._watch[partition] = (worker, load.lag, None)
            else:
                self._watch[partition] = (worker, load.lag, seen[2] if seen[2] is not None else now)
            self._demand[partition] = next_demand(self._demand.get(partition), worker, load, now)
            measured = self._measured.get(partition)
            self._measured[partition] = (worker, measured is not None and measured[0] != worker)
        self.bytes_gauge.labels(worker).set(sum(load.bytes_per_s for load in status.load.values()))
        self.records_gauge.labels(worker).set(sum(load.records_per_s for load in status.load.values()))

    def rates(self, holding: Mapping[PartitionKey, str] | None = None) -> dict[PartitionKey, Rate]:
        """Partition -> its measured rate, from the report of the worker ``holding`` gives it to when
        that worker reports it, else from any report."""
        rates: dict[PartitionKey, Rate] = {}
        for worker, (load, _) in sorted(self._reports.items()):
            for partition, measured in load.items():
                if partition not in rates or (holding is not None and holding.get(partition) == worker):
                    rates[partition] = Rate(measured.bytes_per_s, measured.records_per_s)
        return rates

    def demand(self, holding: Mapping[PartitionKey, str]) -> dict[PartitionKey, Rate]:
        """Partition -> its estimated demand, for the partitions ``holding`` assigns (the others are forgotten:
        they left the ideal states)."""
        self._demand = {p: d for p, d in self._demand.items() if p in holding}
        return {p: d.rate for p, d in self._demand.items()}

    def stuck(self, now: float) -> set[PartitionKey]:
        """Partitions whose lag has grown for ``stuck_after_s`` on a saturated worker."""
        after = self.config.stuck_after_s
        return {p for p, (_, _, since) in self._watch.items() if since is not None and now - since >= after}

    def partial(self, holding: Mapping[PartitionKey, str], eligible: Collection[str]) -> set[PartitionKey]:
        """Partitions the ``eligible`` workers hold whose rate comes from the first window of a new owner (PARTIAL)."""
        return {p for p, (_, first) in self._measured.items() if first and holding.get(p) in eligible}

    def weights(self, holding: Mapping[PartitionKey, str], eligible: Collection[str]) -> dict[PartitionKey, Rate]:
        """Partition -> the rate the planner weighs it at: its measured rate, and for a PARTIAL one its
        estimated demand where that is higher."""
        rates = self.rates(holding)
        for partition in self.partial(holding, eligible):
            if (demand := self._demand.get(partition)) is not None:
                measured = rates.get(partition, Rate())
                rates[partition] = Rate(
                    max(measured.bytes_per_s, demand.rate.bytes_per_s),
                    max(measured.records_per_s, demand.rate.records_per_s),
                )
        return rates

    def plan(
        self, holding: Mapping[PartitionKey, str], eligible: Collection[str], now: float
    ) -> dict[PartitionKey, str]:
        """Partition -> new worker, for the partitions that should move now (empty: none)."""
        if not self._reports or len(set(eligible)) < 2:
            return {}
        rates = self.weights(holding, eligible)
        stuck = {p for p in self.stuck(now) if p in holding}
        after = relieve_stuck(holding, eligible, rates, stuck)
        for partition in stuck:
            self._watch.pop(partition, None)  # its new owner's reports start the count again
        on_eligible = [w for w in after.values() if w in eligible]
        mean = sum(rates.get(p, Rate()).bytes_per_s for p, w in after.items() if w in eligible) / max(
            1, len(set(eligible))
        )
        self._measured = {p: m for p, m in self._measured.items() if p in holding}
        if on_eligible and mean >= self.config.load_balance_min_bytes_per_s:
            after = rebalance_by_load(after, eligible, rates, self.config.imbalance_ratio)
        return {p: w for p, w in after.items() if holding.get(p) != w}

    def _forget_gauges(self, worker: str) -> None:
        for gauge in (self.bytes_gauge, self.records_gauge):
            with contextlib.suppress(KeyError):  # never set
                gauge.remove(worker)
