"""CPU time and memory of other processes, all threads included (Linux).

CPU: psutil's user + system times (``utime + stime`` of ``/proc/<pid>/stat``), which count every
thread of the process (JIT and GC threads of a JVM, librdkafka's threads of a Python worker).
Peak memory: ``VmHWM`` of ``/proc/<pid>/status``, the peak resident set size the kernel saw, which
psutil does not report on Linux; memory now: ``VmRSS`` of the same file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import psutil


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (all its threads); 0.0 once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


def _status_bytes(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` in bytes; 0 once the process is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes(pid: int) -> int:
    """The peak resident set size (``VmHWM``) of ``pid`` in bytes; 0 once it is gone."""
    return _status_bytes(pid, "VmHWM")


def rss_bytes(pid: int) -> int:
    """The resident set size (``VmRSS``) of ``pid`` now, in bytes; 0 once it is gone."""
    return _status_bytes(pid, "VmRSS")


def total_cpu_seconds(pids: Iterable[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def total_peak_rss_bytes(pids: Iterable[int]) -> int:
    return sum(peak_rss_bytes(pid) for pid in pids)


def machine() -> dict[str, object]:
    """What the figures were measured on."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu_model": model,
        "mem_total_bytes": int(psutil.virtual_memory().total),
    }
