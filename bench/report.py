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


def write_json(report: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
