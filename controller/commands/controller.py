"""``ferry controller --config FILE [--rest-host H] [--rest-port N] [--advertised-url URL] [--id NAME]``:
run one controller until SIGTERM.

``--rest-host``/``--advertised-url`` (and ``$FERRY_REST_HOST``/``$FERRY_ADVERTISED_URL``) set
per process what the file's ``controller.rest_host``/``advertised_url`` say for all of them, so
one config file serves every host and pod (:mod:`common.endpoints`).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import socket
import ssl
import threading
from types import FrameType

from ferry.common import endpoints, extras, logs
from ferry.common.config import load_config
from ferry.common.errors import ConfigError
from ferry.common.zk.layout import lost

# The leader state holds millions of small objects at 160,000 partitions (partition keys,
# statuses, indexes), and a bulk POST allocates hundreds of thousands more. With CPython's default
# thresholds (a young collection every 700 allocations, an older one every 10 of those) the cyclic
# collector runs thousands of times per bulk POST and walks the survivors again and again:
# in a replay of 20 bulk POSTs of 8,000 partitions onto 2,000 workers (leader state, writes and status
# decoding only, no ZooKeeper) it was a fifth of the leader's CPU. Reference counting frees
# almost everything the controller drops; the collector only finds cycles, so it can run rarely.
GC_THRESHOLDS = (50_000, 20, 100)
# How often the main thread looks whether kazoo gave up reconnecting to ZooKeeper.
ZOOKEEPER_CHECK_S = 1.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="run a Ferry controller (REST API; one of them leads)")
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument(
        "--rest-host", help=f"REST bind address (default ${endpoints.REST_HOST_ENV}, then controller.rest_host)"
    )
    parser.add_argument("--rest-port", type=int, help="REST port (default controller.rest_port)")
    parser.add_argument(
        "--advertised-url",
        help="the URL other controllers reach this one at, e.g. "
        f"http://10.0.0.7:9000 (default ${endpoints.ADVERTISED_URL_ENV}, then controller.advertised_url, "
        "then derived from the bind address)",
    )
    parser.add_argument("--id", help="this controller's id (default: host name and REST port)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from cheroot import wsgi
    from cheroot.ssl.builtin import BuiltinSSLAdapter

    from ferry.controller.api.auth import TokenChecker
    from ferry.controller.api.rest import create_app
    from ferry.controller.service import Controller

    config = load_config(args.config)
    gc.set_threshold(*GC_THRESHOLDS)  # a controller process only, never a library user's
    controller_config = config.controller
    if controller_config.validation_interval_s:  # the leader runs `ferry validate` then: Spark, at once not later
        extras.require("spark", "controller.validation_interval_s > 0 (ferry validate)")
    host = endpoints.pick(args.rest_host, endpoints.REST_HOST_ENV, controller_config.rest_host, "--rest-host") or ""
    port = args.rest_port or controller_config.rest_port
    controller_id = args.id or f"{socket.gethostname()}-{port}"
    logs.set_process_fields(controller=controller_id)
    checker = TokenChecker.from_config(controller_config.auth) if controller_config.auth else None
    tls = controller_config.tls
    scheme = "https" if tls else "http"
    forward_verify: bool | str = (tls.ca_file or tls.cert_file) if tls else True
    ssl_adapter = None
    if tls:  # checked before anything starts, so a bad file is one line and exit status 2
        for path in (tls.cert_file, tls.key_file, *([tls.ca_file] if tls.ca_file else [])):
            if not os.access(path, os.R_OK) or not os.path.isfile(path):
                raise ConfigError(f"controller.tls: {path} is not a readable file")
        try:
            ssl_adapter = BuiltinSSLAdapter(tls.cert_file, tls.key_file)
        except (ssl.SSLError, OSError, ValueError) as exc:
            raise ConfigError(f"controller.tls: cannot use {tls.cert_file} with {tls.key_file}: {exc}") from None
    advertised = endpoints.pick(
        args.advertised_url,
        endpoints.ADVERTISED_URL_ENV,
        controller_config.advertised_url,
        "--advertised-url",
        url=True,
    )
    rest_url = endpoints.advertised_url(
        scheme,
        host,
        port,
        advertised,
        f"controller.advertised_url, --advertised-url or ${endpoints.ADVERTISED_URL_ENV}",
    )
    if not rest_url.startswith(f"{scheme}://"):
        raise ConfigError(
            f"the advertised URL {rest_url} is not {scheme}://, but controller.tls is {'set' if tls else 'absent'}"
        )
    controller = Controller(config=config, controller_id=controller_id, rest_url=rest_url, config_path=args.config)
    app = create_app(
        controller, forward_timeout_s=controller_config.forward_timeout_s, auth=checker, forward_verify=forward_verify
    )
    # cheroot: a thread pool and TLS built in (waitress has no TLS); see docs/design.md.
    server = wsgi.Server(
        (host, port),
        app,
        numthreads=controller_config.rest_threads,
        server_name=f"ferry-{controller_id}",
        timeout=30,
        shutdown_timeout=5,
    )
    server.ssl_adapter = ssl_adapter
    # APScheduler's warnings (a skipped or missed run) stay visible, and the controller counts
    # them in ferry_controller_job_skips_total; its per-run INFO lines are noise.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # Before anything that can take time (binding, connecting): SIGTERM ends every state promptly.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        server.prepare()  # binds now, so a taken port fails here with one line
    except OSError as exc:
        raise ConfigError(f"cannot serve REST on {host}:{port}: {exc.strerror or exc}") from None
    # prepare() started cheroot's worker threads, which are not daemons: whatever happens from
    # here on (SIGTERM while connecting, ZooKeeper unreachable), the server must be stopped or
    # the process would outlive its error.
    try:
        if not controller.start(stop):
            return 0
        threading.Thread(target=server.serve, name="controller-rest", daemon=True).start()
        logging.getLogger(__name__).info(
            "controller %s serving REST on %s (advertised as %s, authentication %s)",
            controller_id,
            endpoints.host_url(scheme, host, port),
            rest_url,
            "on" if checker else "off",
        )
        while not stop.wait(ZOOKEEPER_CHECK_S):
            if controller.zookeeper_given_up():  # a supervisor starts it again, with a new session
                raise lost(config.zookeeper)
    finally:
        server.stop()
        controller.stop()
    return 0
