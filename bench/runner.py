"""Runs every workload through every system, measures each run, checks it, and reports.

For each workload the source topic is filled once; then, per system, on a destination where
the topic does not exist yet:

1. *throughput*: the system copies the whole topic. The bench polls the destination's log-end
   offsets every 50 ms; records/s, MB/s and CPU seconds per million records are taken over the
   window from the first poll that saw records to the poll that saw the last one (so a JVM's
   start-up and Ferry's registration are not counted; the total CPU is reported too). A system
   that copies from its start (the native limit, the ceiling) is measured from the first poll that
   saw more than the destination held at the bench's go, and the records before are not counted.
   When that first poll already saw more than a tenth of the records (a tiny run), the window starts
   at the go instead (:func:`copy_window`). The dirty pages of what ran before are written out
   before each system starts. An exactly-once copy is measured the same way, over
   the records it produced to the destination (the log-end offsets count them before their
   transaction commits); it is done when its source offsets reach the end, after its last
   transaction, and the time from its last record produced to then is reported on its own
   (``last_commit_s``), so its figures do not depend on the run's length;
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.bench import idle, limits, procstat, workload
from ferry.bench.errors import BenchError
from ferry.bench.names import CEILING_VARIANTS, KNOWN, SYSTEMS, known_system
from ferry.bench.systems import Ceiling, FerryWorkers, MirrorMaker2, NativeCopy, System
from ferry.bench.workload import EndToEndLatency, Workload
from ferry.devstack.stack import Stack

log = logging.getLogger(__name__)

BASELINES = ("mm2-t1", "mm2-tuned-t1")
POLL_S = 0.05
ARRIVAL_WINDOW_MIN_SHARE = 0.9
"""The arrival window is used when it holds at least this share of the records (else: from go)."""
DEFAULT_WORKLOADS = (
    Workload(value_bytes=100, partitions=1, records=1_000_000),
    Workload(value_bytes=1024, partitions=1, records=1_000_000),
    Workload(value_bytes=10240, partitions=1, records=200_000),
    Workload(value_bytes=100, partitions=8, records=1_000_000),
    Workload(value_bytes=1024, partitions=8, records=1_000_000),
    Workload(value_bytes=10240, partitions=8, records=200_000),
)


@dataclass(frozen=True, kw_only=True)
class BenchRunOptions:
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
    # Each exactly-once Ferry system runs once per interval (its workers' `worker.transaction_interval_s`:
    # how often a transaction commits); empty: once, at the configured interval.
    transaction_intervals: tuple[float, ...] = ()
    # The systems run this many times per workload, round by round (A B A B ...), on the same source topic.
    rounds: int = 1


@dataclass(kw_only=True)
class RunResult:
    workload: str
    value_bytes: int
    system: str
    label: str
    records: int
    processes: int
    round: int = 1
    transaction_interval_s: float | None = None  # the workers' commit (exactly once: transaction) interval, when set
    status: str = "FAILED"
    problems: list[str] = field(default_factory=list)
    window: str | None = None  # "arrival": first to last record seen; "start": from go()
    seconds: float | None = None
    # Exactly once: from the last record produced to the destination to the last transaction visible.
    last_commit_s: float | None = None
    records_per_s: float | None = None
    mb_per_s: float | None = None
    cpu_s_per_million: float | None = None
    cpu_s_total: float | None = None
    peak_rss_mb: float | None = None
    # Bytes of the destination topic's log segments per record: what crossed the wire, compressed or not.
    destination_bytes_per_record: float | None = None
    latency: EndToEndLatency | None = None
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
            "round": self.round,
            "transaction_interval_s": self.transaction_interval_s,
            "status": self.status,
            "problems": self.problems,
            "window": self.window,
            "seconds": self.seconds,
            "last_commit_s": self.last_commit_s,
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


@dataclass(frozen=True)
class PlannedRun:
    """One run of a workload: ``system`` (a known name) at ``transaction_interval_s`` (None: as configured),
    in ``round``."""

    system: str
    transaction_interval_s: float | None
    round: int

    @property
    def name(self) -> str:
        """The run's system as the report names it: ``ferry-eos-1w@0.25s`` at a transaction interval of its own."""
        return self.system if self.transaction_interval_s is None else f"{self.system}@{self.transaction_interval_s:g}s"

    @property
    def slug(self) -> str:
        """A suffix of the run's names of its own (ZooKeeper root, route, consumer group, latency topic)."""
        interval = "" if self.transaction_interval_s is None else f"-{round(self.transaction_interval_s * 1000)}ms"
        return f"{self.system}{interval}" + (f"-r{self.round}" if self.round > 1 else "")


