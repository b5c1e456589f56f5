"""Runs every workload through every system, measures each run, checks it, and reports.

For each workload the source topic is filled once; then, per system, on a destination where
the topic does not exist yet:

1. *throughput*: the system copies the whole topic. The bench polls the destination's log-end
   offsets every 50 ms; records/s, MB/s and CPU seconds per million records are taken over the
   window from the first poll that saw records to the poll that saw the last one (so a JVM's
   start-up and Ferry's registration are not counted; the total CPU is reported too). When that
   first poll already saw more than a tenth of the records (a tiny run, or an exactly-once run
   whose first transaction held most of them), the window starts at the bench's go instead;
2. *latency*: with the system still running and idle, the bench produces at a steady rate to
   a second, empty topic the system also copies, and consumes it at the destination
   (:func:`bench.workload.measure_latency`);
3. peak resident memory (``VmHWM``) of the system's processes, then the system is stopped;
4. *check*: every partition's count must equal the source's and sampled windows must hold
   exactly the records expected at their offsets. A lossy or reordered run is FAILED.

The pseudo-systems ``limit-produce`` and ``limit-consume`` copy nothing: they measure the
brokers' own limits with Kafka's perf tools (:mod:`bench.limits`). ``--idle-partitions`` adds
the idle cost of one worker holding that many partitions with no traffic (:mod:`bench.idle`).
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import platform
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.bench import idle, limits, procstat, workload
from ferry.bench.errors import BenchError
from ferry.bench.names import CEILING_VARIANTS, KNOWN, SYSTEMS, known_system
from ferry.bench.systems import Ceiling, FerryWorkers, MirrorMaker2, NativeCopy, System
from ferry.bench.workload import Latency, Workload
from ferry.devstack.stack import Stack

log = logging.getLogger(__name__)

BASELINES = ("mm2-t1", "mm2-tuned-t1")
POLL_S = 0.05
ARRIVAL_WINDOW_MIN_SHARE = 0.9
"""The arrival window is used when it holds at least this share of the records (else: from go)."""
DEFAULT_WORKLOADS = (
    Workload(100, 1, 1_000_000),
    Workload(1024, 1, 1_000_000),
    Workload(10240, 1, 200_000),
    Workload(100, 8, 1_000_000),
    Workload(1024, 8, 1_000_000),
    Workload(10240, 8, 200_000),
)


@dataclass(frozen=True)
class Options:
    workloads: tuple[Workload, ...] = DEFAULT_WORKLOADS
    systems: tuple[str, ...] = SYSTEMS
    latency_rate: int = 5000
    latency_seconds: float = 10.0
    # Waiting for the first record (a JVM starting) and for progress once records flow.
    start_timeout_s: float = 180.0
    stall_timeout_s: float = 60.0
    keep_topics: bool = False
    # Merged into the Ferry workers' `worker:` config section (and its consumer/producer sections
    # into the ceiling's clients), to tune by measurement.
    worker_config: dict[str, Any] = field(default_factory=dict)
    idle_partitions: int = 0  # 0: no idle measurement
    idle_seconds: float = 20.0
    # The producer compression of Ferry's route and of the ceiling's copy processes. The bench's
    # default is none, as MirrorMaker 2's, so that the systems compare like with like.
    compression: str = "none"


@dataclass
class RunResult:
    workload: str
    value_bytes: int
    system: str
    label: str
    records: int
    processes: int
    status: str = "FAILED"
    problems: list[str] = field(default_factory=list)
    window: str | None = None  # "arrival": first to last record seen; "start": from go()
    seconds: float | None = None
    records_per_s: float | None = None
    mb_per_s: float | None = None
    cpu_s_per_million: float | None = None
    cpu_s_total: float | None = None
    peak_rss_mb: float | None = None
    # Bytes of the destination topic's log segments per record: what crossed the wire, compressed or not.
    destination_bytes_per_record: float | None = None
    latency: Latency | None = None
    logs: list[str] = field(default_factory=list)
    vs_baseline: dict[str, float | None] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "OK"

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "value_bytes": self.value_bytes,
            "system": self.system,
            "label": self.label,
            "records": self.records,
            "processes": self.processes,
            "status": self.status,
            "problems": self.problems,
            "window": self.window,
            "seconds": self.seconds,
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "cpu_s_per_million": self.cpu_s_per_million,
            "cpu_s_total": self.cpu_s_total,
            "peak_rss_mb": self.peak_rss_mb,
            "destination_bytes_per_record": self.destination_bytes_per_record,
            "latency": self.latency.to_json() if self.latency else None,
            "ratios": self.vs_baseline,
            "logs": self.logs,
        }


def make_system(
    name: str,
    stack: Stack,
    workdir: Path,
    partitions: int,
    slug: str,
    worker_config: dict[str, Any] | None = None,
    compression: str = "none",
) -> System:
    if not known_system(name) or name.startswith("limit-"):
        raise BenchError(f"unknown system {name!r} (known: {KNOWN})")
    if name.startswith("native"):
        count = name[len("native") + 1 :]
        return NativeCopy(
            stack,
            workdir,
            partitions,
            slug,
            processes=int(count) if count else None,
            client_config=worker_config,
            compression=compression,
        )
    if name.startswith(CEILING_VARIANTS):
        variant = next(v for v in CEILING_VARIANTS if name.startswith(v))
        count = name[len(variant) + 1 :]
        return Ceiling(
            stack,
            workdir,
            partitions,
            slug,
            processes=int(count) if count else None,
            client_config=worker_config,
            variant=variant,
            compression=compression,
        )
    if name.startswith("ferry-"):
        exactly_once = name.startswith("ferry-eos-")
        return FerryWorkers(
            stack,
            workdir,
            partitions,
            slug,
            workers=int(name.removeprefix("ferry-eos-" if exactly_once else "ferry-")[:-1]),
            worker_config=worker_config,
            compression=compression,
            exactly_once=exactly_once,
        )
    tuned = name.startswith("mm2-tuned-")
    return MirrorMaker2(stack, workdir, partitions, slug, tasks=int(name.rsplit("t", 1)[1]), tuned=tuned)


def run_bench(options: Options, stack: Stack, workdir: Path, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Runs the whole benchmark; returns the report (what ``--json`` writes)."""
    unknown = [name for name in options.systems if not known_system(name)]
    if unknown:  # before any work
        raise BenchError(f"unknown systems {unknown} (known: {KNOWN})")
    started = datetime.datetime.now(datetime.timezone.utc)
    clock_started = time.monotonic()
    source = {"bootstrap.servers": stack.bootstrap("src")}
    destination = {"bootstrap.servers": stack.bootstrap("dst")}
    src_admin = workload.admin(source)
    dst_admin = workload.admin(destination)
    runs: list[RunResult] = []
    workloads: list[dict[str, Any]] = []
    for load in options.workloads:
        run_id = uuid.uuid4().hex[:8]
        value_bytes = load.value_bytes
        topic = f"ferry-bench-{load.partitions}x{value_bytes}-{run_id}"
        workload.create_topic(src_admin, topic, load.partitions)
        try:
            echo(f"[{load.name}] producing {load.records:,} records to {topic} ...")
            fill_s = workload.fill(source, topic, load, run_id)
            echo(f"[{load.name}] source filled in {fill_s:.1f}s ({load.records / fill_s:,.0f} records/s)")
            workloads.append(
                {
                    "name": load.name,
                    "value_bytes": value_bytes,
                    "records": load.records,
                    "partitions": load.partitions,
                    "record_bytes": load.record_bytes(run_id),
                    "headers": 2,
                    "keys": True,
                    "source_topic": topic,
                    "source_fill_s": round(fill_s, 2),
                    "source_fill_records_per_s": round(load.records / fill_s),
                }
            )
            for name in options.systems:
                slug = f"{run_id}-{name}"
                if name.startswith("limit-"):
                    echo(f"[{load.name}] {name} ...")
                    result = _broker_limit(name, stack, workdir, load, topic, run_id, dst_admin)
                    runs.append(result)
                    echo(
                        f"[{load.name}] {name}: {result.status} "
                        + (
                            f"{result.records_per_s:,.0f} records/s"
                            if result.records_per_s
                            else "; ".join(result.problems)
                        )
                    )
                    continue
                system = make_system(
                    name, stack, workdir, load.partitions, slug, options.worker_config, options.compression
                )
                echo(f"[{load.name}] {system.label} ...")
                result = run_one(system, load, topic, run_id, options, source, destination, src_admin, dst_admin)
                runs.append(result)
                summary = (
                    f"{result.records_per_s:,.0f} records/s, {result.cpu_s_per_million:.1f} CPU s/M records, "
                    f"{result.destination_bytes_per_record} destination bytes/record"
                    if result.ok and result.records_per_s and result.cpu_s_per_million is not None
                    else ""
                )
                echo(f"[{load.name}] {system.label}: {result.status} {summary}")
                for problem in result.problems:
                    echo(f"    {problem}")
        finally:
            if not options.keep_topics:
                with contextlib.suppress(BenchError):
                    workload.delete_topics(src_admin, [topic])
                with contextlib.suppress(BenchError):
                    workload.delete_topics(dst_admin, [topic])
    _ratios(runs)
    idle_result = None
    if options.idle_partitions > 0:
        echo(
            f"[idle] one Ferry worker holding {options.idle_partitions} partitions with no traffic, "
            f"{options.idle_seconds:g}s ..."
        )
        idle_result = idle.measure_idle(
            stack, workdir, options.idle_partitions, options.idle_seconds, uuid.uuid4().hex[:8], options.worker_config
        ).to_json()
        echo(
            f"[idle] worker {idle_result['worker_core_pct']:.2f} % of a core, source broker "
            f"{idle_result['source_broker_core_pct']} % of a core"
        )
    return {
        "started_at": started.isoformat(timespec="seconds"),
        "machine": {**procstat.machine(), "python": platform.python_version(), "platform": platform.platform()},
        "options": {
            "workloads": [load.name for load in options.workloads],
            "compression": options.compression,
            "systems": list(options.systems),
            "latency_rate": options.latency_rate,
            "latency_seconds": options.latency_seconds,
            "worker_config": options.worker_config,
            "idle_partitions": options.idle_partitions,
            "idle_seconds": options.idle_seconds,
        },
        "workloads": workloads,
        "runs": [r.to_json() for r in runs],
        "idle": idle_result,
        "ok": all(r.ok for r in runs),
        "duration_s": round(time.monotonic() - clock_started, 1),
        "workdir": str(workdir),
    }


