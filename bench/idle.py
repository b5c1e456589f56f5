"""The cost of doing nothing: CPU of one Ferry worker holding many partitions that get no records.

Short fetch waits (``fetch.wait.max.ms``) make a consumer ask the broker again and again when
nothing arrives, so a setting that helps a busy worker can make an idle one spin. This
measures it: an empty source topic of ``partitions`` partitions, one worker copying all of
them (ONLINE, as its status in ZooKeeper says), then, after a settling second, the CPU the worker
and the source broker use over ``seconds``, as a share of one core.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.bench import procstat, workload
from ferry.bench.errors import BenchError
from ferry.bench.systems import FerryWorkers
from ferry.devstack.stack import Server, Stack
from ferry.devstack.support import poll_until

_ONLINE_TIMEOUT_S = 120.0
_SETTLE_S = 1.0


@dataclass(frozen=True, kw_only=True)
class Idle:
    partitions: int
    seconds: float
    worker_core_pct: float
    source_broker_core_pct: float | None
    worker_rss_mb: float

    def to_json(self) -> dict[str, Any]:
        return {
            "partitions": self.partitions,
            "seconds": self.seconds,
            "worker_core_pct": self.worker_core_pct,
            "source_broker_core_pct": self.source_broker_core_pct,
            "worker_rss_mb": self.worker_rss_mb,
        }


def core_pct(cpu_seconds: float, wall_seconds: float) -> float:
    """CPU seconds over a wall-clock window as a percentage of one core."""
    if wall_seconds <= 0:
        raise ValueError("the window must be longer than zero")
    return round(100.0 * cpu_seconds / wall_seconds, 2)


def _server_pid(server: Server) -> int | None:
    try:
        return int(server.pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def measure_idle(
    stack: Stack, workdir: Path, partitions: int, seconds: float, slug: str, worker_config: dict[str, Any] | None = None
) -> Idle:
    source = {"bootstrap.servers": stack.bootstrap("src")}
    destination = {"bootstrap.servers": stack.bootstrap("dst")}
    topic = f"ferry-bench-idle-{slug}"
    src_admin, dst_admin = workload.admin(source), workload.admin(destination)
    workload.create_topic(src_admin, topic, partitions)
    system = FerryWorkers(
        stack=stack, workdir=workdir, partitions=partitions, slug=slug, workers=1, worker_config=worker_config
    )
    try:
        system.start([topic])
        system.go([topic])

        def all_online() -> bool:
            system.raise_if_failed()
            return system.online() >= partitions

        poll_until(
            all_online,
            _ONLINE_TIMEOUT_S,
            lambda: f"{partitions} partitions ONLINE on the idle worker (it has {system.online()})",
            interval=0.2,
        )
        time.sleep(_SETTLE_S)
        [pid] = system.pids()
        broker = _server_pid(stack.src)
        started = time.monotonic()
        worker_cpu = procstat.cpu_seconds(pid)
        broker_cpu = procstat.cpu_seconds(broker) if broker else 0.0
        time.sleep(seconds)
        wall = time.monotonic() - started
        worker_cpu = procstat.cpu_seconds(pid) - worker_cpu
        broker_pct = core_pct(procstat.cpu_seconds(broker) - broker_cpu, wall) if broker else None
        return Idle(
            partitions=partitions,
            seconds=round(wall, 1),
            worker_core_pct=core_pct(worker_cpu, wall),
            source_broker_core_pct=broker_pct,
            worker_rss_mb=round(procstat.peak_rss_bytes(pid) / 1e6, 1),
        )
    finally:
        system.stop()
        system.cleanup()
        for admin in (src_admin, dst_admin):
            with contextlib.suppress(BenchError):
                workload.delete_topics(admin, [topic])
