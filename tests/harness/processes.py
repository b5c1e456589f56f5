"""Whole-process fleets for e2e tests: controllers and workers as real `ferry` processes.

A ``Fleet`` writes one config file (its own ZooKeeper root, the local stack's clusters), starts
and kills processes, talks to the REST API, and a ``RecordLedger`` produces numbered records on
the source and checks, partition by partition, what arrived at the destination.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.common.core import provenance
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.stack import Stack
from ferry.devstack.support import (
    Spawned,
    create_topics,
    end_offsets,
    ferry_command,
    fleet_config,
    free_port,
    poll_until,
    produce_blocking,
    spawn,
    stop_all,
)

HEADER_SEQ = "ferry-test-seq"
_NOT_YET = (requests.RequestException, KeyError, ValueError, KafkaException)


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """:func:`devstack.support.poll_until`, where a server still settling (a topic created a moment
    ago answers "not leader" for a while, a REST server not listening yet) counts as "not yet"."""
    return poll_until(condition, timeout, what, interval=interval, ignoring=_NOT_YET)


@dataclass
class FerryProcess(Spawned):
    """A ``ferry controller`` or ``ferry worker`` process and the port it serves HTTP on."""

    kind: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Fleet:
    stack: Stack
    zk_root: str
    workdir: Path
    rebalance_delay_s: float = 3.0
    failover_delay_s: float = 2.0
    session_timeout_s: float = 4.0
    processes: list[FerryProcess] = field(default_factory=list)
    # Merged into the generated config, one level deep per section (e.g. {"controller": {...}}).
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.write_config()

    def write_config(self) -> None:
        self.config_path = self.workdir / "ferry.yaml"
        self.config_path.write_text(yaml.safe_dump(self.config()))

    def config(self) -> dict[str, Any]:
        own = {
            "zookeeper": {"session_timeout_s": self.session_timeout_s},
            "controller": {
                "rest_host": "127.0.0.1",
                "rebalance_delay_s": self.rebalance_delay_s,
                "failover_delay_s": self.failover_delay_s,
            },
            "worker": {"commit_interval_s": 0.5},
        }
        return fleet_config(self.stack, self.zk_root, own, self.extra)

    def _spawn(
        self,
        kind: str,
        name: str,
        args: list[str],
        port: int,
        env: dict[str, str] | None = None,
        config_path: Path | None = None,
    ) -> FerryProcess:
        config = str(config_path or self.config_path)
        started = spawn(name, ferry_command(kind, "--config", config, *args), self.workdir / f"{name}.log", env=env)
        process = FerryProcess(started.name, started.popen, started.log, kind, port)
        self.processes.append(process)
        return process

    def start_controller(self, name: str, env: dict[str, str] | None = None) -> FerryProcess:
        port = free_port()
        return self._spawn("controller", name, ["--id", name, "--rest-port", str(port)], port, env)

    def start_worker(self, name: str, env: dict[str, str] | None = None, zookeeper: str | None = None) -> FerryProcess:
        """``env``: added to the worker's environment; ``{port}`` in a value is its metrics port.
        ``zookeeper``: the worker reaches ZooKeeper at this address instead (a proxy the test can cut)."""
        port = free_port()
        env = {key: value.format(port=port) for key, value in (env or {}).items()}
        config_path = None
        if zookeeper is not None:
            config = self.config()
            config["zookeeper"] = {**config["zookeeper"], "connect": zookeeper}
            config_path = self.workdir / f"ferry-{name}.yaml"
            config_path.write_text(yaml.safe_dump(config))
        return self._spawn("worker", name, ["--id", name, "--metrics-port", str(port)], port, env, config_path)

    def stop_all(self) -> None:
        stop_all(self.processes, timeout=20)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ({p.kind}) ---\n{p.log_tail(40)}" for p in self.processes)

    # REST
    def wait_for_leader(self, *controllers: FerryProcess, timeout: float = 30) -> FerryProcess:
        def leader() -> FerryProcess | None:
            for c in controllers:
                if c.alive() and requests.get(f"{c.url}/health", timeout=2).json().get("leader"):
                    return c
            return None

        result: FerryProcess = wait_until(leader, timeout, "a leading controller")
        return result

    def wait_for_workers(self, controller: FerryProcess, names: set[str], timeout: float = 30) -> None:
        def registered() -> bool:
            body = requests.get(f"{controller.url}/instances", timeout=2).json()
            return {i["id"] for i in body["instances"]} >= names

        wait_until(registered, timeout, f"workers {sorted(names)} to register")

    def topic_view(self, controller: FerryProcess, topic: str) -> dict[str, Any]:
        response = requests.get(f"{controller.url}/topics/{topic}", timeout=5)
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def online_by_worker(self, controller: FerryProcess, topic: str) -> dict[int, str]:
        """Partition -> worker, for partitions reported ONLINE by the worker the ideal state names."""
        view = self.topic_view(controller, topic)
        ideal = {int(p): w for p, w in view["idealState"].items()}
        online = {}
        for p, entry in view["externalView"].items():
            if entry.get("state") == "ONLINE" and ideal.get(int(p)) == entry.get("worker"):
                online[int(p)] = entry["worker"]
        return online


class RecordLedger:
    """Produces numbered records to a source topic and checks the destination, per partition.

    Every record carries a unique sequence number in a header, a key, a value, a second header
    and an explicit CreateTime timestamp, so the check compares all of them.
    """

    def __init__(
        self,
        stack: Stack,
        topic: str,
        partitions: int,
        src: dict[str, str] | None = None,
        dst: dict[str, str] | None = None,
        transactional_destination: bool = False,
    ) -> None:
        """``transactional_destination``: the route writes exactly once, so destination offsets also hold
        transaction markers (and aborted copies): the destination's records are counted by reading them
        (read_committed), not from its log-end offsets."""
        self.stack = stack
        self.topic = topic
        self.partitions = partitions
        # The clusters' client properties: the PLAINTEXT listeners unless given (e.g. stack.secured("src")).
        self.src = src or {"bootstrap.servers": stack.bootstrap("src")}
        self.dst = dst or {"bootstrap.servers": stack.bootstrap("dst")}
        self.produced = 0
        # Recent CreateTimes: records older than the topic's retention (7 days by default) would be
        # deleted by the brokers' retention check in the middle of a test.
        self.base_timestamp_ms = int(time.time() * 1000) - 3_600_000
        self._producer = kafka_clients.producer(self.src, **{"linger.ms": 20})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._admins: dict[tuple[tuple[str, str], ...], AdminClient] = {}
        self._transactional_destination = transactional_destination
        self._counter: Any = None  # a read_committed consumer counting the destination's records
        self._counted = 0

    def create_source_topic(self) -> None:
        admin = kafka_clients.admin(self.src)
        create_topics(admin, [NewTopic(self.topic, self.partitions, 1)])

    def _produce_one(self, seq: int) -> None:
        produce_blocking(
            self._producer,
            self.topic,
            partition=seq % self.partitions,
            key=f"key-{seq}".encode(),
            value=f"value-{seq}-".encode() * 3,
            timestamp=self.base_timestamp_ms + seq,
            headers=[(HEADER_SEQ, str(seq).encode()), ("origin", b"e2e")],
        )

    def produce(self, count: int) -> None:
        for _ in range(count):
            self._produce_one(self.produced)
            self.produced += 1
            if self.produced % 10_000 == 0:
                self._producer.poll(0)
        assert self._producer.flush(60) == 0, "the source did not take every record"

    def produce_steadily(self, rate_per_s: int) -> None:
        """Produce in the background at about ``rate_per_s`` until ``stop_producing``."""

        def run() -> None:
            batch = max(1, rate_per_s // 20)
            while not self._stop.is_set():
                started = time.monotonic()
                for _ in range(batch):
                    self._produce_one(self.produced)
                    self.produced += 1
                self._producer.poll(0)
                time.sleep(max(0.0, 0.05 - (time.monotonic() - started)))

        self._thread = threading.Thread(target=run, name="steady-producer", daemon=True)
        self._thread.start()

    def stop_producing(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        assert self._producer.flush(60) == 0, "the source did not take every record"

    def destination_count(self) -> int:
        if not self._transactional_destination:
            return sum(self.end_offsets(self.dst).values())
        if self._counter is None:
            ends = self.end_offsets(self.dst)
            if not ends:
                return 0
            self._counter = kafka_clients.consumer(
                self.dst, group_id=f"ledger-count-{self.topic}", **{"isolation.level": "read_committed"}
            )
            self._counter.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in ends])
        while True:
            messages = self._counter.consume(10_000, timeout=0.2)
            self._counted += sum(1 for m in messages if m.error() is None)
            if len(messages) < 10_000:
                return self._counted

    def end_offsets(self, cluster: dict[str, str]) -> dict[int, int]:
        """Partition -> log-end offset of the ledger's topic on ``cluster`` (empty while it does not exist)."""
        key = tuple(sorted(cluster.items()))
        if key not in self._admins:
            self._admins[key] = kafka_clients.admin(cluster)
        return end_offsets(self._admins[key], self.topic)

    def read(self, cluster: dict[str, str], timeout: float = 120) -> dict[int, list[tuple[Any, ...]]]:
        """Partition -> (key, value, headers, timestamp) of every record of the ledger's topic on ``cluster``,
        up to the log ends seen when the read starts; fails naming the partitions not read to their end
        within ``timeout`` s."""
        ends = self.end_offsets(cluster)
        consumer = kafka_clients.consumer(
            cluster, group_id=f"ledger-read-{self.topic}", **{"isolation.level": "read_committed"}
        )
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in ends])
        records: dict[int, list[tuple[Any, ...]]] = {p: [] for p in ends}
        # Read to each partition's log end by position: transaction markers and aborted copies take
        # offsets that a read_committed consumer never returns.
        unread = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + timeout
        try:
            while unread and time.monotonic() < deadline:
                for m in consumer.consume(10_000, timeout=0.2):
                    if m.error() is not None:
                        continue
                    records[m.partition()].append(
                        (m.key(), m.value(), tuple(provenance.split(m.headers())[0]), m.timestamp())
                    )
                positions = consumer.position([TopicPartition(self.topic, p) for p in unread])
                unread -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
        finally:
            consumer.close()
        short = {p: f"{len(records[p])} records read of log end {ends[p]}" for p in sorted(unread)}
        assert not unread, (
            f"{self.topic} on {cluster.get('bootstrap.servers')}: not read to the log end within {timeout:.0f}s: "
            f"{short}"
        )
        return records

    def wait_for_destination(self, timeout: float, at_least: int | None = None) -> None:
        target = self.produced if at_least is None else at_least
        wait_until(lambda: self.destination_count() >= target, timeout, f"{target} records at the destination")

    def wait_for_progress(self, timeout: float, what: str) -> None:
        """Waits until the destination holds more records than now: copying goes on."""
        now = self.destination_count()
        wait_until(lambda: self.destination_count() > now, timeout, what)

    def check(self, allow_duplicates: bool) -> dict[str, int]:
        """Every source record is at the destination, in source order per partition.

        Duplicates (a record copied twice after a worker was killed) are counted; with
        ``allow_duplicates`` false there must be none. Returns {"records", "duplicates"}.
        """
        source = self.read(self.src)
        held = sum(len(r) for r in source.values())
        assert held >= self.produced, f"the source holds {held} records, fewer than the {self.produced} produced"
        destination = self.read(self.dst)
        duplicates = 0
        for partition, src_records in source.items():
            dst_records = destination.get(partition, [])
            first_seen: list[tuple[Any, ...]] = []
            seen: set[tuple[Any, ...]] = set()
            for record in dst_records:
                if record in seen:
                    duplicates += 1
                    continue
                seen.add(record)
                first_seen.append(record)
            missing = [record[0] for record in src_records if record not in seen]  # their keys
            assert not missing, (
                f"partition {partition}: {len(missing)} source records missing at the destination, "
                f"keys {missing[:10]}{' ...' if len(missing) > 10 else ''}"
            )
            assert first_seen == src_records, f"partition {partition}: destination order differs from the source"
        if not allow_duplicates:
            assert duplicates == 0, f"{duplicates} duplicated records at the destination"
        return {"records": sum(len(r) for r in source.values()), "duplicates": duplicates}