def run_one(
    system: System,
    load: Workload,
    topic: str,
    run_id: str,
    options: Options,
    source: dict[str, Any],
    destination: dict[str, Any],
    src_admin: Any,
    dst_admin: Any,
) -> RunResult:
    latency_topic = f"ferry-bench-lat-{load.value_bytes}-{system.slug}"
    topics = [topic, latency_topic]
    result = RunResult(load.name, load.value_bytes, system.name, system.label, load.records, processes=0)
    workload.delete_topics(dst_admin, topics)  # each system writes to a destination of its own
    workload.create_topic(src_admin, latency_topic, load.partitions)
    try:
        system.start(topics)
        result.processes = len(system.pids())
        result.logs = system.logs()
        pids = system.pids()
        _settle_disk()
        _copy(system, load, topics, run_id, options, dst_admin, pids, result)
        if not result.problems:
            stored = workload.log_bytes(system.stack.dst.home / "data", topic)
            result.destination_bytes_per_record = round(stored / load.records, 1)
        if not result.problems and options.latency_seconds > 0:
            result.latency = workload.measure_latency(
                source, destination, latency_topic, load, options.latency_rate, options.latency_seconds, run_id
            )
            if result.latency.received != result.latency.expected:
                result.problems.append(
                    f"latency run: {result.latency.received} of {result.latency.expected} records arrived"
                )
        result.peak_rss_mb = round(procstat.total_peak_rss_bytes(pids) / 1e6, 1)
        result.cpu_s_total = round(procstat.total_cpu_seconds(pids), 2)
        system.stop()
        if not result.problems:
            transactional = bool(getattr(system, "exactly_once", False))
            result.problems.extend(workload.verify(destination, topic, load, run_id, transactional=transactional))
        if not result.problems:
            result.status = "OK"
    except BenchError as exc:
        result.problems.append(str(exc))
    finally:
        system.stop()
        with contextlib.suppress(Exception):
            system.cleanup()
        if not options.keep_topics:
            with contextlib.suppress(BenchError):
                workload.delete_topics(dst_admin, topics)
            with contextlib.suppress(BenchError):
                workload.delete_topics(src_admin, [latency_topic])
    return result


