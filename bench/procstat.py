"""CPU time and peak memory of other processes, read from ``/proc`` (Linux), all threads included.

No dependency: ``utime + stime`` of ``/proc/<pid>/stat`` counts every thread of the process
(JIT and GC threads of a JVM, librdkafka's threads of a Python worker); ``VmHWM`` of
``/proc/<pid>/status`` is the peak resident set size the kernel saw.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds used so far by ``pid`` (all its threads); 0.0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after "(comm)": index 0 is field 3 (state), so utime (14) and stime (15) are 11 and 12.
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def peak_rss_bytes(pid: int) -> int:
    """The peak resident set size (``VmHWM``) of ``pid`` in bytes; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


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
    mem_total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "cpu_model": model, "mem_total_bytes": mem_total}
