"""The worker's Prometheus metrics, its HTTP endpoint (``/metrics``, the health probes) and the URL it registers.

Each worker has its own :class:`CollectorRegistry`, so several workers (or tests) in one
process never collide. Every name starts with ``ferry_worker_``; counters are exposed with
``_total``. Counters are updated once per consumed batch, and the record-age histogram once per
settled run of deliveries, never per record: the copy loop's records per CPU-second matter.
Per-partition lag is the leader's (``ferry_controller_partition_lag``, from the committed offsets
of every partition of the ideal state): a worker exports none.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

from ferry.common import endpoints
from ferry.common.config import WorkerConfig

log = logging.getLogger(__name__)

# Record age from a few milliseconds (a quiet route) to an hour (a route catching up on a backlog).
RECORD_AGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.records = Counter(
            "ferry_worker_records_copied",
            "Records handed to the destination producer",
            ["route"],
            registry=self.registry,
        )
        self.skipped = Counter(
            "ferry_worker_records_skipped",
            "Records not copied on purpose (loop prevention, copy flags)",
            ["route"],
            registry=self.registry,
        )
        self.bytes = Counter(
            "ferry_worker_bytes_copied",
            "Value bytes handed to the destination producer",
            ["route"],
            registry=self.registry,
        )
        self.errors = Counter(
            "ferry_worker_errors",
            "Errors by kind: partition (stopped), consumer, commit, offset_map, transaction (aborted)",
            ["route", "kind"],
            registry=self.registry,
        )
        self.transactions = Counter(
            "ferry_worker_transactions",
            "Transactions committed on the destination (exactly-once routes)",
            ["route"],
            registry=self.registry,
        )
        self.fenced = Counter(
            "ferry_worker_fenced",
            "Times the leader fenced this worker's transactional writer of a route (it then registered again)",
            ["route"],
            registry=self.registry,
        )
        self.zookeeper_unreachable = Gauge(
            "ferry_worker_zookeeper_unreachable_seconds",
            "How long ZooKeeper has been unreachable (0: connected); exactly-once routes copy on meanwhile",
            registry=self.registry,
        )
        self.partitions = Gauge(
            "ferry_worker_partitions", "Partitions held, by state", ["state"], registry=self.registry
        )
        self.in_flight = Gauge(
            "ferry_worker_in_flight", "Records sent but not yet acknowledged by the destination", registry=self.registry
        )
        self.resume_skipped = Counter(
            "ferry_worker_resume_skipped",
            "Records not copied because the destination already had them",
            ["route"],
            registry=self.registry,
        )
        self.lost = Counter(
            "ferry_worker_records_lost",
            "Source records deleted at the source (retention, deleteRecords) before they were copied: never copied",
            ["route", "topic"],
            registry=self.registry,
        )
        self.lookback = Counter(
            "ferry_worker_lookback_records",
            "Destination records read back when taking a partition",
            ["route"],
            registry=self.registry,
        )
        self.lookback_open_transaction_waits = Counter(
            "ferry_worker_lookback_open_transaction_waits",
            "Partition starts that waited for an open transaction on the destination partition to end before "
            "reading it back (its last stable offset below its end); one that did not end in time is retried",
            ["route"],
            registry=self.registry,
        )
        self.mm2_recopied = Gauge(
            "ferry_worker_mm2_recopied_records",
            "Taking over from MirrorMaker 2: records it had copied after its last offset flush, copied again",
            ["route", "topic", "partition"],
            registry=self.registry,
        )
        self.generation = Gauge("ferry_worker_generation", "Assignment generation applied", registry=self.registry)
        self.record_age = Histogram(
            "ferry_worker_record_age_seconds",
            "End-to-end latency, as MirrorMaker 2's record-age-ms: when the destination acknowledged a record "
            "minus the record's timestamp. Sampled: one observation per run of a partition's records "
            "acknowledged together (the run's first, oldest record), not one per record",
            ["route"],
            registry=self.registry,
            buckets=RECORD_AGE_BUCKETS,
        )
        self.topics_waiting_for_brokers = Gauge(
            "ferry_worker_topics_waiting_for_brokers",
            "The route's destination topics (its offset-map topic among them) not created yet: fewer of the "
            "destination's brokers are registered than they are to get replicas, and the cluster has more "
            "(a broker restarts); created once the brokers are back",
            ["route"],
            registry=self.registry,
        )
        self.topics_capped = Counter(
            "ferry_worker_topics_capped",
            "Topics this worker created on the route's destination with fewer replicas than wanted, because "
            "the whole destination cluster has fewer brokers",
            ["route"],
            registry=self.registry,
        )

    def start_route(self, route: str) -> None:
        """Shows the route's fencing and capped-topic counters at 0 before they count anything, so that
        their first count is an increase an alert sees (a labelled counter has no series until touched),
        and its topics waiting for brokers at 0."""
        self.fenced.labels(route)
        self.topics_capped.labels(route)
        self.topics_waiting_for_brokers.labels(route).set(0)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


Environ = dict[str, Any]
StartResponse = Callable[..., Any]


@dataclass(frozen=True)
class HealthAnswer:
    """One health probe's answer: 200 when ``ok``, else 503; ``body`` is its JSON."""

    ok: bool
    body: dict[str, Any]


def serve(
    metrics: WorkerMetrics,
    liveness: Callable[[], HealthAnswer],
    readiness: Callable[[], HealthAnswer],
    host: str,
    port: int,
) -> _ThreadingWSGIServer:
    """Serves ``/metrics`` and the health probes on a daemon thread: ``/health/live`` (``liveness()``),
    ``/health/ready`` and ``/health`` (both ``readiness()``)."""
    metrics_app = make_wsgi_app(metrics.registry)
    probes = {"/health": readiness, "/health/ready": readiness, "/health/live": liveness}

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        probe = probes.get(environ.get("PATH_INFO", ""))
        if probe is not None:
            answer = probe()
            body = json.dumps(answer.body).encode()
            status = "200 OK" if answer.ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        result: Iterable[bytes] = metrics_app(environ, start_response)
        return result

    server = make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="worker-metrics", daemon=True).start()
    return server


def advertised_metrics_url(settings: WorkerConfig, port: int | None) -> str | None:
    """The metrics URL to register: worker.advertised_metrics_url, else derived from the bind address."""
    if not port:
        return None
    return endpoints.advertised_url(
        "http",
        settings.metrics_host,
        port,
        settings.advertised_metrics_url,
        f"worker.advertised_metrics_url, --advertised-metrics-url or ${endpoints.ADVERTISED_METRICS_URL_ENV}",
    )
