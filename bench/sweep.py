"""``python -m ferry.bench.sweep``: find the worker's client settings by measurement (a coordinate search).

Fills each workload's source topic once, then compares configurations of one Ferry worker
(``ferry-1w``) in pairs on the same topics: the current best and a candidate, interleaved
(A B A B ...), each run checked for loss and order like ``ferry bench``'s. The search itself is
:func:`bench.search.coordinate_search`; this module only runs it against the local stack.

    python -m ferry.bench.sweep [--workloads 1x1024,8x100,8x1024,8x10240:50000,64x1024] [--records 200000]
                          [--repeats 1] [--start JSON] [--param consumer.fetch.wait.max.ms=5|50 ...]
                          [--compare JSON] [--json FILE] [--markdown FILE] [--workdir DIR]

``--compare JSON`` skips the search and only compares ``--start`` (A) against that worker config
(B) on every workload, e.g. the old defaults against the new ones.
Ratios within one sweep are what count: absolute figures move with the machine's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from ferry.bench.names import parse_workloads
from ferry.bench.search import (
    DEFAULT,
    Pair,
    Param,
    SearchResult,
    Trial,
    coordinate_search,
    judge,
    parse_param,
    trials_table,
)

MIB = 1024 * 1024
# The search's starting point, known to copy well: no backoff when the local queue is full, short fetch waits.
START: dict[str, Any] = {"consumer": {"fetch.queue.backoff.ms": 0, "fetch.wait.max.ms": 10}}
# Every client setting that bounds a busy copy, consumer first (where the waits were), then the producer.
# fetch.wait.max.ms stops at 10: shorter waits make an idle worker spin (BENCHMARKS.md).
GRID: tuple[Param, ...] = (
    Param("consumer", "fetch.queue.backoff.ms", (0, 10, 100, DEFAULT)),
    Param("consumer", "fetch.wait.max.ms", (10, 25, 100, DEFAULT)),
    Param("consumer", "queued.min.messages", (DEFAULT, 1_000_000)),
    Param("consumer", "queued.max.messages.kbytes", (32768, 65536)),
    Param("consumer", "max.partition.fetch.bytes", (4 * MIB, MIB)),
    Param("consumer", "fetch.max.bytes", (64 * MIB, 16 * MIB)),
    Param("consumer", "fetch.min.bytes", (DEFAULT, 65536)),
    Param("producer", "linger.ms", (5, 1, 20)),
    Param("producer", "batch.size", (DEFAULT, 262_144)),
    Param("producer", "batch.num.messages", (DEFAULT, 100_000)),
)
DEFAULT_WORKLOADS = "1x1024,8x100,8x1024,8x10240:50000,64x1024"


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _param(text: str) -> Param:
    try:
        return parse_param(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ferry.bench.sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=DEFAULT_WORKLOADS, help=f"as ferry bench's (default {DEFAULT_WORKLOADS})")
    p.add_argument(
        "--records", type=int, default=200_000, help="records of a workload that names none (default 200,000)"
    )
    p.add_argument("--partitions", type=int, default=8, help="partitions of a workload that names none (default 8)")
    p.add_argument("--repeats", type=int, default=1, help="A B pairs per workload and candidate (default 1)")
    p.add_argument("--start", type=_json_object, default=START, metavar="JSON", help="worker config to start from")
    p.add_argument(
        "--param",
        type=_param,
        action="append",
        metavar="SECTION.KEY=V1|V2",
        help="search these instead of the built-in grid (repeatable; 'default': librdkafka's)",
    )
    p.add_argument(
        "--compare", type=_json_object, metavar="JSON", help="no search: --start (A) against this config (B)"
    )
    p.add_argument(
        "--threshold", type=float, default=1.05, help="records/s ratio a candidate must reach (default 1.05)"
    )
    p.add_argument("--json", metavar="FILE")
    p.add_argument("--markdown", metavar="FILE")
    p.add_argument("--workdir", metavar="DIR")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        specs = parse_workloads(args.workloads)
    except ValueError as exc:
        print(f"python -m ferry.bench.sweep: {exc}", file=sys.stderr)
        return 2
    if args.repeats < 1 or args.records < 1 or not specs:
        print("python -m ferry.bench.sweep: --repeats, --records and the workloads must be at least 1", file=sys.stderr)
        return 2

    from ferry.bench import runner, workload
    from ferry.bench.systems import FerryWorkers
    from ferry.bench.workload import Workload
    from ferry.common.kafka import clients as kafka_clients
    from ferry.devstack import processes
    from ferry.devstack import stack as devstack

    # SIGTERM ends the sweep through its finally blocks: the worker under test stops, topics go.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    loads = [
        Workload(
            value_bytes=s.value_bytes, partitions=s.partitions or args.partitions, records=s.records or args.records
        )
        for s in specs
    ]
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = devstack.stack_from_env()
    processes.up(stack)
    source = {"bootstrap.servers": stack.bootstrap("src")}
    destination = {"bootstrap.servers": stack.bootstrap("dst")}
    src_admin, dst_admin = workload.admin(source), workload.admin(destination)
    options = runner.BenchRunOptions(latency_seconds=0)
    topics: dict[str, tuple[str, str]] = {}  # workload name -> (topic, run id)
    started = time.monotonic()

    def one_run(load: Workload, config: dict[str, Any]) -> tuple[float, float]:
        topic, run_id = topics[load.name]
        for attempt in (1, 2):  # a failed run is reported and run once more; twice ends the sweep
            slug = f"{run_id}-{uuid.uuid4().hex[:6]}"
            system = FerryWorkers(
                stack=stack, workdir=workdir, partitions=load.partitions, slug=slug, workers=1, worker_config=config
            )
            result = runner.run_one(system, load, topic, run_id, options, source, destination, src_admin, dst_admin)
            if result.ok and result.records_per_s and result.cpu_s_per_million is not None:
                return result.records_per_s, result.cpu_s_per_million
            print(
                f"  {load.name} with {json.dumps(config)} FAILED (attempt {attempt}, logs {result.logs}): "
                f"{result.problems}",
                flush=True,
            )
        raise SystemExit(f"{load.name} with {json.dumps(config)} FAILED twice")

    def measure(a: dict[str, Any], b: dict[str, Any]) -> list[Pair]:
        pairs = []
        for load in loads:
            for _ in range(args.repeats):
                a_rps, a_cpu = one_run(load, a)
                b_rps, b_cpu = one_run(load, b)
                pairs.append(Pair(load.name, a_rps, a_cpu, b_rps, b_cpu))
                print(
                    f"  {load.name}: A {a_rps:,.0f} rec/s {a_cpu:.1f} CPU s/M | B {b_rps:,.0f} rec/s {b_cpu:.1f} "
                    f"CPU s/M | {b_rps / a_rps:.2f}x",
                    flush=True,
                )
        return pairs

    def report(trial: Trial) -> None:
        print(
            f"{trial.param}={trial.value!r}: rec/s {trial.speed:.2f}x, CPU/record {trial.cpu:.2f}x, "
            f"{'taken' if trial.accepted else 'not taken'} ({time.monotonic() - started:.0f}s)",
            flush=True,
        )

    try:
        for load in loads:
            run_id = uuid.uuid4().hex[:8]
            topic = f"ferry-sweep-{load.partitions}x{load.value_bytes}-{run_id}"
            workload.create_topic(src_admin, topic, load.partitions)
            topics[load.name] = (topic, run_id)
            fill_s = workload.fill(source, topic, load, run_id)
            print(f"[{load.name}] {load.records:,} records filled in {fill_s:.1f}s", flush=True)
        if args.compare is not None:
            print(f"A = {json.dumps(args.start)}\nB = {json.dumps(args.compare)}", flush=True)
            trial = judge(Param("config", "B", ()), "B", measure(args.start, args.compare), args.threshold, 1e9)
            report(trial)
            result = SearchResult(start=args.start, best=args.compare if trial.accepted else args.start, trials=[trial])
        else:
            print(f"start = {json.dumps(args.start)}", flush=True)
            result = coordinate_search(
                args.start,
                args.param or GRID,
                measure,
                args.threshold,
                on_trial=report,
                defaults={"consumer": kafka_clients.CONSUMER_DEFAULTS, "producer": kafka_clients.PRODUCER_DEFAULTS},
            )
    finally:
        for topic, _ in topics.values():
            with contextlib.suppress(Exception):
                workload.delete_topics(src_admin, [topic])
    table = trials_table(result)
    print(table)
    print(f"best = {json.dumps(result.best)} ({time.monotonic() - started:.0f}s in total)")
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "start": result.start,
                    "best": result.best,
                    "workloads": [load.name for load in loads],
                    "repeats": args.repeats,
                    "threshold": args.threshold,
                    "seconds": round(time.monotonic() - started),
                    "trials": [
                        {
                            "param": t.param,
                            "value": t.value,
                            "speed": t.speed,
                            "cpu": t.cpu,
                            "accepted": t.accepted,
                            "pairs": [vars(p) for p in t.pairs],
                        }
                        for t in result.trials
                    ],
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
