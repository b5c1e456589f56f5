"""``ferry bench``: the same workload through the broker ceiling, Ferry and MirrorMaker 2, on the local stack.

Registered in ``ferry/cli.py``'s ``COMMANDS``;
also runs alone: ``python -m ferry.bench.cli --records 20000 --skip-mm2``. Heavy imports wait until
the command really runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ferry.bench.names import (
    ALSO_KNOWN,
    COMPRESSIONS,
    KNOWN,
    SYSTEMS,
    VALUE_KINDS,
    WorkloadSpec,
    known_system,
    parse_workloads,
)
from ferry.common.errors import FerryError

DEFAULT_WORKLOADS = "1x100,1x1024,1x10240:200000,8x100,8x1024,8x10240:200000"


def _workloads(text: str) -> tuple[WorkloadSpec, ...]:
    try:
        return parse_workloads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _systems(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if not known_system(n)]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown systems {unknown}; choose from {KNOWN}")
    return names


def _worker_config(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--worker-config is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('--worker-config must be a JSON object, e.g. {"consume_batch": 5000}')
    return value


def _intervals(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or any(not 0 < value < 3600 for value in values):
        raise argparse.ArgumentTypeError(
            f"--transaction-intervals takes comma-separated seconds above 0, e.g. 0.1,0.25,1; not {text!r}"
        )
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--worker-config",
        type=_worker_config,
        default={},
        metavar="JSON",
        help='merged into the Ferry workers\' worker: config, e.g. \'{"producer": {"linger.ms": 20}}\'',
    )
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="records of a workload that names no count (default 1,000,000)"
    )
    parser.add_argument(
        "--workloads",
        type=_workloads,
        default=DEFAULT_WORKLOADS,
        metavar="LIST",
        help="comma-separated SIZE, PARTITIONSxSIZE or PARTITIONSxSIZE:RECORDS (value bytes); "
        f"'none': only --idle-partitions (default {DEFAULT_WORKLOADS})",
    )
    parser.add_argument(
        "--partitions", type=int, default=8, help="partitions of a workload that names none (default 8)"
    )
    parser.add_argument(
        "--values",
        choices=VALUE_KINDS,
        default="same",
        help="the records' values: same (one random value for all, the default), random (fresh random "
        "bytes each: incompressible), text (a different slice of JSON events each: compressible)",
    )
    parser.add_argument(
        "--compression",
        choices=COMPRESSIONS,
        default="none",
        help="producer compression of Ferry's route and of the ceiling (default none, as MirrorMaker 2's)",
    )
    parser.add_argument("--skip-mm2", action="store_true", help="leave MirrorMaker 2 out")
    parser.add_argument(
        "--systems",
        type=_systems,
        default=SYSTEMS,
        metavar="NAMES",
        help=f"which systems to run, comma-separated (default: {','.join(SYSTEMS)}; also {ALSO_KNOWN})",
    )
    parser.add_argument(
        "--transaction-intervals",
        type=_intervals,
        default=(),
        metavar="SECONDS",
        help="comma-separated: each exactly-once Ferry system (ferry-eos-Nw) runs once per interval, its workers' "
        "worker.transaction_interval_s (a transaction commits that often), named e.g. ferry-eos-1w@0.25s "
        "(default: once, at the configured interval)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="N",
        help="run the systems N times per workload, round by round (A B A B), on the same source topic; "
        "the report adds each system's medians (default 1)",
    )
    parser.add_argument("--latency-rate", type=int, default=5000, help="records/s of the latency run (default 5000)")
    parser.add_argument(
        "--latency-seconds", type=float, default=10.0, help="length of the latency run; 0: none (default 10)"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--workdir", metavar="DIR", help="where configs and logs go (default: a new temporary folder)")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete the benchmark's topics")
    parser.add_argument(
        "--idle-partitions",
        type=int,
        default=0,
        metavar="N",
        help="also measure the CPU of one idle worker holding N empty partitions (default 0: no)",
    )
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="length of the idle measurement (default 20)")
    parser.add_argument(
        "--header-cost",
        action="store_true",
        help="only measure the provenance header's CPU and bytes per record, on and off "
        "(no cluster; --records records per case, --json); see bench/header_cost.py",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="benchmark Ferry against MirrorMaker 2 and the broker ceiling")
    add_arguments(parser)
    parser.set_defaults(func=run)
    # `ferry bench controller ...`: the controller at scale (bench/controller.py); `ferry bench soak ...`: the
    # nemesis soak (bench/soak/); `ferry bench [options]`: the throughput comparison.
    from ferry.bench import controller
    from ferry.bench.soak import cli as soak

    commands = parser.add_subparsers(dest="bench_command", metavar="controller|soak")
    controller.register(commands)
    soak.register(commands)
    failover = subparsers.add_parser(
        "bench-failover",
        help="consumer-group failover: records re-read or skipped with Ferry's and MirrorMaker 2's translation",
    )
    failover.add_argument("--records", type=int, default=20_000, help="records in the partition (default 20000)")
    failover.add_argument(
        "--lags",
        default="0,100,1000,10000",
        help="comma-separated records behind the mirror's head the groups commit at (default 0,100,1000,10000)",
    )
    failover.add_argument("--skip-mm2", action="store_true", help="only Ferry")
    failover.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    failover.add_argument(
        "--workdir", metavar="DIR", help="where configs and logs go (default: a new temporary folder)"
    )
    failover.set_defaults(func=run_failover)


def run_failover(args: argparse.Namespace) -> int:
    import tempfile

    from ferry.bench.failover import render
    from ferry.bench.failover import run_failover as run_it
    from ferry.devstack import processes
    from ferry.devstack import stack as devstack

    try:
        lags = [int(x) for x in args.lags.split(",") if x.strip()]
    except ValueError:
        raise FerryError(f"--lags must be comma-separated integers, not {args.lags!r}") from None
    if args.records < 1 or not lags or any(lag < 0 or lag > args.records for lag in lags):
        raise FerryError("--records must be at least 1 and every lag between 0 and --records")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-bench-failover-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = devstack.stack_from_env()
    processes.up(stack)
    report = run_it(stack, workdir, args.records, lags, skip_mm2=args.skip_mm2)
    render(report)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    """Runs the benchmark; exit status 1 when any run FAILED its check."""
    import tempfile

    from ferry.bench.report import render, write_json
    from ferry.bench.runner import BenchRunOptions, run_bench
    from ferry.bench.workload import Workload
    from ferry.devstack import processes
    from ferry.devstack import stack as devstack

    if args.records < 1 or args.partitions < 1:
        raise FerryError("--records and --partitions must be at least 1")
    if args.header_cost:
        from ferry.bench import header_cost

        return header_cost.run(args.records, args.json)
    if args.rounds < 1:
        raise FerryError("--rounds must be at least 1")
    if args.transaction_intervals and not any(s.startswith("ferry-eos-") for s in args.systems):
        raise FerryError("--transaction-intervals needs an exactly-once Ferry system in --systems (ferry-eos-Nw)")
    if args.idle_partitions < 0 or args.idle_seconds <= 0:
        raise FerryError("--idle-partitions must be at least 0 and --idle-seconds more than 0")
    systems = tuple(s for s in args.systems if not (args.skip_mm2 and s.startswith("mm2-")))
    if not systems and args.workloads:
        raise FerryError("no system left to run")
    if not args.workloads and not args.idle_partitions:
        raise FerryError("--workloads none leaves nothing to do without --idle-partitions")
    options = BenchRunOptions(
        workloads=tuple(
            Workload(
                value_bytes=spec.value_bytes,
                partitions=spec.partitions or args.partitions,
                records=spec.records or args.records,
                values=args.values,
            )
            for spec in args.workloads
        ),
        systems=systems,
        compression=args.compression,
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
        keep_topics=args.keep_topics,
        worker_config=args.worker_config,
        idle_partitions=args.idle_partitions,
        idle_seconds=args.idle_seconds,
        transaction_intervals=args.transaction_intervals,
        rounds=args.rounds,
    )
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = devstack.stack_from_env()
    processes.up(stack)
    report = run_bench(options, stack, workdir)
    report["command"] = " ".join(["ferry", *sys.argv[1:]]) if sys.argv[0].endswith("ferry") else " ".join(sys.argv)
    render(report)
    if args.json:
        write_json(report, args.json)
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m ferry.bench.cli ARGS`` is ``ferry bench ARGS``."""
    from ferry.common import cli

    return cli.run(cli.root_parser((register,)), ["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
