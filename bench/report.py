"""The benchmark's table (rich) and JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def _num(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}{suffix}"


def render(report: dict[str, Any], console: Console | None = None) -> None:
    # Wide enough for every column even when the output is not a terminal.
    console = console or Console(width=max(Console().width, 170))
    machine = report["machine"]
    options = report["options"]
    for load in report["workloads"]:
        table = Table(
            title=f"{load['name']} values, {load['records']:,} records x {load['partitions']} partitions "
            f"({load['record_bytes']} bytes with key and 2 headers)",
            caption=f"{machine['nproc']} CPUs ({machine['cpu_model']}); latency at {options['latency_rate']:,} "
            f"records/s for {options['latency_seconds']:g}s; ratios to MirrorMaker 2 tasks.max=1 (MM2: "
            "defaults, MM2t: tuned) and to the fastest ceiling (/ceil: records/s, CPU/ceil: CPU per record)",
        )
        for column in (
            "system",
            "rec/s",
            "MB/s",
            "CPU s/M",
            "RSS MB",
            "p50 ms",
            "p99 ms",
            "rec/s /MM2",
            "/MM2t",
            "rec/CPU /MM2",
            "/MM2t",
            "/ceil",
            "CPU/ceil",
            "check",
        ):
            table.add_column(column, justify="left" if column in ("system", "check") else "right")
        for run in report["runs"]:
            if run["workload"] != load["name"]:
                continue
            latency = run["latency"] or {}
            ratios = run["ratios"] or {}
            check = "[green]OK[/]" if run["status"] == "OK" else "[red]FAILED[/]"
            if run["system"].startswith("limit-") and run["status"] == "OK":
                check = "n/a"  # a perf tool's own records: nothing to check
            table.add_row(
                run["system"],
                _num(run["records_per_s"]),
                _num(run["mb_per_s"], 1),
                _num(run["cpu_s_per_million"], 1),
                _num(run["peak_rss_mb"]),
                _num(latency.get("p50_ms"), 1),
                _num(latency.get("p99_ms"), 1),
                _num(ratios.get("records_per_s_vs_mm2_t1"), 2, "x"),
                _num(ratios.get("records_per_s_vs_mm2_tuned_t1"), 2, "x"),
                _num(ratios.get("records_per_cpu_s_vs_mm2_t1"), 2, "x"),
                _num(ratios.get("records_per_cpu_s_vs_mm2_tuned_t1"), 2, "x"),
                _num(ratios.get("records_per_s_vs_ceiling"), 2, "x"),
                _num(ratios.get("cpu_per_record_vs_ceiling"), 2, "x"),
                check,
            )
        console.print(table)
        _render_summary(report, load["name"], console)
    idle = report.get("idle")
    if idle:
        console.print(
            f"idle: one Ferry worker holding {idle['partitions']} partitions with no traffic used "
            f"{idle['worker_core_pct']:.2f} % of a core over {idle['seconds']:g}s (source broker: "
            f"{_num(idle['source_broker_core_pct'], 2)} %), peak RSS {idle['worker_rss_mb']:.0f} MB",
            highlight=False,
        )
    labels = {run["system"]: run["label"] for run in report["runs"]}
    console.print("; ".join(f"{name}: {label}" for name, label in labels.items()), highlight=False)
    for run in report["runs"]:
        if run["status"] != "OK":
            console.print(f"[red]{run['workload']} {run['label']} FAILED[/]:")
            for problem in run["problems"]:
                console.print(f"  {problem}", markup=False, highlight=False)
    console.print(f"logs and configs: {report['workdir']}", highlight=False)


def _render_summary(report: dict[str, Any], workload: str, console: Console) -> None:
    """Each system's medians over the rounds, with exactly once against at least once, when there
    is more than one round or an exactly-once run (whose last commit is not in its records/s)."""
    rows = [row for row in report.get("summary") or [] if row["workload"] == workload]
    options = report["options"]
    if not rows or (options.get("rounds", 1) == 1 and all(row["last_commit_s"] is None for row in rows)):
        return
    table = Table(
        title=f"{workload}: medians over {options.get('rounds', 1)} round(s)",
        caption="exactly once against Ferry at least once with as many workers: rec/s and CPU per record; "
        "last commit: seconds from the last record produced to the last transaction visible (not in rec/s)",
    )
    for column in (
        "system",
        "n",
        "rec/s",
        "each round",
        "CPU s/M",
        "p50 ms",
        "p99 ms",
        "last commit s",
        "rec/s /ALO",
        "CPU /ALO",
    ):
        table.add_column(column, justify="left" if column in ("system", "each round") else "right")
    for row in rows:
        table.add_row(
            row["system"],
            str(row["n"]),
            _num(row["records_per_s"]),
            " ".join(_num(value) for value in row["records_per_s_all"]),
            _num(row["cpu_s_per_million"], 2),
            _num(row["p50_ms"], 1),
            _num(row["p99_ms"], 1),
            _num(row["last_commit_s"], 2),
            _num(row.get("records_per_s_vs_at_least_once"), 2, "x"),
            _num(row.get("cpu_per_record_vs_at_least_once"), 2, "x"),
        )
    console.print(table)


def write_json(report: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