def exactly_once_ferry(name: str) -> bool:
    return name.startswith("ferry-eos-")


def plan_runs(systems: Sequence[str], intervals: Sequence[float] = (), rounds: int = 1) -> list[PlannedRun]:
    """The runs of one workload, in the order they run (pure): round after round, each round every
    system in order, an exactly-once Ferry system once per interval of ``intervals`` (none: once)."""
    plan = []
    for round_ in range(1, rounds + 1):
        for name in systems:
            for interval in intervals if intervals and exactly_once_ferry(name) else (None,):
                plan.append(PlannedRun(name, interval, round_))
    return plan


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
            stack=stack,
            workdir=workdir,
            partitions=partitions,
            slug=slug,
            processes=int(count) if count else None,
            client_config=worker_config,
            compression=compression,
        )
    if name.startswith(CEILING_VARIANTS):
        variant = next(v for v in CEILING_VARIANTS if name.startswith(v))
        count = name[len(variant) + 1 :]
        return Ceiling(
            stack=stack,
            workdir=workdir,
            partitions=partitions,
            slug=slug,
            processes=int(count) if count else None,
            client_config=worker_config,
            variant=variant,
            compression=compression,
        )
    if name.startswith("ferry-"):
        exactly_once = name.startswith("ferry-eos-")
        return FerryWorkers(
            stack=stack,
            workdir=workdir,
            partitions=partitions,
            slug=slug,
            workers=int(name.removeprefix("ferry-eos-" if exactly_once else "ferry-")[:-1]),
            worker_config=worker_config,
            compression=compression,
            exactly_once=exactly_once,
        )
    tuned = name.startswith("mm2-tuned-")
    return MirrorMaker2(
        stack=stack, workdir=workdir, partitions=partitions, slug=slug, tasks=int(name.rsplit("t", 1)[1]), tuned=tuned
    )


def run_bench(
    options: BenchRunOptions, stack: Stack, workdir: Path, echo: Callable[[str], None] = print
) -> dict[str, Any]:
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
            for planned in plan_runs(options.systems, options.transaction_intervals, options.rounds):
                name = planned.system
                slug = f"{run_id}-{planned.slug}"
                if name.startswith("limit-"):
                    echo(f"[{load.name}] {name} ...")
                    result = _broker_limit(name, stack, workdir, load, topic, run_id, dst_admin)
                    result.round = planned.round
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
                worker_config = options.worker_config
                if planned.transaction_interval_s is not None:
                    worker_config = {**worker_config, "transaction_interval_s": planned.transaction_interval_s}
                system = make_system(name, stack, workdir, load.partitions, slug, worker_config, options.compression)
                if planned.transaction_interval_s is not None:
                    system.name = planned.name
                    system.label += f", a transaction every {planned.transaction_interval_s:g} s"
                round_text = f" (round {planned.round} of {options.rounds})" if options.rounds > 1 else ""
                echo(f"[{load.name}] {system.label}{round_text} ...")
                result = run_one(system, load, topic, run_id, options, source, destination, src_admin, dst_admin)
                result.round = planned.round
                result.transaction_interval_s = worker_config.get("transaction_interval_s")
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
            "transaction_intervals": list(options.transaction_intervals),
            "rounds": options.rounds,
            "idle_partitions": options.idle_partitions,
            "idle_seconds": options.idle_seconds,
        },
        "workloads": workloads,
        "runs": [r.to_json() for r in runs],
        "summary": summarize([r.to_json() for r in runs]),
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
    options: BenchRunOptions,
    source: dict[str, Any],
    destination: dict[str, Any],
    src_admin: Any,
    dst_admin: Any,
) -> RunResult:
    latency_topic = f"ferry-bench-lat-{load.value_bytes}-{system.slug}"
    topics = [topic, latency_topic]
    result = RunResult(
        workload=load.name,
        value_bytes=load.value_bytes,
        system=system.name,
        label=system.label,
        records=load.records,
        processes=0,
    )
    workload.delete_topics(dst_admin, topics)  # each system writes to a destination of its own
    workload.create_topic(src_admin, latency_topic, load.partitions)
    try:
        _settle_disk()  # before the start: the native limit and the ceiling copy from their start
        system.start(topics)
        result.processes = len(system.pids())
        result.logs = system.logs()
        pids = system.pids()
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


