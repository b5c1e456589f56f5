"""``ferry validate`` and ``ferry audit``: the Spark jobs' command lines.

The ``ferry`` CLI (``ferry/cli.py``) imports every command's ``register`` to build its parser, so this module
imports nothing heavy at the top: pyspark and matplotlib load only when one of these commands runs. They are
extras (``kafka-ferry[spark]``, ``[chart]`` for ``--chart``; :mod:`common.extras`): without them the command
says in one line what to install, exit status 2.
Exit status: 0 when everything checked is fine, 1 when a problem was found, 2 on an error
(bad arguments, unreachable ZooKeeper or cluster; :class:`common.errors.FerryError`).
"""

from __future__ import annotations

import argparse
import json
import sys

from ferry.common import extras
from ferry.common.config import load_config
from ferry.common.tables import print_table


def _add_master(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--master", help="Spark master URL (default $FERRY_SPARK_MASTER or local[*])")


# --- validate ------------------------------------------------------------------------------------


def register_validate(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check on Spark that ideal state, external view, live workers and both clusters agree",
        description="Exit 0 when consistent, 1 when a problem was found, 2 on an error.",
    )
    parser.add_argument("--config", required=True, help="Ferry's YAML config")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    _add_master(parser)
    parser.add_argument(
        "--store", action="store_true", help="also write the result (with checkedAt) to <root>/validation"
    )
    parser.set_defaults(func=_run_validate)


def _run_validate(args: argparse.Namespace) -> int:
    extras.require("spark", "validate")
    from ferry.pipeline.validate import run_validation, store_result

    config = load_config(args.config)
    result = run_validation(config, master=args.master or config.spark.master)
    if args.store:
        result = store_result(config, result)
    if args.json:
        json.dump(result, sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        counts = result["counts"]
        if result["problems"]:
            print_table(result["problems"], ["route", "topic", "partition", "problem", "detail"])
            print()
        verdict = "consistent" if result["ok"] else f"{counts['problems']} problem(s)"
        print(
            f"{verdict}: {counts['topics']} topic(s), {counts['partitions']} partition(s), "
            f"{counts['online']} ONLINE on their ideal worker, {counts['liveWorkers']} live worker(s)"
        )
    return 0 if result["ok"] else 1


# --- audit ---------------------------------------------------------------------------------------


def register_audit(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="compare a topic's records on source and destination on Spark: missing, duplicated, extra",
        description="Exit 0 when every source record is on the destination once and nothing else is, "
        "1 otherwise, 2 on an error.",
    )
    parser.add_argument("--config", required=True, help="Ferry's YAML config")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--route", help="<source>.<destination>; needed when several routes are configured")
    parser.add_argument(
        "--from",
        dest="start",
        metavar="TIME",
        help="first record timestamp included: ISO-8601 (UTC when no zone) or epoch ms",
    )
    parser.add_argument("--to", dest="end", metavar="TIME", help="record timestamps before this one (excluded)")
    parser.add_argument("--bucket", type=int, default=60, metavar="SECONDS", help="time bucket width (default 60)")
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")
    parser.add_argument("--chart", metavar="FILE.png", help="write a PNG of source vs destination counts per bucket")
    _add_master(parser)
    parser.set_defaults(func=_run_audit)


def _run_audit(args: argparse.Namespace) -> int:
    extras.require("spark", "audit")
    if args.chart:  # checked before Spark runs, not after
        extras.require("chart", "audit --chart")
    from ferry.pipeline.audit import OTHER_FIELDS, parse_time, run_audit, write_chart

    config = load_config(args.config)
    report = run_audit(
        config,
        args.topic,
        route=args.route,
        start_ms=None if args.start is None else parse_time(args.start),
        end_ms=None if args.end is None else parse_time(args.end),
        bucket_s=args.bucket,
        master=args.master or config.spark.master,
    )
    if args.chart:
        write_chart(report, args.chart)
    if args.json:
        json.dump(report, sys.stdout, indent=1, sort_keys=True)
        print()
    else:
        columns = ["source", "destination", "missing", "duplicated", "extra"]
        print(f"{report['topic']} on {report['route']}, records per partition:")
        print_table(report["partitions"], ["partition", *columns])
        print()
        print(f"per {report['bucketSeconds']} s bucket:")
        print_table(report["buckets"], ["start", *columns])
        print()
        verdict = "OK" if report["ok"] else "NOT OK"
        print(
            f"{verdict}: source {report['source']}, destination {report['destination']}, "
            f"missing {report['missing']}, duplicated {report['duplicated']}, extra {report['extra']}"
        )
        if any(report.get(name) for name in OTHER_FIELDS):  # a loop-prevention route's shared topics
            print(
                f"not this route's (not counted above): {report['sourceSkipped']} source records it skips, "
                f"{report['destinationLocal']} produced on the destination, "
                f"{report['otherRoutes']} copied by other routes"
            )
        if args.chart:
            print(f"chart written to {args.chart}")
    return 0 if report["ok"] else 1