def _settle_disk() -> None:
    """Writes every dirty page out before a run is timed.

    The source fill and the previous system's copy leave up to gigabytes of dirty pages that the
    kernel writes back later (after 30 s, or past its background ratio): without this, that
    write-back landed on whichever run came next, and one workload's first system ran at half
    speed (BENCHMARKS.md, 2026-11-23: 8x100 B one worker at 127,047 records/s in a full table,
    215,264 alone).
    """
    started = time.monotonic()
    os.sync()
    log.debug("sync before the run: %.1fs", time.monotonic() - started)


def _copy(
    system: System,
    load: Workload,
    topics: list[str],
    run_id: str,
    options: Options,
    dst_admin: Any,
    pids: list[int],
    result: RunResult,
) -> None:
    """Lets ``system`` copy ``topics``; fills the throughput and CPU figures of ``result`` from the first."""
    topic = topics[0]
    expected = load.records
    started = time.monotonic()
    cpu_started = procstat.total_cpu_seconds(pids)
    system.go(topics)
    first: tuple[float, int, float] | None = None  # (time, records, CPU seconds) at the first poll with records
    last = (started, 0, cpu_started)
    last_change = started
    next_report = started + 10
    while True:
        count = system.copied(dst_admin, topic)
        now = time.monotonic()
        if count != last[1]:
            last = (now, count, procstat.total_cpu_seconds(pids))
            last_change = now
            if first is None:
                first = last
        if count >= expected:
            break
        problem = system.failure()
        if problem:
            result.problems.append(problem)
            return
        limit = options.start_timeout_s if count == 0 else options.stall_timeout_s
        if now - last_change > limit:
            result.problems.append(
                f"stalled: {count:,} of {expected:,} records at the destination, none for {limit:.0f}s"
            )
            return
        if now >= next_report:
            log.info("%s: %d of %d records copied", system.name, count, expected)
            next_report = now + 10
        time.sleep(POLL_S)
    assert first is not None
    if count > expected:
        result.problems.append(f"{count:,} records at the destination, {expected:,} at the source (duplicates)")
    end_time, _, end_cpu = last
    if first[1] <= expected * (1 - ARRIVAL_WINDOW_MIN_SHARE) and end_time > first[0]:
        result.window = "arrival"
        base_time, base_count, base_cpu = first
    else:  # most arrived before the first poll saw any (a tiny run, one transaction): measure from go()
        result.window = "start"
        base_time, base_count, base_cpu = started, 0, cpu_started
    records = expected - base_count
    seconds = end_time - base_time
    result.seconds = round(seconds, 3)
    result.records_per_s = round(records / seconds, 1)
    result.mb_per_s = round(records * load.record_bytes(run_id) / seconds / 1e6, 2)
    result.cpu_s_per_million = round((end_cpu - base_cpu) / records * 1e6, 2)


