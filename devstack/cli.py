"""``ferry dev up [--clusters ...] [--authorizer] [--registries] | down | status``: the local stack's command."""

from __future__ import annotations

import argparse
import sys

from ferry.common.tables import print_table
from ferry.devstack.processes import down, status, up
from ferry.devstack.stack import (
    CLUSTERS_ENV,
    EXTRA_PORT_ENV,
    MAX_BROKERS,
    OLDER_KAFKA,
    REGISTRIES_ENV,
    extra_record_file,
    parse_clusters,
    stack_from_env,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dev", help="the local ZooKeeper + Kafka clusters src, dst [+ more, + registries]")
    actions = parser.add_subparsers(dest="dev_action", required=True)
    up_parser = actions.add_parser("up", help="start what is not running and wait until all answer")
    up_parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each server")
    up_parser.add_argument(
        "--clusters",
        default="",
        metavar="A,B:3,C:kafka-2.8,...",
        help=f"extra Kafka clusters to start besides src and dst (also ${CLUSTERS_ENV}), NAME:N for N brokers "
        f"(1-{MAX_BROKERS}), NAME:VERSION for an older Kafka ({', '.join(OLDER_KAFKA)}); "
        f"ports from ${EXTRA_PORT_ENV} (30092) + 10 each, or $FERRY_DEV_PORT_<NAME>",
    )
    up_parser.add_argument(
        "--authorizer",
        action="store_true",
        help="the --clusters enforce ACLs (StandardAuthorizer; the SASL_SSL user may do only what "
        "ACLs grant, PLAINTEXT is the super user); for clusters not running yet",
    )
    up_parser.add_argument(
        "--registries", action="store_true", help=f"also one schema registry per cluster (or set {REGISTRIES_ENV}=1)"
    )
    up_parser.set_defaults(func=_cmd_up)
    actions.add_parser("down", help="stop what `up` started").set_defaults(func=_cmd_down)
    status_parser = actions.add_parser("status", help="what runs where")
    status_parser.add_argument("--json", action="store_true")
    status_parser.set_defaults(func=_cmd_status)


def _cmd_up(args: argparse.Namespace) -> int:
    specs = parse_clusters(args.clusters, "--clusters")
    stack = stack_from_env(list(filter(None, args.clusters.split(","))), registries=args.registries or None)
    if args.authorizer:
        stack = stack_from_env(registries=args.registries or None)
        for name, spec in specs.items():
            stack = stack.with_clusters([name], authorizer=True, brokers=spec.brokers, version=spec.version)
    up(stack, deadline_s=args.timeout)
    print_table(status(stack), ["name", "address", "state"])
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    stopped = down(stack_from_env(recorded=True, registries=True))
    extra_record_file().unlink(missing_ok=True)
    if not stopped:
        print("nothing to stop")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    rows = status(stack_from_env(recorded=True))
    if args.json:
        import json

        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print_table(rows, ["name", "kind", "address", "pid", "state", "log"])
    return 0
