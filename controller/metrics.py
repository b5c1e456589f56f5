"""The controller's Prometheus metrics: one registry, every gauge, counter and histogram by name.

Every name starts with ``ferry_controller_`` (heartbeats too: the controller measures them);
counters are :class:`prometheus_client.Counter` (or counter families) exposed with ``_total``.
Owns no state of its own besides the metric values (and which partitions its per-partition gauges
show); the other parts set them. ZooKeeper traffic
is read at scrape time from the :class:`controller.lead.store.Store` counters (and the watch reads the
reconciler counts), through what is given here (:class:`ZkCounters`, :class:`_ZkTraffic`). APScheduler's job
events are counted by :meth:`ControllerMetrics.on_job_event` (the scheduler's thread; never raises).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobEvent, JobExecutionEvent
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ferry.common.model import PartitionKey

log = logging.getLogger(__name__)

_SECONDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ZkCounters(Protocol):
    """The ZooKeeper traffic counters the metrics read at scrape time (:class:`controller.lead.store.Store`
    keeps them; the lead imports these metrics, so they name only what they read)."""

    @property
    def reads(self) -> int: ...
    @property
    def writes(self) -> int: ...
    @property
    def transactions(self) -> int: ...
    @property
    def max_transaction_bytes(self) -> int: ...
    @property
    def max_node_bytes(self) -> int: ...


class ControllerMetrics:
    """The metrics a controller exports on ``GET /metrics``."""

    def __init__(self, store: ZkCounters, watch_reads: Callable[[], int]) -> None:
        self.registry = registry = CollectorRegistry()
        self.leader = Gauge("ferry_controller_leader", "1 while this controller leads", registry=registry)
        self.partitions = Gauge(
            "ferry_controller_partitions", "Mirrored partitions by reported state", ["state"], registry=registry
        )
        self.lag = Gauge(
            "ferry_controller_partition_lag",
            "Log-end minus committed offset at the source, for every partition of the ideal state",
            ["route", "topic", "partition"],
            registry=registry,
        )
        self.validation_problems = Gauge(
            "ferry_controller_validation_problems", "Problems found by the last Spark validation", registry=registry
        )
        self.stalled = Gauge(
            "ferry_controller_noprogress_partitions",
            "Lagging partitions whose committed offset has not moved",
            registry=registry,
        )
        # Per partition, only those that have the property (see _show): paused, or making no progress.
        self.paused = Gauge(
            "ferry_controller_partition_paused",
            "1 for each partition of the ideal state an operator paused (ferry pause)",
            ["route", "topic", "partition"],
            registry=registry,
        )
        self.noprogress_seconds = Gauge(
            "ferry_controller_partition_noprogress_seconds",
            "Seconds since the committed offset of a lagging partition moved, for the partitions GET /noprogress lists",
            ["route", "topic", "partition"],
            registry=registry,
        )
        self.cordoned_unassigned = Gauge(
            "ferry_controller_cordoned_unassigned_partitions",
            "Partitions without a worker because an operator cordoned or drained every live worker",
            registry=registry,
        )
        self.held_twice = Gauge(
            "ferry_controller_partitions_held_twice",
            "Partitions that two live workers report holding at once: 0 unless a handoff broke",
            registry=registry,
        )
        self._shown: dict[Gauge, dict[PartitionKey, float]] = {self.paused: {}, self.noprogress_seconds: {}}
        self.job_runs = Counter("ferry_controller_job_runs", "Runs of the leader's jobs", ["job"], registry=registry)
        self.job_failures = Counter(
            "ferry_controller_job_failures", "Runs of the leader's jobs that raised", ["job"], registry=registry
        )
        self.job_skips = Counter(
            "ferry_controller_job_skips",
            "Runs APScheduler skipped (missed their time, or too many instances)",
            ["job", "why"],
            registry=registry,
        )
        self.acl_sync_failures = Counter(
            "ferry_controller_acl_sync_failures",
            "Runs of a route's ACL sync that failed, by reason: refused (a cluster's authorizer refused Ferry's "
            "principal: it lacks Describe on the source or Alter on the destination cluster) or failed (a cluster "
            "could not be read or written: unreachable, no authorizer, a timeout)",
            ["route", "reason"],
            registry=registry,
        )
        self.reconcile_seconds = Histogram(
            "ferry_controller_reconcile_seconds",
            "Time of one reconcile (plan and writes)",
            registry=registry,
            buckets=_SECONDS,
        )
        self.plan_seconds = Histogram(
            "ferry_controller_plan_seconds",
            "Time of one reconcile's planning alone",
            registry=registry,
            buckets=_SECONDS,
        )
        registry.register(_ZkTraffic(store, watch_reads))
        self.checkpoint_age = Gauge(
            "ferry_controller_checkpoint_age_seconds",
            "Seconds since a consumer group's offsets were last checkpointed",
            ["route", "group"],
            registry=registry,
        )
        self.beat_latency = Gauge(
            "ferry_controller_heartbeat_latency_seconds",
            "Latest heartbeat's travel time from its origin to this cluster",
            ["origin", "cluster", "hops"],
            registry=registry,
        )
        self.beat_age = Gauge(
            "ferry_controller_heartbeat_age_seconds",
            "Time since the last heartbeat from origin arrived on cluster",
            ["origin", "cluster"],
            registry=registry,
        )
        self.route_latency = Gauge(
            "ferry_controller_route_heartbeat_latency_seconds",
            "Latest one-hop heartbeat's travel time over the route",
            ["route"],
            registry=registry,
        )
        self.route_age = Gauge(
            "ferry_controller_route_heartbeat_age_seconds",
            "Time since the last one-hop heartbeat over the route arrived",
            ["route"],
            registry=registry,
        )

    def set_paused(self, partitions: Iterable[PartitionKey]) -> None:
        """The partitions an operator paused (the reconciler's, under its lock)."""
        self._show(self.paused, dict.fromkeys(partitions, 1.0))

    def set_noprogress(self, stalled: Mapping[PartitionKey, float]) -> None:
        """The stalled partitions -> seconds since their committed offset moved (the lag job's)."""
        self._show(self.noprogress_seconds, stalled)

    def _show(self, gauge: Gauge, values: Mapping[PartitionKey, float]) -> None:
        """Sets ``gauge`` to ``values``, one series per partition, removing the series of the
        partitions no longer there; never clears it whole, so a scrape never sees it empty between.
        Only what changed is written (the reconciler calls it at every reconcile)."""
        shown = self._shown[gauge]
        for key in shown.keys() - values.keys():
            gauge.remove(key.route, key.topic, str(key.partition))
        for key, value in values.items():
            if shown.get(key) != value:
                gauge.labels(key.route, key.topic, str(key.partition)).set(value)
        self._shown[gauge] = dict(values)

    def on_job_event(self, event: JobEvent) -> None:
        """Counts every run, failure and skip of a job (APScheduler's listener; never raises)."""
        job = job_name(event.job_id)
        # Every series of the job exists from its first run on, at 0 until it counts something: the
        # first failure or skip is then an increase (an alert's increase() sees no series appear).
        self.job_failures.labels(job)
        for why in ("missed", "max_instances"):
            self.job_skips.labels(job, why)
        if event.code == EVENT_JOB_EXECUTED:
            self.job_runs.labels(job).inc()
        elif event.code == EVENT_JOB_ERROR:
            self.job_runs.labels(job).inc()
            self.job_failures.labels(job).inc()
            exception = event.exception if isinstance(event, JobExecutionEvent) else None
            log.error("job %s failed: %r", event.job_id, exception)
        else:
            # APScheduler logs each skip as a warning itself (left visible); this counts them.
            why = "missed" if event.code == EVENT_JOB_MISSED else "max_instances"
            self.job_skips.labels(job, why).inc()

    def job_counts(self) -> dict[str, dict[str, int]]:
        """Job -> {"runs", "failures", "skips"}, from the metrics (for tests and the bench)."""
        result: dict[str, dict[str, int]] = {}
        for metric, field in ((self.job_runs, "runs"), (self.job_failures, "failures"), (self.job_skips, "skips")):
            for family in metric.collect():
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        entry = result.setdefault(sample.labels["job"], {"runs": 0, "failures": 0, "skips": 0})
                        entry[field] += int(sample.value)
        return result

    def text(self) -> bytes:
        """The exposition text of every metric."""
        return generate_latest(self.registry)


class _ZkTraffic(Collector):
    """ZooKeeper traffic read at scrape time from the store's own counters: counters (``_total``)
    for what only grows, gauges for the biggest sizes written."""

    def __init__(self, store: ZkCounters, watch_reads: Callable[[], int]) -> None:
        self._store = store
        self._watch_reads = watch_reads

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        store = self._store
        yield CounterMetricFamily(
            "ferry_controller_zk_reads",
            "ZooKeeper reads by this controller (watch reads included)",
            value=store.reads + self._watch_reads(),
        )
        yield CounterMetricFamily(
            "ferry_controller_zk_writes", "ZooKeeper write ops committed by this controller", value=store.writes
        )
        yield CounterMetricFamily(
            "ferry_controller_zk_transactions", "ZooKeeper transactions by this controller", value=store.transactions
        )
        yield GaugeMetricFamily(
            "ferry_controller_zk_max_transaction_bytes",
            "The biggest transaction written, in bytes",
            value=store.max_transaction_bytes,
        )
        yield GaugeMetricFamily(
            "ferry_controller_zk_max_node_bytes", "The biggest node written, in bytes", value=store.max_node_bytes
        )


def job_name(job_id: str) -> str:
    """A metric label: ``failover-<worker>`` jobs count as one ``failover`` job."""
    return "failover" if job_id.startswith("failover-") else job_id
