"""``ferry bench soak --minutes N [--seed S] [--faults LIST] [--json FILE]``: the nemesis soak (see :mod:`.run`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ferry.bench.soak import faults
from ferry.common.errors import FerryError


def _faults(text: str) -> tuple[str, ...]:
    try:
        return faults.parse_faults(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _gap(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split("-", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--gap is MIN-MAX in seconds (e.g. 30-60), not {text!r}") from None
    if low < 0 or high < low:
        raise argparse.ArgumentTypeError(f"--gap {text!r}: 0 <= MIN <= MAX")
    return low, high


def _route_option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--route-option is key=value, not {text!r}")
    try:
        parsed: Any = json.loads(value)  # numbers, true/false, lists; anything else is a string
    except json.JSONDecodeError:
        parsed = value
    return key.strip(), parsed


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "soak",
        help=f"Ferry under faults ({', '.join(faults.NAMES)}) on a stack of its own; "
        "then lost, duplicated and disordered records",
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="how long faults are applied (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the schedule and the faults' targets (default 1)")
    parser.add_argument(
        "--faults",
        type=_faults,
        default=faults.DEFAULT,
        metavar="LIST",
        help=f"comma-separated faults to draw from (default: {','.join(faults.DEFAULT)}); {faults.help_text()}",
    )
    parser.add_argument(
        "--gap",
        type=_gap,
        default=(30.0, 60.0),
        metavar="MIN-MAX",
        help="seconds between one fault's end and the next's start, drawn in MIN-MAX (default 30-60)",
    )
    parser.add_argument(
        "--zookeeper-down-s",
        type=float,
        default=120.0,
        help="how long the zookeeper fault keeps ZooKeeper stopped (default 120)",
    )
    parser.add_argument("--rate", type=int, default=2000, help="records/s VerifiableProducer writes (default 2000)")
    parser.add_argument(
        "--dst-brokers",
        type=int,
        default=3,
        choices=(1, 2, 3),
        help="brokers of the destination cluster; the topic gets as many replicas (default 3)",
    )
    parser.add_argument(
        "--base-port",
        type=int,
        default=31600,
        help="the soak's ZooKeeper port; its brokers' ports follow it (default 31600; another for two soaks at once)",
    )
    parser.add_argument(
        "--route-option",
        type=_route_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="added to the route's config (a JSON value or a string), e.g. delivery_guarantee=exactly_once",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument(
        "--workdir", metavar="DIR", help="where the config and the logs go (default: a new temporary folder)"
    )
    parser.add_argument("--keep-stack", action="store_true", help="leave the soak's ZooKeeper and clusters running")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit status 0 when nothing was lost or duplicated (read_committed), 1 otherwise."""
    import tempfile
    from pathlib import Path

    from ferry.bench.soak.run import SoakOptions, render, run_soak, write_json

    if args.minutes <= 0 or args.rate < 1 or args.zookeeper_down_s < 0:
        raise FerryError("--minutes and --rate must be more than 0, --zookeeper-down-s at least 0")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-soak-"))
    options = SoakOptions(
        minutes=args.minutes,
        seed=args.seed,
        faults=args.faults,
        workdir=workdir,
        gap_s=args.gap,
        zookeeper_down_s=args.zookeeper_down_s,
        rate=args.rate,
        dst_brokers=args.dst_brokers,
        base_port=args.base_port,
        route_options=dict(args.route_option),
        keep_stack=args.keep_stack,
    )
    report = run_soak(options)
    render(report)
    if args.json:
        write_json(report, args.json)
    return 0 if report["ok"] else 1