@dataclass(frozen=True)
class Sample:
    """One poll of a copy: when (monotonic seconds), the records the destination's log-end offsets
    count (exactly once: with the transactions' markers, committed or not), and the CPU seconds of
    the system's processes so far."""

    time: float
    records: int
    cpu_s: float


@dataclass(frozen=True)
class Window:
    """What records/s and CPU per record are measured over: from ``base`` to ``end``; ``kind``
    "arrival" (from the first poll that saw records) or "start" (from the bench's go)."""

    kind: str
    base: Sample
    end: Sample


def copy_window(go: Sample, samples: Sequence[Sample], expected: int, marker_slack: int = 0) -> Window:
    """The window of a copy of ``expected`` records (pure: no I/O, no clock).

    ``go``: when the system was told to copy, with what the destination held then (a system that copies
    from its start may have copied some records before; they are not counted). ``samples``: the polls at which the
    destination's count changed, in order, the last one the final count. The window ends at the first
    poll within ``marker_slack`` of the final count: an exactly-once copy's count also holds the
    transactions' markers, and its last transaction's markers (one per partition it wrote) land when
    it commits, after the last record; so ``marker_slack`` is the partition count there, 0 otherwise.
    It starts at the first poll when that one saw at most a tenth of the records since ``go`` and the
    window has a length; otherwise at ``go`` (a tiny run whose records arrived between two polls).
    """
    if not samples:
        raise ValueError("no poll saw a record")
    final = samples[-1].records
    end = next(sample for sample in samples if sample.records >= final - marker_slack)
    first = samples[0]
    if first.records - go.records <= expected * (1 - ARRIVAL_WINDOW_MIN_SHARE) and end.time > first.time:
        return Window("arrival", first, end)
    return Window("start", go, end)


