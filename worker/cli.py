"""``ferry worker --config FILE [--id NAME] [--metrics-port N]``: run one worker until SIGTERM."""

from __future__ import annotations

import argparse
import signal
import socket
from types import FrameType

from ferry.common import logs
from ferry.common.config import load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("worker", help="run a Ferry worker: copy the partitions the controller assigns")
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument("--id", help="this worker's id, stable across restarts (default: the host name)")
    parser.add_argument("--metrics-port", type=int, help="serve /metrics and /health here (0: off; default worker.metrics_port)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ferry.worker.service import Worker  # the Kafka clients load only when a worker really runs

    config = load_config(args.config)
    worker_id = args.id or socket.gethostname()
    logs.set_process_fields(worker=worker_id)  # kazoo's and the metrics server's lines name it too
    worker = Worker(config, worker_id, metrics_port=args.metrics_port)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return worker.run()