def _broker_limit(
    name: str, stack: Stack, workdir: Path, load: Workload, topic: str, run_id: str, dst_admin: Any
) -> RunResult:
    """``limit-produce`` (into a fresh destination topic) or ``limit-consume`` (the workload's source topic)."""
    _settle_disk()
    label = (
        "broker limit: produce into dst (ProducerPerformance)"
        if name == "limit-produce"
        else "broker limit: consume from src (ConsumerPerformance)"
    )
    result = RunResult(load.name, load.value_bytes, name, label, load.records, processes=1)
    slug = f"{run_id}-{name}"
    log_path = workdir / f"{slug}.log"
    result.logs = [str(log_path)]
    try:
        if name == "limit-produce":
            limit_topic = f"ferry-bench-limit-{slug}"
            workload.create_topic(dst_admin, limit_topic, load.partitions)
            try:
                rate = limits.produce_rate(
                    stack.bootstrap("dst"), limit_topic, load.records, load.value_bytes, log_path
                )
            finally:
                with contextlib.suppress(BenchError):
                    workload.delete_topics(dst_admin, [limit_topic])
        else:
            # The source records carry a key and two headers: count them as the copies do.
            record_bytes = load.record_bytes(run_id)
            rate = limits.consume_rate(stack.bootstrap("src"), topic, load.records, record_bytes, workdir, log_path)
        result.records_per_s = round(rate.records_per_s, 1)
        result.mb_per_s = rate.mb_per_s
        result.status = "OK"
    except BenchError as exc:
        result.problems.append(str(exc))
    return result


def _ratios(runs: list[RunResult]) -> None:
    """Adds to each copy run its ratios to MirrorMaker 2 (default and tuned, tasks.max=1) and to the ceiling.

    The ceiling is the fastest ``ceiling*`` run of the same workload (one per CPU, or ``ceiling-N``).
    """
    by_key = {(r.workload, r.system): r for r in runs if r.ok}
    ceilings: dict[str, RunResult] = {}
    for run in runs:
        if (
            run.ok
            and run.system.startswith("ceiling")
            and run.records_per_s
            and (run.workload not in ceilings or run.records_per_s > (ceilings[run.workload].records_per_s or 0))
        ):
            ceilings[run.workload] = run
    for run in runs:
        if not run.ok or run.system.startswith("limit-"):
            continue
        ratios: dict[str, float | None] = {}
        for name in BASELINES:
            baseline = by_key.get((run.workload, name))
            suffix = name.replace("-", "_")
            ratios[f"records_per_s_vs_{suffix}"] = _ratio(
                run.records_per_s, baseline.records_per_s if baseline else None
            )
            ratios[f"records_per_cpu_s_vs_{suffix}"] = _ratio(
                baseline.cpu_s_per_million if baseline else None, run.cpu_s_per_million
            )
        ceiling = ceilings.get(run.workload)
        ratios["records_per_s_vs_ceiling"] = _ratio(run.records_per_s, ceiling.records_per_s if ceiling else None)
        ratios["cpu_per_record_vs_ceiling"] = _ratio(
            run.cpu_s_per_million, ceiling.cpu_s_per_million if ceiling else None
        )
        run.vs_baseline = ratios


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 2)
