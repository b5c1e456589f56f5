"""``ferry worker --config FILE [--id NAME] [--metrics-host H] [--metrics-port N] [--advertised-metrics-url URL]``:
run one worker until SIGTERM.

``--metrics-host``/``--advertised-metrics-url`` (and ``$FERRY_METRICS_HOST``/
``$FERRY_ADVERTISED_METRICS_URL``) set per process what the file's ``worker.metrics_host``/
``advertised_metrics_url`` say for all workers (:mod:`common.endpoints`).
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
from types import FrameType

from ferry.common import allocator, collector, endpoints, logs
from ferry.common.config import load_config

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run a Ferry worker: copy the partitions the controller assigns")
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument("--id", help="this worker's id, stable across restarts (default: the host name)")
    parser.add_argument(
        "--metrics-host",
        help=f"metrics and /health bind address (default ${endpoints.METRICS_HOST_ENV}, then worker.metrics_host)",
    )
    parser.add_argument(
        "--metrics-port", type=int, help="serve /metrics and /health here (0: off; default worker.metrics_port)"
    )
    parser.add_argument(
        "--advertised-metrics-url",
        help="the metrics URL registered in ZooKeeper, e.g. http://10.0.0.8:9100 "
        f"(default ${endpoints.ADVERTISED_METRICS_URL_ENV}, then worker.advertised_metrics_url, "
        "then derived from the bind address)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ferry.worker.service import Worker  # the Kafka clients load only when a worker really runs

    config = load_config(args.config)
    worker_config = config.worker
    metrics_host = (
        endpoints.pick(args.metrics_host, endpoints.METRICS_HOST_ENV, worker_config.metrics_host, "--metrics-host")
        or ""
    )
    advertised = endpoints.pick(
        args.advertised_metrics_url,
        endpoints.ADVERTISED_METRICS_URL_ENV,
        worker_config.advertised_metrics_url,
        "--advertised-metrics-url",
        url=True,
    )
    config = config.model_copy(
        update={
            "worker": worker_config.model_copy(
                update={"metrics_host": metrics_host, "advertised_metrics_url": advertised}
            )
        }
    )
    worker_id = args.id or socket.gethostname()
    logs.set_process_fields(worker=worker_id)  # kazoo's and the metrics server's lines name it too
    worker = Worker(config=config, worker_id=worker_id, metrics_port=args.metrics_port)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    collector.settle_for_copying()  # the copy loop's objects are acyclic: see common.collector
    if worker_config.keep_freed_memory and not allocator.keep_freed_memory():
        log.info("worker.keep_freed_memory: this C library's malloc takes no thresholds; left as it is")
    return worker.run()
