"""`ferry bench` end to end on tiny workloads: the ceiling and Ferry (1 and 2 workers); the native limit
(the ceiling's loop in C); the brokers' limits, a hot single partition and an idle worker; no MirrorMaker 2
(its JVM start alone takes longer than all this).

Real processes against the local stack; checks the JSON report's shape and that every run's
check (every record arrived, in order) passed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ferry.bench import workload
from ferry.bench.cli import main
from ferry.bench.workload import Workload
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack

RUN_KEYS = {
    "workload",
    "value_bytes",
    "system",
    "label",
    "records",
    "processes",
    "round",
    "transaction_interval_s",
    "status",
    "problems",
    "window",
    "seconds",
    "last_commit_s",
    "records_per_s",
    "mb_per_s",
    "cpu_s_per_million",
    "cpu_s_total",
    "peak_rss_mb",
    "destination_bytes_per_record",
    "latency",
    "ratios",
    "logs",
}


def test_bench_runs_ceilings_and_ferry_and_every_record_arrives(local_stack: devstack.Stack, tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    status = main(
        [
            "--records",
            "2000",
            "--workloads",
            "100",
            "--systems",
            "ceiling,stamped-copy,acked-copy,ferry-1w,ferry-2w",
            "--latency-rate",
            "500",
            "--latency-seconds",
            "1",
            "--json",
            str(report_path),
            "--workdir",
            str(tmp_path / "work"),
        ]
    )
    report = json.loads(report_path.read_text())
    failed = [(r["system"], r["problems"]) for r in report["runs"] if r["status"] != "OK"]
    assert status == 0 and report["ok"], failed

    assert report["options"]["systems"] == ["ceiling", "stamped-copy", "acked-copy", "ferry-1w", "ferry-2w"]
    assert report["machine"]["nproc"] >= 1
    [load] = report["workloads"]
    assert (load["name"], load["records"], load["partitions"], load["value_bytes"], load["headers"]) == (
        "8x100B",
        2000,
        8,
        100,
        2,
    )

    runs = {r["system"]: r for r in report["runs"]}
    assert set(runs) == {"ceiling", "stamped-copy", "acked-copy", "ferry-1w", "ferry-2w"}
    assert runs["ferry-2w"]["processes"] == 2 and runs["ferry-1w"]["processes"] == 1
    for run in runs.values():
        assert set(run) == RUN_KEYS
        assert run["records"] == 2000 and run["problems"] == []
        assert run["records_per_s"] > 0 and run["mb_per_s"] > 0
        assert run["cpu_s_per_million"] >= 0 and run["cpu_s_total"] > 0
        assert run["destination_bytes_per_record"] > 100  # uncompressed 100-byte values, keys, headers
        assert run["peak_rss_mb"] > 10
        assert run["latency"]["expected"] == run["latency"]["received"] == 500
        assert 0 <= run["latency"]["p50_ms"] <= run["latency"]["p99_ms"] <= run["latency"]["max_ms"]
        # No MirrorMaker 2 run: no ratio to it; the ceiling is there.
        assert run["ratios"]["records_per_s_vs_mm2_t1"] is None
        assert run["ratios"]["records_per_s_vs_ceiling"] > 0
    assert runs["ceiling"]["ratios"]["records_per_s_vs_ceiling"] == 1.0
    assert runs["acked-copy"]["processes"] == runs["stamped-copy"]["processes"] == runs["ceiling"]["processes"]


def test_bench_runs_exactly_once_at_a_transaction_interval_in_rounds_and_every_record_arrives(
    local_stack: devstack.Stack, tmp_path: Path
) -> None:
    report_path = tmp_path / "bench.json"
    status = main(
        [
            "--records",
            "2000",
            "--workloads",
            "100",
            "--systems",
            "ferry-1w,ferry-eos-1w",
            "--transaction-intervals",
            "0.5",
            "--rounds",
            "2",
            "--latency-rate",
            "500",
            "--latency-seconds",
            "1",
            "--json",
            str(report_path),
            "--workdir",
            str(tmp_path / "work"),
        ]
    )
    report = json.loads(report_path.read_text())
    failed = [(r["system"], r["problems"]) for r in report["runs"] if r["status"] != "OK"]
    assert status == 0 and report["ok"], failed
    assert report["options"]["transaction_intervals"] == [0.5] and report["options"]["rounds"] == 2
    assert [(r["system"], r["round"], r["transaction_interval_s"]) for r in report["runs"]] == [
        ("ferry-1w", 1, None),
        ("ferry-eos-1w@0.5s", 1, 0.5),
        ("ferry-1w", 2, None),
        ("ferry-eos-1w@0.5s", 2, 0.5),
    ]
    for run in report["runs"]:
        assert set(run) == RUN_KEYS and run["problems"] == []
        assert run["records_per_s"] > 0 and run["cpu_s_per_million"] >= 0
        assert run["latency"]["expected"] == run["latency"]["received"] == 500
        # Exactly once: the last transaction's commit is measured on its own, after the last record.
        assert (run["last_commit_s"] is None) == (run["system"] == "ferry-1w")
        assert run["last_commit_s"] is None or run["last_commit_s"] >= 0
    alo, eos = report["summary"]
    assert (alo["system"], alo["n"], eos["system"], eos["n"]) == ("ferry-1w", 2, "ferry-eos-1w@0.5s", 2)
    assert eos["records_per_s_vs_at_least_once"] > 0 and eos["cpu_per_record_vs_at_least_once"] > 0


def test_bench_runs_the_native_limit_and_every_record_arrives(local_stack: devstack.Stack, tmp_path: Path) -> None:
    report_path = tmp_path / "bench.json"
    status = main(
        [
            "--records",
            "2000",
            "--workloads",
            "100,1x100",
            "--systems",
            "native,native-1",
            "--latency-rate",
            "500",
            "--latency-seconds",
            "1",
            "--json",
            str(report_path),
            "--workdir",
            str(tmp_path / "work"),
        ]
    )
    report = json.loads(report_path.read_text())
    failed = [(r["workload"], r["system"], r["problems"]) for r in report["runs"] if r["status"] != "OK"]
    assert status == 0 and report["ok"], failed
    assert [(r["workload"], r["system"]) for r in report["runs"]] == [
        ("8x100B", "native"),
        ("8x100B", "native-1"),
        ("1x100B", "native"),
        ("1x100B", "native-1"),
    ]
    for run in report["runs"]:
        assert set(run) == RUN_KEYS
        assert run["label"].startswith("native limit") and run["problems"] == []
        assert run["records_per_s"] > 0 and run["mb_per_s"] > 0
        assert run["cpu_s_per_million"] >= 0 and run["cpu_s_total"] > 0
        assert run["destination_bytes_per_record"] > 100  # uncompressed 100-byte values, keys, headers
        assert run["peak_rss_mb"] > 1
        assert run["latency"]["expected"] == run["latency"]["received"] == 500
        assert run["ratios"]["records_per_s_vs_ceiling"] is None  # no ceiling ran: native is never one
    runs = {(r["workload"], r["system"]): r for r in report["runs"]}
    # One process per CPU, at most one per partition.
    assert runs[("8x100B", "native")]["processes"] == min(8, report["machine"]["nproc"])
    assert runs[("8x100B", "native-1")]["processes"] == runs[("1x100B", "native")]["processes"] == 1


def test_the_check_fails_a_lossy_or_reordered_copy(
    local_stack: devstack.Stack,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
) -> None:
    cluster = {"bootstrap.servers": local_stack.bootstrap("dst")}
    load = Workload(value_bytes=100, partitions=2, records=1000)
    good, lossy, reordered = topic_name("good"), topic_name("lossy"), topic_name("reordered")
    for topic in (good, lossy, reordered):
        create_topic("dst", topic, partitions=2)
    workload.fill(cluster, good, load, "r1")
    assert workload.verify(cluster, good, load, "r1") == []

    workload.fill(
        cluster, lossy, Workload(value_bytes=100, partitions=2, records=999), "r1"
    )  # partition 1 lacks its last record
    assert workload.verify(cluster, lossy, load, "r1") == [
        "partition 1: offsets 0..499 at the destination, expected 0..500"
    ]

    # Partition 0 with records 250 and 251 swapped (the middle window starts at 150).
    producer = kafka_clients.producer(cluster)
    value = bytes(100)
    orders = {0: [*range(250), 251, 250, *range(252, 500)], 1: list(range(500))}
    for partition, order in orders.items():
        for seq in order:
            key = workload.record_key(seq)
            producer.produce(
                reordered, value, key, partition, headers=[(workload.HEADER_RUN, b"r1"), (workload.HEADER_SEQ, key)]
            )
    assert producer.flush(30) == 0
    problems = workload.verify(cluster, reordered, load, "r1")
    assert len(problems) == 1 and problems[0].startswith("partition 0: offset 250 holds key b'0000000251'"), problems


def test_bench_runs_the_broker_limits_a_hot_partition_and_the_idle_measurement(
    local_stack: devstack.Stack,
    tmp_path: Path,
) -> None:
    report_path = tmp_path / "bench.json"
    status = main(
        [
            "--workloads",
            "1x100:500",
            "--systems",
            "limit-produce,limit-consume,ceiling-1,ferry-1w",
            "--latency-seconds",
            "0",
            "--idle-partitions",
            "4",
            "--idle-seconds",
            "1",
            "--json",
            str(report_path),
            "--workdir",
            str(tmp_path / "work"),
        ]
    )
    report = json.loads(report_path.read_text())
    failed = [(r["system"], r["problems"]) for r in report["runs"] if r["status"] != "OK"]
    assert status == 0 and report["ok"], failed
    [load] = report["workloads"]
    assert (load["name"], load["partitions"], load["records"]) == ("1x100B", 1, 500)
    runs = {r["system"]: r for r in report["runs"]}
    assert runs["limit-produce"]["records_per_s"] > 0 and runs["limit-consume"]["records_per_s"] > 0
    assert runs["limit-produce"]["ratios"] == {}  # a perf tool's rate, not a copy
    assert runs["ceiling-1"]["processes"] == 1
    assert runs["ferry-1w"]["ratios"]["records_per_s_vs_ceiling"] > 0
    assert runs["ferry-1w"]["ratios"]["cpu_per_record_vs_ceiling"] is not None
    idle = report["idle"]
    assert idle["partitions"] == 4 and idle["seconds"] >= 1 and 0 <= idle["worker_core_pct"] < 100
