"""``ferry bench``: the same workload through the broker ceiling, Ferry and MirrorMaker 2, on the local stack.

Plugs into ``ferry`` through the ``ferry.commands`` entry point (``bench = bench.cli:register``);
also runs alone: ``python -m bench.cli --records 20000 --skip-mm2``. Heavy imports wait until
the command really runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from common.errors import FerryError

SYSTEM_NAMES = ("ceiling", "ferry-1w", "ferry-2w", "mm2-t1", "mm2-t2")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of value sizes in bytes") from None
    if not sizes or any(size < 1 for size in sizes):
        raise argparse.ArgumentTypeError("value sizes must be positive byte counts, e.g. 100,1024")
    return sizes


def _systems(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in SYSTEM_NAMES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown systems {unknown}; choose from {', '.join(SYSTEM_NAMES)}")
    return names


def _worker_config(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--worker-config is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('--worker-config must be a JSON object, e.g. {"consume_batch": 5000}')
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--worker-config", type=_worker_config, default={}, metavar="JSON",
                        help='merged into the Ferry workers\' worker: config, e.g. \'{"producer": {"linger.ms": 20}}\'')
    parser.add_argument("--records", type=int, default=1_000_000, help="records per workload (default 1,000,000)")
    parser.add_argument("--workloads", type=_sizes, default=(100, 1024), metavar="SIZES",
                        help="value sizes in bytes, comma-separated (default 100,1024)")
    parser.add_argument("--partitions", type=int, default=8, help="partitions of every topic (default 8)")
    parser.add_argument("--skip-mm2", action="store_true", help="leave MirrorMaker 2 out")
    parser.add_argument("--systems", type=_systems, default=SYSTEM_NAMES, metavar="NAMES",
                        help=f"which systems to run, comma-separated (default all: {','.join(SYSTEM_NAMES)})")
    parser.add_argument("--latency-rate", type=int, default=5000, help="records/s of the latency run (default 5000)")
    parser.add_argument("--latency-seconds", type=float, default=10.0, help="length of the latency run; 0: none (default 10)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--workdir", metavar="DIR", help="where configs and logs go (default: a new temporary folder)")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the benchmark's topics")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="benchmark Ferry against MirrorMaker 2 and the broker ceiling")
    add_arguments(parser)
    parser.set_defaults(func=run)
    # `ferry bench controller ...`: the controller at scale (bench/controller.py); `ferry bench [options]` as before.
    from bench import controller

    controller.register(parser.add_subparsers(dest="bench_command", metavar="controller"))


def run(args: argparse.Namespace) -> int:
    """Runs the benchmark; exit status 1 when any run FAILED its check."""
    import tempfile

    from bench.report import render, write_json
    from bench.runner import Options, run_bench
    from common import devstack

    if args.records < 1 or args.partitions < 1:
        raise FerryError("--records and --partitions must be at least 1")
    systems = tuple(s for s in args.systems if not (args.skip_mm2 and s.startswith("mm2-")))
    if not systems:
        raise FerryError("no system left to run")
    options = Options(
        records=args.records, value_sizes=args.workloads, partitions=args.partitions, systems=systems,
        latency_rate=args.latency_rate, latency_seconds=args.latency_seconds, keep_topics=args.keep_topics,
        worker_config=args.worker_config,
    )
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = devstack.stack_from_env()
    devstack.up(stack)
    report = run_bench(options, stack, workdir)
    report["command"] = " ".join(["ferry", "bench", *sys.argv[1:]]) if sys.argv[0].endswith("ferry") else " ".join(sys.argv)
    render(report)
    if args.json:
        write_json(report, args.json)
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.cli ARGS`` is ``ferry bench ARGS``."""
    from common.cli import main as ferry_main

    return ferry_main(["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
