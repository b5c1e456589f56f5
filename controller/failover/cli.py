"""``ferry failover`` and ``ferry failback``: a route's disaster recovery from the command line.

Runs :mod:`controller.failover.workflow` from the config, against ZooKeeper and the clusters, with no
controller needed (a disaster is when the controllers may be gone too); the state it persists in
ZooKeeper is what the leader acts on (it stops copying a failed-over route) and what a retried
command goes on from. Prints the report as JSON. Exit status 2 with one line for any refusal
(a second failover of a failed-over route names its state).
"""

from __future__ import annotations

import argparse
import json
import sys

from ferry.common.cli import ferry_version, require_option
from ferry.common.config import load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    failover = subparsers.add_parser("failover", help="fail a route over to its destination (planned or not)")
    failover.add_argument("--config", help="Ferry's YAML config file")
    failover.add_argument("--route", help="the route, <source>.<destination>")
    failover.add_argument(
        "--planned",
        action="store_true",
        help="switchover: wait until the source is quiet and everything is copied (else: the "
        "source is gone; use the last checkpoints and report the RPO)",
    )
    failover.add_argument("--groups", help="only consumer groups fully matching this regular expression")
    failover.add_argument(
        "--topics",
        help="only topics fully matching this regular expression are drained, "
        "verified and reported (the route stops as a whole)",
    )
    failover.add_argument(
        "--quiet-s",
        type=float,
        default=5.0,
        help="planned: the source counts as stopped when no log end moved for this long (default 5)",
    )
    failover.add_argument(
        "--timeout-s", type=float, default=300.0, help="give up waiting after this long (default 300)"
    )
    failover.set_defaults(func=_failover)
    failback = subparsers.add_parser(
        "failback",
        help="copy back what a failed-over route's destination got since, then restore the original direction",
    )
    failback.add_argument("--config", help="Ferry's YAML config file")
    failback.add_argument("--route", help="the failed-over route, <source>.<destination>")
    failback.add_argument(
        "--restore",
        action="store_true",
        help="after the switchover back: the route copies again (records it never copied "
        "before the outage stay only at its source)",
    )
    failback.add_argument(
        "--timeout-s", type=float, default=300.0, help="give up waiting after this long (default 300)"
    )
    failback.set_defaults(func=_failback)


def _run(args: argparse.Namespace, command: str) -> int:
    from ferry.common.zk import layout as zk_layout
    from ferry.common.zk.state import StateReader
    from ferry.controller.failover.workflow import FailoverRun

    require_option(args, "config", "--config", command)
    config = load_config(args.config)
    zk = zk_layout.make_client(config.zookeeper)
    zk_layout.connect(zk, config.zookeeper)
    layout = zk_layout.ZkLayout(config.zookeeper.root)
    StateReader(zk, layout).check_layout(ferry_version())
    run = FailoverRun(config, zk, layout, say=lambda line: print(line, file=sys.stderr, flush=True))
    try:
        route = config.route(args.route).name
        if command == "failover":
            result = run.failover(route, args.planned, args.groups, args.topics, args.quiet_s, args.timeout_s)
        elif args.restore:
            result = run.restore(route)
        else:
            result = run.failback(route, args.timeout_s)
    finally:
        run.close()
        zk.stop()
        zk.close()
    print(json.dumps(result, indent=2))
    return 0


def _failover(args: argparse.Namespace) -> int:
    return _run(args, "failover")


def _failback(args: argparse.Namespace) -> int:
    return _run(args, "failback")
