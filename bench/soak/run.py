"""One soak run: the soak's stack, two controllers and three workers, the stream, the faults, the verdict.

Order: start the soak's stack (:func:`config.soak_stack`), create the topic, start the fleet and the
stream, wait until every partition reaches the destination, then apply the schedule's faults for
``minutes`` (the clock starts there), stop the stream, wait for the mirror to catch up (every
partition's committed position at the source's end, bounded), and read the destination twice
(``read_committed`` and ``read_uncommitted``). The supervisor restarts exited processes throughout.

Recovery: from the end of the last fault until the mirror's committed positions (``GET /offset``
of a controller) reach the source's log ends as they were when that fault ended.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.bench import procstat
from ferry.bench.errors import BenchError
from ferry.bench.soak import faults, schedule, verdict
from ferry.bench.soak.config import fleet_config, soak_stack
from ferry.bench.soak.nemesis import Nemesis
from ferry.bench.soak.stream import QUIET, Stream, read_values
from ferry.bench.soak.supervisor import Supervisor
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics, end_offsets

CONTROLLERS = ("c1", "c2")
WORKERS = ("w1", "w2", "w3")
RSS_SAMPLE_AT_S = 300.0  # each worker's RSS is sampled at minute 5 (and at the end)


@dataclass(frozen=True, kw_only=True)
class SoakOptions:
    minutes: float
    seed: int
    faults: tuple[str, ...]
    workdir: Path
    gap_s: tuple[float, float] = (30.0, 60.0)
    zookeeper_down_s: float = 120.0
    rate: int = 2000
    partitions: int = 6
    dst_brokers: int = 3
    base_port: int = 31600
    session_timeout_s: float = 6.0
    route_options: Mapping[str, Any] = field(default_factory=dict)
    catch_up_s: float = 600.0
    keep_stack: bool = False


class _Mirror:
    """What the soak reads of the mirror while it runs: the source's log ends and the committed positions."""

    def __init__(self, *, stack: devstack.Stack, topic: str, partitions: int, supervisor: Supervisor) -> None:
        self.topic, self.partitions, self.supervisor = topic, partitions, supervisor
        self.src = {"bootstrap.servers": stack.src.bootstrap}
        self.dst = {"bootstrap.servers": stack.dst.bootstrap}
        self._src_admin: AdminClient | None = kafka_clients.admin(self.src, logger=QUIET)
        self._dst_admin: AdminClient | None = kafka_clients.admin(self.dst, logger=QUIET)

    def close(self) -> None:
        """Drops the admin clients: once the soak's clusters stop, they would only log that they are gone."""
        self._src_admin = self._dst_admin = None

    def source_ends(self) -> dict[int, int] | None:
        if self._src_admin is None:
            return None
        try:
            ends = end_offsets(self._src_admin, self.topic)
        except KafkaException:
            return None
        return ends if len(ends) == self.partitions else None

    def destination_ends(self) -> dict[int, int]:
        if self._dst_admin is None:
            return {}
        try:
            return end_offsets(self._dst_admin, self.topic)
        except KafkaException:
            return {}

    def committed(self) -> dict[int, int] | None:
        """Partition -> the route's committed source position, from the first controller that answers."""
        for controller in self.supervisor.running("controller"):
            try:
                rows = requests.get(f"{controller.url}/offset/{self.topic}", timeout=3).json()["offsets"]
            except (requests.RequestException, ValueError, KeyError):
                continue
            committed = {int(r["partitionId"]): r["committed"] for r in rows if r.get("committed") is not None}
            if len(committed) == self.partitions:
                return committed
        return None

    def reached(self, ends: Mapping[int, int]) -> bool:
        committed = self.committed()
        return committed is not None and all(committed.get(p, -1) >= end for p, end in ends.items())


class _Watch:
    """What the soak does about once a second whatever else it waits for: restarts exited processes,
    samples the workers' RSS at minute 5, and looks whether the mirror recovered from the last fault.

    Recovery states: NONE (no fault ended yet) -> ENDED (``last_fault_ended``; the next look takes
    the source's log ends) -> RECOVERED (the committed positions reached them: ``recovery_s``).
    Another fault's end starts over at ENDED.
    """

    def __init__(self, supervisor: Supervisor, mirror: _Mirror, clock: Callable[[], float]) -> None:
        self.supervisor, self.mirror, self.clock = supervisor, mirror, clock
        self.started: float | None = None
        self.rss_at_5_min: dict[str, int] | None = None
        self.recovery_from: float | None = None
        self.recovery_ends: dict[int, int] | None = None
        self.recovery_s: float | None = None
        self._last_look = 0.0

    def worker_rss(self) -> dict[str, int]:
        return {m.name: procstat.rss_bytes(m.process.pid) for m in self.supervisor.running("worker")}

    def last_fault_ended(self) -> None:
        self.recovery_from, self.recovery_ends, self.recovery_s = self.clock(), None, None

    def tick(self) -> None:
        self.supervisor.tick()
        now = self.clock()
        if self.started is not None and self.rss_at_5_min is None and now - self.started >= RSS_SAMPLE_AT_S:
            self.rss_at_5_min = self.worker_rss()
        if self.recovery_from is None or self.recovery_s is not None or now - self._last_look < 1.0:
            return
        self._last_look = now
        if self.recovery_ends is None:
            self.recovery_ends = self.mirror.source_ends()
        elif self.mirror.reached(self.recovery_ends):
            self.recovery_s = round(self.clock() - self.recovery_from, 1)


