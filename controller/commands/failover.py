"""``ferry failover`` and ``ferry failback``: a route's disaster recovery from the command line.

Runs :mod:`controller.failover.workflow` from the config, against ZooKeeper and the clusters, with no
controller needed (a disaster is when the controllers may be gone too); the state it persists in
ZooKeeper is what the leader acts on (it stops copying a failed-over route) and what a retried
command goes on from. Prints the report as JSON (an unplanned failover also prints its RPO range in
one line on stderr, :func:`rpo_line`). Exit status 2 with one line for any refusal (a second
failover of a failed-over route names its state).

``--dry-run`` prints what the failover would do (:meth:`FailoverRun.plan`) and changes nothing. The
unplanned failover gives up on whatever the source holds and the route has not copied, so it asks
first: on a terminal it prints the dry run's summary and waits for the route's name to be typed
(any other answer does nothing, exit status 1); with stdin not a terminal it needs ``--yes`` (else it
refuses, exit status 2, before connecting to anything). A planned failover does not ask: it loses
nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, TextIO

from ferry.common.cli import ferry_version, require_option
from ferry.common.config import load_config
from ferry.controller.errors import BadRequest

PROMPT = "Type the route name to fail over without waiting for the source: "
NOT_CONFIRMED = 1  # the exit status when the prompt's answer is not the route's name


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
    failover.add_argument(
        "--dry-run",
        action="store_true",
        help="print what the failover would do (phases, partitions, groups and their translation, the RPO) "
        "and change nothing",
    )
    failover.add_argument(
        "--yes",
        action="store_true",
        help="unplanned: do not ask for confirmation (needed when stdin is not a terminal)",
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


def needs_confirmation(args: argparse.Namespace) -> bool:
    """Whether this ``ferry failover`` asks before it runs: the unplanned one, unless ``--yes`` or ``--dry-run``."""
    return not (args.planned or args.dry_run or args.yes)


def refuse_without_terminal(args: argparse.Namespace, stdin: TextIO) -> None:
    """No one can answer the prompt: an unplanned failover without ``--yes`` is refused (exit status 2)."""
    if needs_confirmation(args) and not stdin.isatty():
        raise BadRequest("the unplanned failover needs --yes when not run on a terminal")


def summary(plan: Mapping[str, Any]) -> list[str]:
    """The dry run's report (:meth:`FailoverRun.plan`) in a few lines for a person."""
    route, details = plan["route"], plan["plan"]
    kind = "planned failover" if plan["planned"] else "unplanned failover (the source is not waited for)"
    lines = [
        f"{kind} of route {route}, {plan['source']} -> {plan['destination']}; now {plan['state']}",
        "phases: " + " -> ".join(plan["phases"]) + "; the route stops copying at SYNCING",
    ]
    topics = ", ".join(f"{topic} ({count})" for topic, count in sorted(plan["partitions"].items()))
    lines.append(f"topics (partitions): {topics or 'none'}")
    if not plan["planned"]:
        lines.append(rpo_line(details))
        lines += [
            f"  {row['topic']}/{row['partition']}: source end {row['sourceEnd']}, copied {row['copied']}, "
            f"not copied {_partition_range(row)}"
            for row in details["rpo"]
        ]
    else:
        lines += [
            f"  {row['topic']}/{row['partition']}: source end {row['sourceEnd']}, copied {row['committed']}, "
            f"still to copy {row['lag']}"
            for row in details["partitions"]
        ]
    lines.append(
        f"groups committed on {plan['destination']}: " + (", ".join(g["group"] for g in details["groups"]) or "none")
    )
    for group in details["groups"]:
        lines += [
            f"  {group['group']} {row['topic']}/{row['partition']}: {_or_none(row['committed'])} -> "
            f"{row['destinationOffset']} ({row['method']})"
            for row in group["partitions"]
        ]
    return lines


def rpo_line(report: Mapping[str, Any]) -> str:
    """An unplanned failover's RPO (its report, or its dry run's plan) in one line: between the records
    the leader saw at the source and never copied, and about those plus what the source probably took
    since the leader's last look (and why that estimate may be short, when it may)."""
    seen = report["sourceEndsSeenAt"]
    since = "" if seen is None else f", {report['sourceUnseenS']:g} s before this report"
    line = (
        f"RPO: between {report['notCopied']} and about {report['notCopiedUpperEstimate']} records not copied "
        f"(source log ends last seen {_when(seen)}{since})"
    )
    return f"{line}; {report['rpoNote']}" if report["rpoNote"] else line


def _partition_range(row: Mapping[str, Any]) -> str:
    if row["notCopied"] is None:
        return "unknown (never seen at the source)"
    if row["produceRate"] is None:
        return f"{row['notCopied']} (produce rate unknown)"
    return f"between {row['notCopied']} and about {row['notCopiedUpperEstimate']} ({row['produceRate']:g} records/s)"


def _or_none(value: object) -> str:
    return "none" if value is None else str(value)


def _when(at: float | None) -> str:
    """A time the leader wrote (seconds since the epoch), in UTC."""
    if at is None:
        return "never"
    return "at " + datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def confirmed(route: str, plan: Mapping[str, Any], stdin: TextIO, out: TextIO) -> bool:
    """Prints the dry run's summary and the prompt on ``out``; whether the answer read is the route's name."""
    for line in summary(plan):
        print(line, file=out)
    print(PROMPT, end="", file=out, flush=True)
    return stdin.readline().strip() == route


def _run(args: argparse.Namespace, command: str) -> int:
    from ferry.common.zk import layout as zk_layout
    from ferry.common.zk.state import StateReader
    from ferry.controller.failover.workflow import FailoverRun

    require_option(args, "config", "--config", command)
    config = load_config(args.config)
    route = config.route(args.route).name
    if command == "failover":
        refuse_without_terminal(args, sys.stdin)
    zk = zk_layout.make_client(config.zookeeper)
    zk_layout.connect(zk, config.zookeeper)
    layout = zk_layout.ZkLayout(config.zookeeper.root)
    StateReader(zk, layout).check_layout(ferry_version())
    run = FailoverRun(config=config, zk=zk, layout=layout, say=lambda line: print(line, file=sys.stderr, flush=True))
    try:
        if command == "failover":
            if args.dry_run or needs_confirmation(args):
                plan = run.plan(route, args.planned, args.groups, args.topics).to_json()
                if args.dry_run:
                    print(json.dumps(plan, indent=2))
                    return 0
                if not confirmed(route, plan, sys.stdin, sys.stderr):
                    print(f"ferry: route {route}: not confirmed, nothing done", file=sys.stderr)
                    return NOT_CONFIRMED
            result = run.failover(route, args.planned, args.groups, args.topics, args.quiet_s, args.timeout_s).to_json()
            if not args.planned:  # the JSON report on stdout is for scripts; the range, for whoever runs it
                print(f"route {route}: {rpo_line(result['report'])}", file=sys.stderr)
        elif args.restore:
            result = run.restore(route).to_json()
        else:
            result = run.failback(route, args.timeout_s).to_json()
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
