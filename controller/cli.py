"""``ferry controller --config FILE [--rest-port N] [--id NAME]``: run one controller until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
from types import FrameType

from common.config import load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="run a Ferry controller (REST API; one of them leads)")
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument("--rest-port", type=int, help="REST port (default controller.rest_port)")
    parser.add_argument("--id", help="this controller's id (default: host name and REST port)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from werkzeug.serving import make_server

    from controller.rest import create_app
    from controller.service import Controller

    config = load_config(args.config)
    host = config.controller.rest_host
    port = args.rest_port or config.controller.rest_port
    controller_id = args.id or f"{socket.gethostname()}-{port}"
    controller = Controller(config, controller_id, rest_url=f"http://{host}:{port}", config_path=args.config)
    app = create_app(controller, forward_timeout_s=config.controller.forward_timeout_s)
    server = make_server(host, port, app, threaded=True)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    # APScheduler's warnings (a skipped or missed run) stay visible, and the controller counts
    # them in ferry_controller_job_skips_total; its per-run INFO lines are noise.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    controller.start()
    threading.Thread(target=server.serve_forever, name="controller-rest", daemon=True).start()
    logging.getLogger(__name__).info("controller %s serving REST on http://%s:%d", controller_id, host, port)
    try:
        stop.wait()
    finally:
        server.shutdown()
        controller.stop()
    return 0