def _copy(
    system: System,
    load: Workload,
    topics: list[str],
    run_id: str,
    options: BenchRunOptions,
    dst_admin: Any,
    pids: list[int],
    result: RunResult,
) -> None:
    """Lets ``system`` copy ``topics``; fills the throughput and CPU figures of ``result`` from the first.

    Done when the system's own count (:meth:`System.copied`: exactly once, the committed source
    offsets) reaches the workload's; measured over what the destination's log-end offsets count."""
    topic = topics[0]
    expected = load.records
    transactional = bool(getattr(system, "exactly_once", False))
    # What the destination holds at the go: a system that copies from its start (the native limit, the
    # ceiling) may have copied some records already, without the CPU before the go being counted.
    held = system.produced(dst_admin, topic)
    started = time.monotonic()
    go = Sample(started, held, procstat.total_cpu_seconds(pids))
    system.go(topics)
    samples: list[Sample] = []  # the polls at which the destination's log-end offsets moved
    count = 0
    last_change = started
    next_report = started + 10
    while True:
        produced = system.produced(dst_admin, topic)
        copied = system.copied(dst_admin, topic) if transactional else produced
        now = time.monotonic()
        grew = produced != (samples[-1].records if samples else go.records)
        if grew:
            samples.append(Sample(now, produced, procstat.total_cpu_seconds(pids)))
        if grew or copied != count:
            last_change = now
        count = copied
        if count >= expected:
            break
        problem = system.failure()
        if problem:
            result.problems.append(problem)
            return
        limit = options.start_timeout_s if count == 0 and produced == 0 else options.stall_timeout_s
        if now - last_change > limit:
            result.problems.append(
                f"stalled: {count:,} of {expected:,} records at the destination, none for {limit:.0f}s"
            )
            return
        if now >= next_report:
            log.info("%s: %d of %d records copied", system.name, count, expected)
            next_report = now + 10
        time.sleep(POLL_S)
    done = now
    if count > expected:
        result.problems.append(f"{count:,} records at the destination, {expected:,} at the source (duplicates)")
    if not samples or samples[-1].records < expected:  # a final transaction between two polls: one more look
        produced = system.produced(dst_admin, topic)
        samples.append(Sample(time.monotonic(), produced, procstat.total_cpu_seconds(pids)))
    window = copy_window(go, samples, expected, marker_slack=load.partitions if transactional else 0)
    result.window = window.kind
    records = expected - min(window.base.records, expected)
    seconds = window.end.time - window.base.time
    if records == 0:  # copy_window's window always has a length
        result.problems.append(
            "every record was copied before the bench's go: nothing to measure (give it more records)"
        )
        return
    result.seconds = round(seconds, 3)
    result.records_per_s = round(records / seconds, 1)
    result.mb_per_s = round(records * load.record_bytes(run_id) / seconds / 1e6, 2)
    result.cpu_s_per_million = round((window.end.cpu_s - window.base.cpu_s) / records * 1e6, 2)
    if transactional:
        result.last_commit_s = round(max(0.0, done - window.end.time), 3)


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
    result = RunResult(
        workload=load.name, value_bytes=load.value_bytes, system=name, label=label, records=load.records, processes=1
    )
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


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload and system, the medians of its OK runs over the rounds (pure), and for Ferry's
    exactly-once runs the ratios of those medians to Ferry's at-least-once runs with as many workers
    (``ferry-eos-1w@0.25s`` to ``ferry-1w``): records/s and CPU per record. Systems in the order they
    first ran; ``n``: the OK runs, ``records_per_s_all``: each of them, in round order."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        if run["status"] == "OK" and run.get("records_per_s") is not None:
            groups.setdefault((run["workload"], run["system"]), []).append(run)
    summary: list[dict[str, Any]] = []
    for (load, system), members in groups.items():
        latencies = [m["latency"] or {} for m in members]
        summary.append(
            {
                "workload": load,
                "system": system,
                "n": len(members),
                "records_per_s": _median([m["records_per_s"] for m in members]),
                "records_per_s_all": [m["records_per_s"] for m in members],
                "cpu_s_per_million": _median([m["cpu_s_per_million"] for m in members]),
                "p50_ms": _median([lat.get("p50_ms") for lat in latencies]),
                "p99_ms": _median([lat.get("p99_ms") for lat in latencies]),
                "last_commit_s": _median([m.get("last_commit_s") for m in members]),
            }
        )
    medians = {(row["workload"], row["system"]): row for row in summary}
    for row in summary:
        system = row["system"]
        if exactly_once_ferry(system):
            reference = medians.get((row["workload"], "ferry-" + system.removeprefix("ferry-eos-").split("@")[0]))
            row["records_per_s_vs_at_least_once"] = _ratio(
                row["records_per_s"], reference["records_per_s"] if reference else None
            )
            row["cpu_per_record_vs_at_least_once"] = _ratio(
                row["cpu_s_per_million"], reference["cpu_s_per_million"] if reference else None
            )
    return summary


def _median(values: Sequence[float | None]) -> float | None:
    present = sorted(v for v in values if v is not None)
    if not present:
        return None
    middle = len(present) // 2
    return present[middle] if len(present) % 2 else round((present[middle - 1] + present[middle]) / 2, 3)
