"""The pure parts of ``ferry bench`` and ``python -m ferry.bench.sweep``: names, workload specs, the
settings search, the perf tools' output, the ratios of a report."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.bench import cli, limits, runner, search
from ferry.bench.errors import BenchError
from ferry.bench.idle import core_pct
from ferry.bench.names import WorkloadSpec, known_system, parse_workloads
from ferry.bench.search import DEFAULT, Pair, Param
from ferry.bench.systems import MM2_TUNED, Ceiling, FerryWorkers, MirrorMaker2, NativeCopy
from ferry.bench.workload import Workload, log_bytes, values
from ferry.devstack.stack import Server, Stack

# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "ceiling",
        "ceiling-3",
        "acked-copy",
        "acked-copy-2",
        "stamped-copy",
        "ferry-1w",
        "ferry-12w",
        "mm2-t1",
        "mm2-tuned-t2",
        "limit-produce",
        "limit-consume",
        "native",
        "native-2",
    ],
)
def test_known_systems(name: str) -> None:
    assert known_system(name)


@pytest.mark.parametrize(
    "name",
    [
        "ceiling-0",
        "native-0",
        "native2",
        "acked-copy-0",
        "acked",
        "ferry-0w",
        "ferry-w",
        "mm2-t0",
        "mm2-tuned",
        "limit",
        "mm2-t1 ",
        "",
    ],
)
def test_unknown_systems(name: str) -> None:
    assert not known_system(name)


def test_workload_specs() -> None:
    assert parse_workloads("100, 1x1024 ,8X10240:200000") == (
        WorkloadSpec(100),
        WorkloadSpec(1024, 1),
        WorkloadSpec(10240, 8, 200_000),
    )
    assert parse_workloads("none") == ()


@pytest.mark.parametrize("text", ["", ",", "x", "8x", "ax100", "0", "0x100", "8x100:0", "8x100:many", "1k"])
def test_bad_workload_specs_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError):
        parse_workloads(text)


@given(st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 10**6), st.integers(1, 10**7)), min_size=1, max_size=6))
def test_workload_specs_round_trip(items: list[tuple[int, int, int]]) -> None:
    text = ",".join(f"{p}x{size}:{records}" for p, size, records in items)
    assert parse_workloads(text) == tuple(WorkloadSpec(size, p, records) for p, size, records in items)


def test_cli_arguments() -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    args = parser.parse_args([])
    assert [(s.partitions, s.value_bytes) for s in args.workloads] == [
        (1, 100),
        (1, 1024),
        (1, 10240),
        (8, 100),
        (8, 1024),
        (8, 10240),
    ]
    assert "mm2-tuned-t1" in args.systems and "limit-produce" in args.systems and args.idle_partitions == 0
    args = parser.parse_args(["--systems", "ceiling-3,ferry-1w", "--workloads", "none", "--idle-partitions", "200"])
    assert args.systems == ("ceiling-3", "ferry-1w") and args.workloads == () and args.idle_partitions == 200
    with pytest.raises(SystemExit):
        parser.parse_args(["--systems", "ferry"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--workloads", "8x"])
    assert args.transaction_intervals == () and args.rounds == 1
    args = parser.parse_args(["--transaction-intervals", "0.1, 0.25,1", "--rounds", "3"])
    assert args.transaction_intervals == (0.1, 0.25, 1.0) and args.rounds == 3


@pytest.mark.parametrize("text", ["", "fast", "0", "-1", "0.1,,x"])
def test_bad_transaction_intervals_are_refused(text: str) -> None:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--transaction-intervals", text])


# -- the copy window, the runs of a workload, the medians ---------------------------------------

GO = runner.Sample(0.0, 0, 1.0)


def test_the_window_runs_from_the_first_poll_with_records_to_the_last_record() -> None:
    samples = [runner.Sample(1.0, 100, 1.5), runner.Sample(2.0, 5000, 3.0), runner.Sample(3.0, 10_000, 4.5)]
    window = runner.copy_window(GO, samples, 10_000)
    assert (window.kind, window.base, window.end) == ("arrival", samples[0], samples[2])


def test_a_run_whose_first_poll_saw_most_records_is_measured_from_the_go() -> None:
    samples = [runner.Sample(1.0, 9000, 1.5), runner.Sample(1.05, 10_000, 1.6)]
    assert runner.copy_window(GO, samples, 10_000) == runner.Window("start", GO, samples[1])
    [alone] = samples[1:]
    assert runner.copy_window(GO, [alone], 10_000) == runner.Window("start", GO, alone)


def test_records_the_destination_held_at_the_go_count_for_neither_the_window_nor_its_share() -> None:
    # The native limit copies from its start: 2,500 records were there at the go.
    go = runner.Sample(0.0, 2500, 1.0)
    samples = [runner.Sample(1.0, 3000, 1.5), runner.Sample(2.0, 10_000, 4.5)]
    assert runner.copy_window(go, samples, 10_000) == runner.Window("arrival", samples[0], samples[1])
    samples = [runner.Sample(0.05, 4000, 1.1), runner.Sample(0.1, 10_000, 1.6)]
    assert runner.copy_window(go, samples, 10_000) == runner.Window("start", go, samples[1])


def test_an_exactly_once_copy_ends_at_its_last_record_not_at_its_last_transactions_markers() -> None:
    # 8 partitions: the last poll sees the last transaction's 8 markers, the one before the last record.
    samples = [runner.Sample(1.0, 100, 1.5), runner.Sample(2.0, 10_010, 3.0), runner.Sample(2.9, 10_018, 3.4)]
    window = runner.copy_window(GO, samples, 10_000, marker_slack=8)
    assert window.end == samples[1] and window.kind == "arrival"
    assert runner.copy_window(GO, samples, 10_000).end == samples[2]  # at least once: no markers


@given(
    st.lists(st.tuples(st.floats(0.01, 5.0), st.integers(1, 5000), st.floats(0.0, 2.0)), min_size=1, max_size=30),
    st.integers(0, 16),
)
def test_the_window_lies_within_the_run_and_ends_within_the_slack_of_the_final_count(
    steps: list[tuple[float, int, float]], slack: int
) -> None:
    samples, now, count, cpu = [], 0.0, 0, 1.0
    for seconds, records, cpu_s in steps:
        now, count, cpu = now + seconds, count + records, cpu + cpu_s
        samples.append(runner.Sample(now, count, cpu))
    window = runner.copy_window(GO, samples, count, marker_slack=slack)
    assert window.base in (GO, samples[0]) and window.end in samples
    assert window.base.time < window.end.time or window.base is GO
    assert window.end.records >= count - slack
    assert all(sample.records < count - slack for sample in samples if sample.time < window.end.time)


def test_the_runs_of_a_workload_go_round_by_round_with_each_transaction_interval() -> None:
    plan = runner.plan_runs(("ferry-1w", "ferry-eos-1w"), (0.1, 1.0), rounds=2)
    assert [(run.name, run.round) for run in plan] == [
        ("ferry-1w", 1),
        ("ferry-eos-1w@0.1s", 1),
        ("ferry-eos-1w@1s", 1),
        ("ferry-1w", 2),
        ("ferry-eos-1w@0.1s", 2),
        ("ferry-eos-1w@1s", 2),
    ]
    assert len({run.slug for run in plan}) == len(plan)  # names of their own: no run resumes another's
    assert [run.name for run in runner.plan_runs(("ceiling", "ferry-eos-2w"))] == ["ceiling", "ferry-eos-2w"]


def _summary_run(system: str, rps: float, cpu: float, p99: float, status: str = "OK") -> dict[str, Any]:
    return {
        "workload": "8x100B",
        "system": system,
        "status": status,
        "records_per_s": rps,
        "cpu_s_per_million": cpu,
        "latency": {"p50_ms": p99 / 2, "p99_ms": p99},
        "last_commit_s": 0.2 if "eos" in system else None,
    }


def test_the_summary_takes_medians_over_the_rounds_and_compares_exactly_once_with_at_least_once() -> None:
    runs = [
        _summary_run("ferry-1w", 200.0, 4.0, 30.0),
        _summary_run("ferry-eos-1w@0.25s", 190.0, 4.2, 300.0),
        _summary_run("ferry-1w", 220.0, 3.6, 40.0),
        _summary_run("ferry-eos-1w@0.25s", 170.0, 4.4, 280.0),
        _summary_run("ferry-1w", 100.0, 9.0, 50.0, status="FAILED"),
        _summary_run("ferry-1w", 210.0, 3.8, 35.0),
        _summary_run("ferry-eos-1w@0.25s", 180.0, 4.0, 310.0),
    ]
    alo, eos = runner.summarize(runs)
    assert (alo["system"], alo["n"], alo["records_per_s"], alo["cpu_s_per_million"], alo["p99_ms"]) == (
        "ferry-1w",
        3,
        210.0,
        3.8,
        35.0,
    )
    assert alo["records_per_s_all"] == [200.0, 220.0, 210.0] and "records_per_s_vs_at_least_once" not in alo
    assert (eos["records_per_s"], eos["cpu_s_per_million"], eos["last_commit_s"]) == (180.0, 4.2, 0.2)
    assert eos["records_per_s_vs_at_least_once"] == round(180 / 210, 2)
    assert eos["cpu_per_record_vs_at_least_once"] == round(4.2 / 3.8, 2)
    [alone] = runner.summarize(runs[1:2])
    assert alone["records_per_s_vs_at_least_once"] is None  # no at-least-once run beside it


# -- the search ------------------------------------------------------------------------------

WAIT = Param("consumer", "fetch.wait.max.ms", (10, 50, DEFAULT))
LINGER = Param("producer", "linger.ms", (5, 20))


def test_with_setting_copies_and_default_removes() -> None:
    start = {"consumer": {"fetch.wait.max.ms": 10}, "consume_batch": 1000}
    changed = search.with_setting(start, WAIT, 50)
    assert changed == {"consumer": {"fetch.wait.max.ms": 50}, "consume_batch": 1000}
    assert start == {"consumer": {"fetch.wait.max.ms": 10}, "consume_batch": 1000}
    assert search.with_setting(start, WAIT, DEFAULT) == {"consumer": {}, "consume_batch": 1000}
    assert search.get_setting(start, LINGER) is DEFAULT


def _pairs(speed: float, cpu: float = 1.0) -> list[Pair]:
    return [Pair("8x1024B", 100.0, 5.0, 100.0 * speed, 5.0 * cpu), Pair("1x1024B", 50.0, 4.0, 50.0 * speed, 4.0 * cpu)]


def test_coordinate_search_takes_the_fastest_value_beyond_the_threshold() -> None:
    # Fake measurements: a true speed per configuration; the candidate's ratio is the quotient.
    def speed(config: dict[str, Any]) -> float:
        wait = search.get_setting(config, WAIT)
        linger = search.get_setting(config, LINGER)
        return {10: 1.0, 50: 1.3, DEFAULT: 1.2}[wait] * {5: 1.0, 20: 1.02, DEFAULT: 1.0}[linger]

    seen: list[tuple[str, Any]] = []

    def measure(a: dict[str, Any], b: dict[str, Any]) -> list[Pair]:
        return _pairs(speed(b) / speed(a))

    start = {"consumer": {"fetch.wait.max.ms": 10}, "producer": {"linger.ms": 5}}
    result = search.coordinate_search(
        start, [WAIT, LINGER], measure, threshold=1.05, on_trial=lambda t: seen.append((t.param, t.value))
    )
    assert result.best == {"consumer": {"fetch.wait.max.ms": 50}, "producer": {"linger.ms": 5}}  # 1.02x: noise
    assert seen == [
        ("consumer.fetch.wait.max.ms", 50),
        ("consumer.fetch.wait.max.ms", DEFAULT),
        ("producer.linger.ms", 20),
    ]
    assert [t.accepted for t in result.trials] == [True, True, False]
    assert result.start == start


def test_a_value_already_in_force_through_the_defaults_is_not_tried_again() -> None:
    tried: list[dict[str, Any]] = []

    def measure(a: dict[str, Any], b: dict[str, Any]) -> list[Pair]:
        tried.append(b)
        return _pairs(1.0)

    search.coordinate_search({}, [LINGER], measure, defaults={"producer": {"linger.ms": 5}})
    assert tried == [{"producer": {"linger.ms": 20}}]


def test_a_faster_candidate_that_costs_too_much_cpu_is_not_taken() -> None:
    trial = search.judge(WAIT, 50, _pairs(1.5, cpu=1.4), threshold=1.05, cpu_limit=1.25)
    assert (trial.speed, trial.cpu, trial.accepted) == (1.5, 1.4, False)


def test_geomean() -> None:
    assert search.geomean([2.0, 0.5]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        search.geomean([])


def test_parse_param() -> None:
    assert search.parse_param("consumer.fetch.wait.max.ms=5|50|default") == Param(
        "consumer", "fetch.wait.max.ms", (5, 50, DEFAULT)
    )
    assert search.parse_param("producer.compression.type=lz4") == Param("producer", "compression.type", ("lz4",))
    for bad in ("fetch.wait.max.ms=5", "consumer.x", "worker.x=1", "consumer.x="):
        with pytest.raises(ValueError):
            search.parse_param(bad)


def test_trials_table() -> None:
    result = search.SearchResult(start={}, best={}, trials=[search.judge(WAIT, DEFAULT, _pairs(1.1), 1.05, 1.25)])
    lines = search.trials_table(result).splitlines()
    assert (
        lines[0]
        == "| setting | value | 8x1024B rec/s ratio | 1x1024B rec/s ratio | rec/s (geomean) | CPU/record | taken |"
    )
    assert lines[2] == "| `consumer.fetch.wait.max.ms` | librdkafka default | 1.10x | 1.10x | 1.10x | 1.00x | yes |"


# -- the perf tools' output ------------------------------------------------------------------

PRODUCER_OUTPUT = """\
249537 records sent, 49887.4 records/sec (48.72 MB/sec), 400.1 ms avg latency, 612.0 ms max latency.
1000000 records sent, 164338.5 records/sec (160.49 MB/sec), 151.13 ms avg latency, 612.00 ms max latency, 140 ms 50th, \
390 ms 95th, 520 ms 99th, 600 ms 99.9th.
"""


def test_producer_output() -> None:
    assert limits.parse_producer_output(PRODUCER_OUTPUT, 1024) == limits.ToolRate(1_000_000, 164338.5, 168.28)
    with pytest.raises(BenchError):
        limits.parse_producer_output("Exception in thread main", 1024)


def test_consumer_output() -> None:
    line = (
        "2026-11-23 15:10:01:100, 2026-11-23 15:10:07:300, "
        "976.5625, 157.5, 1000000, 161290.3, 3012, 3188, 306.3, 313676.3\n"
    )
    assert limits.parse_consumer_output("WARNING: something\n" + line, 1070) == limits.ToolRate(
        1_000_000, 313676.3, 335.63
    )
    with pytest.raises(BenchError):
        limits.parse_consumer_output("no, numbers, here", 1070)


def test_core_pct() -> None:
    assert core_pct(0.3, 30.0) == 1.0
    with pytest.raises(ValueError):
        core_pct(1.0, 0.0)


# -- the report's ratios ---------------------------------------------------------------------


def _run(system: str, rps: float, cpu: float, workload: str = "8x1024B") -> runner.RunResult:
    return runner.RunResult(
        workload=workload,
        value_bytes=1024,
        system=system,
        label=system,
        records=1000,
        processes=1,
        status="OK",
        records_per_s=rps,
        cpu_s_per_million=cpu,
    )


def test_ratios_use_both_mm2_rows_and_the_fastest_ceiling() -> None:
    runs = [
        _run("ceiling", 200.0, 5.0),
        _run("ceiling-3", 250.0, 6.0),
        _run("ferry-1w", 150.0, 6.6),
        _run("mm2-t1", 100.0, 20.0),
        _run("mm2-tuned-t1", 120.0, 16.5),
        _run("limit-produce", 400.0, 0.0),
        _run("ferry-1w", 10.0, 1.0, workload="1x100B"),
    ]
    runner._ratios(runs)
    ferry = runs[2].vs_baseline
    assert ferry == {
        "records_per_s_vs_mm2_t1": 1.5,
        "records_per_cpu_s_vs_mm2_t1": 3.03,
        "records_per_s_vs_mm2_tuned_t1": 1.25,
        "records_per_cpu_s_vs_mm2_tuned_t1": 2.5,
        "records_per_s_vs_ceiling": 0.6,
        "cpu_per_record_vs_ceiling": 1.1,
    }
    assert runs[5].vs_baseline == {}  # a broker limit is no copy
    assert runs[6].vs_baseline["records_per_s_vs_ceiling"] is None  # no ceiling ran for that workload


def test_tuned_mirrormaker_gets_the_overrides_on_its_source_consumer_and_target_producer(tmp_path: Path) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    default = MirrorMaker2(stack=stack, workdir=tmp_path, partitions=8, slug="run-1", tasks=1).properties(["t"])
    tuned = MirrorMaker2(stack=stack, workdir=tmp_path, partitions=8, slug="run-2", tasks=1, tuned=True)
    props = tuned.properties(["t"])
    assert tuned.name == "mm2-tuned-t1"
    assert props[f"{tuned.src_alias}.consumer.max.poll.records"] == MM2_TUNED["consumer"]["max.poll.records"]
    assert props[f"{tuned.dst_alias}.producer.linger.ms"] == MM2_TUNED["producer"]["linger.ms"]
    assert not any(".consumer." in k or ".producer." in k for k in default)
    assert set(props) - set(default.keys() | {k.replace("run1", "run2") for k in default}) == {
        f"{tuned.src_alias}.consumer.{k}" for k in MM2_TUNED["consumer"]
    } | {f"{tuned.dst_alias}.producer.{k}" for k in MM2_TUNED["producer"]}


@pytest.mark.parametrize(
    ("name", "flags", "count"),
    [
        ("ceiling", [], 2),
        ("ceiling-3", [], 3),
        ("stamped-copy", ["--stamp"], 2),
        ("acked-copy-1", ["--stamp", "--reports"], 1),
    ],
)
def test_ceiling_systems_by_name(tmp_path: Path, name: str, flags: list[str], count: int) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    with mock.patch.object(os, "sched_getaffinity", return_value={0, 1}):
        system = runner.make_system(name, stack, tmp_path, 8, "run-1")
    assert isinstance(system, Ceiling)
    assert (system.name, system.flags, system.count) == (name, flags, count)


@pytest.mark.parametrize(("name", "count"), [("native", 2), ("native-1", 1), ("native-3", 3), ("native-12", 8)])
def test_native_systems_by_name(tmp_path: Path, name: str, count: int) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    with mock.patch.object(os, "sched_getaffinity", return_value={0, 1}):
        system = runner.make_system(name, stack, tmp_path, 8, "run-1")
    assert isinstance(system, NativeCopy)
    assert (system.name, system.count) == (name, count)  # at most one process per partition
    assert system.label.startswith("native limit")


def test_the_native_copy_gets_the_ceilings_client_settings_as_librdkafka_properties(tmp_path: Path) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    overrides = {"consumer": {"fetch.queue.backoff.ms": 5}, "producer": {"linger.ms": 20}}
    with mock.patch.object(os, "sched_getaffinity", return_value={0, 1}):
        system = runner.make_system("native", stack, tmp_path, 4, "run-1", overrides, compression="lz4")
    assert isinstance(system, NativeCopy)
    command = system.command(1, ["t1", "t2"])
    assert command[0] == str(system.program) and command[-3:] == ["--", "t1", "t2"]
    assert command[command.index("--partitions") + 1] == "4" and command[command.index("--block") + 1] == "1/2"
    consumer = dict(arg[2:].split("=", 1) for arg in command if arg.startswith("-c"))
    producer = dict(arg[2:].split("=", 1) for arg in command if arg.startswith("-p"))
    assert consumer["bootstrap.servers"] == stack.bootstrap("src")
    assert consumer["enable.auto.commit"] == "false" and consumer["fetch.queue.backoff.ms"] == "5"
    assert consumer["max.partition.fetch.bytes"] == str(4 * 1024 * 1024)
    assert producer["bootstrap.servers"] == stack.bootstrap("dst")
    assert (producer["acks"], producer["enable.idempotence"], producer["linger.ms"]) == ("all", "true", "20")
    assert producer["compression.type"] == "lz4"
    assert "logger" not in consumer and "logger" not in producer  # a Python object: not for the C program


def test_the_native_system_says_how_to_build_its_program(tmp_path: Path) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    system = NativeCopy(stack=stack, workdir=tmp_path, partitions=8, slug="run-1", program=tmp_path / "missing")
    with pytest.raises(BenchError, match="make setup"):
        system.start(["t1"])


def test_the_native_limit_is_never_the_ceiling() -> None:
    runs = [_run("native", 500.0, 2.0), _run("ceiling", 200.0, 4.0), _run("ferry-1w", 100.0, 6.0)]
    runner._ratios(runs)
    assert runs[0].vs_baseline["records_per_s_vs_ceiling"] == 2.5
    assert runs[0].vs_baseline["cpu_per_record_vs_ceiling"] == 0.5
    assert runs[2].vs_baseline["records_per_s_vs_ceiling"] == 0.5


def test_the_ceilings_variants_are_never_the_ceiling() -> None:
    runs = [
        _run("ceiling", 200.0, 4.0),
        _run("acked-copy", 300.0, 5.0),
        _run("ferry-1w", 100.0, 6.0),
        _run("stamped-copy", 400.0, 4.4),
    ]
    runner._ratios(runs)
    assert runs[1].vs_baseline["cpu_per_record_vs_ceiling"] == 1.25
    assert runs[2].vs_baseline["records_per_s_vs_ceiling"] == 0.5


def test_workload_values_same_random_and_text() -> None:
    same = values(Workload(value_bytes=512, partitions=8, records=10))
    assert same(0) == same(1) and len(same(0)) == 512
    random_values = values(Workload(value_bytes=512, partitions=8, records=10, values="random"))
    assert random_values(0) != random_values(1) and len(random_values(1)) == 512
    text = values(Workload(value_bytes=1024, partitions=8, records=10, values="text"))
    first, second = text(0), text(1)
    assert first != second and len(first) == len(second) == 1024
    assert b'"event": "' in first + second  # JSON events
    assert Workload(value_bytes=1024, partitions=8, records=10, values="text").name == "8x1024B-text"
    assert Workload(value_bytes=1024, partitions=8, records=10).name == "8x1024B"


def test_log_bytes_counts_only_the_topics_own_segments(tmp_path: Path) -> None:
    for folder, size in (("t-0", 100), ("t-1", 50), ("t-x-0", 7), ("other-0", 9)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "00000000000000000000.log").write_bytes(b"x" * size)
        (tmp_path / folder / "00000000000000000000.index").write_bytes(b"x" * 1000)
    assert log_bytes(tmp_path, "t") == 150
    assert log_bytes(tmp_path, "t-x") == 7


def test_the_bench_sets_the_compression_of_ferrys_route_and_of_the_ceiling(tmp_path: Path) -> None:
    stack = Stack(
        zookeeper=Server(name="zookeeper", kind="zookeeper", port=1),
        src=Server(name="src", kind="kafka", port=2),
        dst=Server(name="dst", kind="kafka", port=4),
    )
    workers = runner.make_system("ferry-1w", stack, tmp_path, 8, "run-1", compression="zstd")
    assert isinstance(workers, FerryWorkers) and workers.config()["routes"][0]["compression"] == "zstd"
    default = runner.make_system("ferry-1w", stack, tmp_path, 8, "run-2")
    assert isinstance(default, FerryWorkers) and default.config()["routes"][0]["compression"] == "none"
    ceiling = runner.make_system("ceiling", stack, tmp_path, 8, "run-3", compression="lz4")
    assert isinstance(ceiling, Ceiling) and ceiling.compression == "lz4"