def run_soak(
    options: SoakOptions,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Runs the soak; returns its report (see :func:`render`)."""
    stack = soak_stack(options.dst_brokers, options.base_port)
    options.workdir.mkdir(parents=True, exist_ok=True)
    echo(
        f"soak: starting its stack (ZooKeeper {stack.zookeeper.address}, src {stack.src.bootstrap}, "
        f"dst {stack.dst.bootstrap}); logs in {options.workdir}"
    )
    processes.up(stack, deadline_s=300.0, echo=echo)
    slug = uuid.uuid4().hex[:8]
    topic = f"soak-{slug}"
    config_path = options.workdir / "ferry.yaml"
    config = fleet_config(stack, f"/ferry-soak-{slug}", topic, options.session_timeout_s, options.route_options)
    config_path.write_text(yaml.safe_dump(config))
    supervisor = Supervisor(config_path=config_path, workdir=options.workdir, clock=clock)
    stream = Stream(
        bootstrap=stack.src.bootstrap, topic=topic, rate=options.rate, log=options.workdir / "verifiable-producer.log"
    )
    mirror = _Mirror(stack=stack, topic=topic, partitions=options.partitions, supervisor=supervisor)
    watch = _Watch(supervisor, mirror, clock)

    def pause(seconds: float) -> None:
        """Waits ``seconds`` while the watch goes on."""
        until = clock() + seconds
        while True:
            watch.tick()
            left = until - clock()
            if left <= 0:
                return
            sleep(min(0.5, left))

    def pause_until(condition: Callable[[], bool], timeout: float) -> bool:
        until = clock() + timeout
        while not condition():
            if clock() >= until:
                return False
            pause(1.0)
        return True

    try:
        create_topics(kafka_clients.admin(mirror.src, logger=QUIET), [NewTopic(topic, options.partitions, 1)])
        for name in CONTROLLERS:
            supervisor.start("controller", name)
        for name in WORKERS:
            supervisor.start("worker", name)
        stream.start()
        if not pause_until(
            lambda: sum(1 for end in mirror.destination_ends().values() if end > 0) == options.partitions, 300.0
        ):
            raise BenchError(f"{topic}: not every partition reached the destination within 300 s")
        echo(f"soak: {topic} flows; {options.minutes:g} minutes of faults from now")
        watch.started = started = clock()
        duration_s = options.minutes * 60.0
        expected = faults.expected_lengths(options.zookeeper_down_s)
        planned = schedule.plan(options.seed, duration_s, options.faults, options.gap_s, expected_s=expected)
        nemesis = Nemesis(
            supervisor=supervisor,
            stack=stack,
            draw=random.Random(options.seed),
            pause=pause,
            clock=clock,
            session_timeout_s=options.session_timeout_s,
            zookeeper_down_s=options.zookeeper_down_s,
            echo=lambda line: echo(f"  {line}"),
        )
        applied = []
        for fault in planned:
            pause(max(0.0, started + fault.at_s - clock()))
            at_s = round(clock() - started, 1)
            echo(f"soak: {at_s:7.1f}s {fault.fault} ...")
            done = nemesis.apply(fault.fault)
            applied.append({"planned_s": fault.at_s, "at_s": at_s, **done})
            echo(f"soak: {at_s:7.1f}s {fault.fault} on {done['target']}, {done['took_s']}s")
            watch.last_fault_ended()
        pause(max(0.0, started + duration_s - clock()))
        rss_end = watch.worker_rss()
        stream.stop()
        stream_stopped = clock()
        ends = mirror.source_ends()
        caught_up = ends is not None and pause_until(lambda: mirror.reached(ends), options.catch_up_s)
        catch_up_s = round(clock() - stream_stopped, 1)
        if watch.recovery_from is not None and watch.recovery_s is None:
            pause_until(lambda: watch.recovery_s is not None, 5.0)
        produced = stream.acked()
        echo(f"soak: reading {topic} back from dst")
        committed_view = verdict.judge(produced, read_values(mirror.dst, topic, options.partitions, "read_committed"))
        uncommitted_view = verdict.judge(
            produced, read_values(mirror.dst, topic, options.partitions, "read_uncommitted")
        )
        return {
            "topic": topic,
            "minutes": options.minutes,
            "seed": options.seed,
            "faultsAsked": list(options.faults),
            "rate": options.rate,
            "routeOptions": dict(options.route_options),
            "produced": sum(len(v) for v in produced.values()),
            "sendErrors": stream.failed,
            "faults": applied,
            "caughtUp": caught_up,
            "catchUpS": catch_up_s,
            "recoveryS": watch.recovery_s,
            "readCommitted": _figures(committed_view),
            "readUncommitted": _figures(uncommitted_view),
            "restarts": supervisor.summary(),
            "rssAt5Min": watch.rss_at_5_min,
            "rssAtEnd": rss_end,
            "ok": committed_view.lost == 0 and committed_view.duplicated == 0,
        }
    finally:
        stream.stop()
        supervisor.stop_all()
        _drop_topic(mirror, topic)
        mirror.close()
        if not options.keep_stack:
            processes.down(stack, echo=lambda line: None)


def _drop_topic(mirror: _Mirror, topic: str) -> None:
    """The run's topic on both clusters: a soak's records are of no use after it (best effort)."""
    for cluster in (mirror.src, mirror.dst):
        try:
            for future in kafka_clients.admin(cluster, logger=QUIET).delete_topics([topic]).values():
                future.result(30)
        except (KafkaException, TimeoutError):
            continue


def _figures(view: verdict.SoakVerdict) -> dict[str, Any]:
    return {
        "lost": view.lost,
        "duplicated": view.duplicated,
        "disorderedPartitions": view.disordered,
        "unacknowledged": view.unacknowledged,
        "partitions": [
            {
                "partition": p.partition,
                "produced": p.produced,
                "read": p.read,
                "lost": p.lost,
                "duplicated": p.duplicated,
                "disordered": p.disordered,
            }
            for p in view.partitions
        ],
    }


def render(report: Mapping[str, Any], echo: Callable[[str], None] = print) -> None:
    """The run's tables: faults (with what each does), the verdict per partition (read_committed, and read_uncommitted's
    duplicates), restarts, recovery and the workers' RSS."""
    echo(
        f"soak: {report['minutes']:g} min, seed {report['seed']}, {report['rate']} rec/s, "
        f"{report['produced']:,} records acknowledged on src ({report['sendErrors']} send errors)"
    )
    width = max(len(name) for name in faults.NAMES) + 1
    echo(f"{'at s':>7} {'fault':{width}} {'target':16} {'took s':>7}  what")
    for fault in report["faults"]:
        does = faults.named(fault["fault"]).does
        echo(f"{fault['at_s']:>7} {fault['fault']:{width}} {fault['target']:16} {fault['took_s']:>7}  {does}")
    committed, uncommitted = report["readCommitted"], report["readUncommitted"]
    echo(
        f"{'partition':>9} {'produced':>9} {'read':>9} {'lost':>6} {'dup':>6} "
        f"{'dup (uncommitted)':>17} {'disordered':>10}"
    )
    for row, loose in zip(committed["partitions"], uncommitted["partitions"], strict=True):
        echo(
            f"{row['partition']:>9} {row['produced']:>9} {row['read']:>9} {row['lost']:>6} {row['duplicated']:>6} "
            f"{loose['duplicated']:>17} {'yes' if row['disordered'] else 'no':>10}"
        )
    echo(
        f"{'total':>9} {'':>9} {'':>9} {committed['lost']:>6} {committed['duplicated']:>6} "
        f"{uncommitted['duplicated']:>17} {len(committed['disorderedPartitions']):>10}"
    )
    echo(
        f"lost {committed['lost']}, duplicated {committed['duplicated']} (read_committed); "
        f"duplicated {uncommitted['duplicated']} as read_uncommitted sees them; "
        f"disordered partitions {committed['disorderedPartitions'] or 'none'}; "
        f"unacknowledged records at dst {committed['unacknowledged']}"
    )
    recovery = report["recoveryS"]
    echo(
        f"recovery after the last fault: {'-' if recovery is None else f'{recovery} s'}; "
        f"caught up after the stream stopped: {'yes' if report['caughtUp'] else 'NO'} ({report['catchUpS']} s)"
    )
    rss5, rss_end = report["rssAt5Min"] or {}, report["rssAtEnd"] or {}
    echo(f"{'process':8} {'kind':10} {'restarts':>8} {'on its own':>10} {'RSS 5 min':>10} {'RSS end':>10}")
    for row in report["restarts"]:
        echo(
            f"{row['name']:8} {row['kind']:10} {row['restarts']:>8} {row['exitsOnItsOwn']:>10} "
            f"{_mib(rss5.get(row['name'])):>10} {_mib(rss_end.get(row['name'])):>10}"
        )


def _mib(value: int | None) -> str:
    return "-" if not value else f"{value / 2**20:.0f} MiB"


def write_json(report: Mapping[str, Any], path: str) -> None:
    Path(path).write_text(json.dumps(report, indent=2))
