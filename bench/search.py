"""The pure part of ``python -m ferry.bench.sweep``: the settings grid, paired comparisons, a coordinate search.

No I/O and no clock: the search gets a ``measure(baseline, candidate)`` function that runs both
configurations (interleaved, on the same workloads) and returns one :class:`Pair` per workload and
repeat. A candidate replaces the current best only when the geometric mean of its records/s
ratios reaches ``threshold`` (default 1.05: beyond the run-to-run noise of paired runs) and its
CPU per record does not grow by more than ``cpu_limit``.

States of the search: for each parameter in order, every value but the current one is tried
against the current best; the best accepted value (if any) becomes the current best before the
next parameter (one pass of coordinate descent from the start point).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT = None  # a grid value meaning "no override: librdkafka's own default"


@dataclass(frozen=True)
class Param:
    section: str  # "consumer" or "producer": the worker config section (librdkafka properties)
    key: str
    values: tuple[Any, ...]

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


@dataclass(frozen=True)
class Pair:
    """One workload's paired runs: the current best (a) and the candidate (b)."""

    workload: str
    a_records_per_s: float
    a_cpu_s_per_million: float
    b_records_per_s: float
    b_cpu_s_per_million: float

    @property
    def speed_ratio(self) -> float:
        return self.b_records_per_s / self.a_records_per_s

    @property
    def cpu_ratio(self) -> float:
        return self.b_cpu_s_per_million / self.a_cpu_s_per_million if self.a_cpu_s_per_million else 1.0


@dataclass
class Trial:
    param: str
    value: Any
    pairs: list[Pair]
    speed: float  # geometric mean of records/s ratios, candidate / best
    cpu: float  # geometric mean of CPU-per-record ratios
    accepted: bool = False


@dataclass
class SearchResult:
    start: dict[str, Any]
    best: dict[str, Any]
    trials: list[Trial] = field(default_factory=list)


def geomean(values: Iterable[float]) -> float:
    items = [v for v in values if v > 0]
    if not items:
        raise ValueError("no positive value to average")
    return math.exp(sum(math.log(v) for v in items) / len(items))


def get_setting(config: dict[str, Any], param: Param) -> Any:
    return (config.get(param.section) or {}).get(param.key, DEFAULT)


def with_setting(config: dict[str, Any], param: Param, value: Any) -> dict[str, Any]:
    """A copy of ``config`` (a worker config section) with ``param`` set; :data:`DEFAULT` removes it."""
    result = copy.deepcopy(config)
    section = dict(result.get(param.section) or {})
    if value is DEFAULT:
        section.pop(param.key, None)
    else:
        section[param.key] = value
    result[param.section] = section
    return result


def judge(param: Param, value: Any, pairs: Sequence[Pair], threshold: float, cpu_limit: float) -> Trial:
    speed = geomean(p.speed_ratio for p in pairs)
    cpu = geomean(p.cpu_ratio for p in pairs)
    return Trial(
        param.name, value, list(pairs), round(speed, 3), round(cpu, 3), accepted=speed >= threshold and cpu <= cpu_limit
    )


def coordinate_search(
    start: dict[str, Any],
    grid: Sequence[Param],
    measure: Callable[[dict[str, Any], dict[str, Any]], list[Pair]],
    threshold: float = 1.05,
    cpu_limit: float = 1.25,
    on_trial: Callable[[Trial], None] | None = None,
    defaults: dict[str, Any] | None = None,
) -> SearchResult:
    """One pass over ``grid`` from ``start``; see the module docstring.

    ``defaults`` (``{"consumer": {...}, "producer": {...}}``) are the settings the measured
    system has when ``start`` does not override them (Ferry's client defaults): a value equal to
    the one in force is not tried again.
    """
    best = copy.deepcopy(start)
    result = SearchResult(start=copy.deepcopy(start), best=best)
    for param in grid:
        current = get_setting(best, param)
        if current is DEFAULT and defaults is not None:
            current = get_setting(defaults, param)
        winner: Trial | None = None
        for value in param.values:
            if value == current:
                continue
            trial = judge(param, value, measure(best, with_setting(best, param, value)), threshold, cpu_limit)
            result.trials.append(trial)
            if on_trial is not None:
                on_trial(trial)
            if trial.accepted and (winner is None or trial.speed > winner.speed):
                winner = trial
        if winner is not None:
            best = with_setting(best, param, winner.value)
    result.best = best
    return result


def parse_param(text: str) -> Param:
    """``consumer.fetch.wait.max.ms=5|50|default`` -> a :class:`Param` (integers stay integers)."""
    name, sep, values_text = text.partition("=")
    section, _, key = name.strip().partition(".")
    if not sep or section not in ("consumer", "producer") or not key or not values_text.strip():
        raise ValueError(f"{text!r} is not SECTION.KEY=V1|V2 with SECTION consumer or producer")
    values: list[Any] = []
    for raw in values_text.split("|"):
        raw = raw.strip()
        if raw == "default":
            values.append(DEFAULT)
        else:
            try:
                values.append(int(raw))
            except ValueError:
                values.append(raw)
    return Param(section, key, tuple(values))


def trials_table(result: SearchResult) -> str:
    """The search as a Markdown table: one row per trial, its paired ratios per workload."""
    workloads: list[str] = []
    for trial in result.trials:
        for pair in trial.pairs:
            if pair.workload not in workloads:
                workloads.append(pair.workload)
    lines = [
        "| setting | value | "
        + " | ".join(f"{w} rec/s ratio" for w in workloads)
        + " | rec/s (geomean) | CPU/record | taken |",
        "|---|---|" + "---:|" * len(workloads) + "---:|---:|---|",
    ]
    for trial in result.trials:
        by_workload: dict[str, list[float]] = {}
        for pair in trial.pairs:
            by_workload.setdefault(pair.workload, []).append(pair.speed_ratio)
        cells = [f"{geomean(by_workload[w]):.2f}x" if w in by_workload else "-" for w in workloads]
        value = "librdkafka default" if trial.value is DEFAULT else str(trial.value)
        lines.append(
            f"| `{trial.param}` | {value} | "
            + " | ".join(cells)
            + f" | {trial.speed:.2f}x | {trial.cpu:.2f}x | {'yes' if trial.accepted else 'no'} |"
        )
    return "\n".join(lines)
