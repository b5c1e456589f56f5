"""The worker's Prometheus metrics and its small HTTP endpoint (``/metrics`` and ``/health``).

Each worker has its own :class:`CollectorRegistry`, so several workers (or tests) in one
process never collide. Counters are updated once per consumed batch, not per record.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app

log = logging.getLogger(__name__)


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.records = Counter("ferry_worker_records_copied", "Records handed to the destination producer",
                               ["route"], registry=self.registry)
        self.skipped = Counter("ferry_worker_records_skipped", "Records not copied on purpose (loop prevention, copy flags)",
                               ["route"], registry=self.registry)
        self.bytes = Counter("ferry_worker_bytes_copied", "Value bytes handed to the destination producer",
                             ["route"], registry=self.registry)
        self.errors = Counter("ferry_worker_errors", "Errors by kind: partition (stopped), consumer, commit",
                              ["route", "kind"], registry=self.registry)
        self.lag = Gauge("ferry_worker_partition_lag", "Log-end offset minus the consumer's position",
                         ["route", "topic", "partition"], registry=self.registry)
        self.partitions = Gauge("ferry_worker_partitions", "Partitions held, by state", ["state"], registry=self.registry)
        self.in_flight = Gauge("ferry_worker_in_flight", "Records sent but not yet acknowledged by the destination",
                               registry=self.registry)
        self.resume_skipped = Counter("ferry_worker_resume_skipped", "Records not copied because the destination already had them",
                               ["route"], registry=self.registry)
        self.lookback = Counter("ferry_worker_lookback_records", "Destination records read back when taking a partition",
                                ["route"], registry=self.registry)
        self.generation = Gauge("ferry_worker_generation", "Assignment generation applied", registry=self.registry)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format, *args)


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


Environ = dict[str, Any]
StartResponse = Callable[..., Any]


def serve(metrics: WorkerMetrics, health: Callable[[], dict[str, Any]], host: str, port: int) -> _ThreadingWSGIServer:
    """Serves ``/metrics`` and ``/health`` (JSON from ``health()``) on a daemon thread."""
    metrics_app = make_wsgi_app(metrics.registry)

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/health":
            body = json.dumps(health()).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        result: Iterable[bytes] = metrics_app(environ, start_response)
        return result

    server = make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="worker-metrics", daemon=True).start()
    return server
