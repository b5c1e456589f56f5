"""The replicators under test, each started as processes of its own and measured from outside.

* :class:`Ceiling` -- ``python -m ferry.bench.ceiling``, one process per CPU (or ``ceiling-N``: N):
  bare librdkafka copy loops with Ferry's client settings, no replicator; the most these
  brokers take through these clients on this machine. ``stamped-copy`` and ``acked-copy`` (``-N``):
  the same loop with the provenance header, and also a delivery report per record: what Ferry's
  guarantees cost through the client alone.
* :class:`NativeCopy` -- ``native`` (``native-N``): the ceiling's loop compiled, ``bench/native/copy.c``
  against the librdkafka of the confluent-kafka wheel, with the same client settings and processes:
  what these brokers take through librdkafka with no Python in the loop.
* :class:`FerryWorkers` -- 1 or 2 ``ferry worker`` processes (``python -m ferry.cli worker``);
  the bench writes their assignments straight into ZooKeeper (``assignments/<id>``, generation
  1), as a controller would, so no controller runs and no rebalance delay is measured.
* :class:`MirrorMaker2` -- Apache Kafka's MirrorMaker 2 in dedicated mode
  (``org.apache.kafka.connect.mirror.MirrorMaker``) from ``.dev/jars/kafka``, one-way,
  identity topic names, ``tasks.max`` 1 or 2, every emitter and sync off; with its client
  defaults (``mm2-tN``) or tuned as its users tune it (``mm2-tuned-tN``: :data:`MM2_TUNED`).

Each one mirrors a topic to the same name on the destination, so the runner deletes the
destination topics between systems. Each run uses names of its own (ZooKeeper root, cluster
aliases, consumer groups), so no run resumes from another's offsets.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaException

from ferry.bench import workload
from ferry.bench.errors import BenchError
from ferry.common import allocator
from ferry.common.config import ZookeeperConfig
from ferry.common.kafka import clients as kafka_clients
from ferry.common.model import PartitionKey, PartitionState, WorkerAssignment, WorkerStatus
from ferry.common.paths import REPO_ROOT, jars_dir
from ferry.common.zk.layout import ZkLayout, make_client
from ferry.devstack import support
from ferry.devstack.server_files import LOG4J2_CONFIG
from ferry.devstack.stack import Stack
from ferry.devstack.support import Spawned, WaitTimeout, ferry_command, poll_until, stop_all

MM2_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
# As MirrorMaker 2's own launcher starts it: bin/connect-mirror-maker.sh sets the heap (KAFKA_HEAP_OPTS,
# -Xms256M -Xmx2G), kafka-run-class.sh the collector (KAFKA_JVM_PERFORMANCE_OPTS). A smaller heap ran
# out of memory under the tuned settings at 10 KiB (a poll of 10,000 records is about 100 MB).
MM2_JVM_OPTS = [
    "-Xms256m",
    "-Xmx2g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
]
# MirrorMaker 2 tuned the way its users tune it for throughput: larger fetches, more records per
# poll, larger producer batches that linger a little (no compression: nobody else compresses).
MM2_TUNED: dict[str, dict[str, str]] = {
    "consumer": {
        "max.poll.records": "10000",  # default 500
        "max.partition.fetch.bytes": "4194304",  # default 1 MiB
        "fetch.max.bytes": "67108864",  # default 50 MiB
        "receive.buffer.bytes": "1048576",  # default 64 KiB
    },
    "producer": {
        "linger.ms": "20",  # default 5
        "batch.size": "524288",  # default 16 KiB
        "buffer.memory": "134217728",  # default 32 MiB
        "max.request.size": "4194304",  # default 1 MiB
        "send.buffer.bytes": "1048576",  # default 128 KiB
    },
}
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 60.0
# Built by `make setup` (scripts/build-native-copy.sh); only the `native` system runs it.
NATIVE_COPY = Path(__file__).resolve().parent / "native" / "build" / "ferry-native-copy"


def spawn(name: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> Spawned:
    """A process of a system under test, started from the repository (``python -m ferry.bench...``)."""
    return support.spawn(name, command, log, env=env, cwd=REPO_ROOT)


class System:
    """One replicator under test; ``start``, measure ``pids()``, ``stop``, ``cleanup``."""

    name = "?"
    label = "?"

    def __init__(self, *, stack: Stack, workdir: Path, partitions: int, slug: str) -> None:
        self.stack = stack
        self.workdir = workdir
        self.partitions = partitions
        self.slug = slug
        self.processes: list[Spawned] = []
        self.source = {"bootstrap.servers": stack.bootstrap("src")}
        self.destination = {"bootstrap.servers": stack.bootstrap("dst")}

    def start(self, topics: list[str]) -> None:
        raise NotImplementedError

    def go(self, topics: list[str]) -> None:
        """Tells a started system to copy ``topics`` (the ones that start copying by themselves: no-op)."""

    def stop(self) -> None:
        stop_all(self.processes, timeout=_STOP_TIMEOUT_S)

    def cleanup(self) -> None:
        """Removes what this run left behind besides the topics (groups, ZooKeeper nodes)."""

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def copied(self, dst_admin: Any, topic: str) -> int:
        """How many records of ``topic`` the system copied so far: the destination's log-end offsets."""
        return support.records_in(dst_admin, topic)

    def produced(self, dst_admin: Any, topic: str) -> int:
        """What the destination's log-end offsets of ``topic`` count so far: the records the system
        produced there, and with transactions also their markers, committed or not."""
        return support.records_in(dst_admin, topic)

    def failure(self) -> str | None:
        """Why the system cannot finish (a process exited), or None."""
        for process in self.processes:
            if not process.alive():
                return f"{process.name} exited with status {process.returncode}; its log ends:\n{process.log_tail()}"
        return None

    def raise_if_failed(self) -> None:
        """:class:`BenchError` naming the process that exited, if one did (for wait conditions)."""
        problem = self.failure()
        if problem:
            raise BenchError(problem)

    def logs(self) -> list[str]:
        return [str(p.log) for p in self.processes]

    def _log(self, suffix: str) -> Path:
        return self.workdir / f"{self.slug}-{suffix}.log"


class Ceiling(System):
    """``processes`` bare copy processes (default: one per CPU), each a contiguous block of partitions.

    ``client_config`` (``{"consumer": {...}, "producer": {...}}``, the bench's ``--worker-config``)
    overrides the client settings on top of Ferry's defaults, as it does for Ferry's workers.
    ``variant``: ``ceiling``, or ``stamped-copy`` / ``acked-copy`` (the same loop with the
    provenance header, and also a delivery report per record; ``bench/ceiling.py``).
    """

    def __init__(
        self,
        *,
        stack: Stack,
        workdir: Path,
        partitions: int,
        slug: str,
        processes: int | None = None,
        client_config: dict[str, Any] | None = None,
        variant: str = "ceiling",
        compression: str = "none",
    ) -> None:
        super().__init__(stack=stack, workdir=workdir, partitions=partitions, slug=slug)
        self.variant = variant
        self.name = variant if processes is None else f"{variant}-{processes}"
        self.count = max(1, min(partitions, processes or len(os.sched_getaffinity(0))))
        processes_text = f"{self.count} process{'es' if self.count > 1 else ''}"
        self.label = {
            "ceiling": f"broker ceiling ({self.count} bare librdkafka copy {processes_text.split(' ', 1)[1]})",
            "stamped-copy": f"the ceiling's loop with the provenance header ({processes_text})",
            "acked-copy": (
                f"the ceiling's loop with the provenance header and a delivery report per record ({processes_text})"
            ),
        }[variant]
        self.flags = {"ceiling": [], "stamped-copy": ["--stamp"], "acked-copy": ["--stamp", "--reports"]}[variant]
        self.client_config = client_config or {}
        self.compression = compression

    def start(self, topics: list[str]) -> None:
        admin = workload.admin(self.destination)
        for topic in topics:
            workload.create_topic(admin, topic, self.partitions)
        for index in range(self.count):
            command = [
                sys.executable,
                "-m",
                "ferry.bench.ceiling",
                "--source",
                self.stack.bootstrap("src"),
                "--destination",
                self.stack.bootstrap("dst"),
                "--partitions",
                str(self.partitions),
                "--block",
                f"{index}/{self.count}",
                "--consumer-config",
                json.dumps(self.client_config.get("consumer") or {}),
                "--producer-config",
                json.dumps({"compression.type": self.compression, **(self.client_config.get("producer") or {})}),
                *self.flags,
                *topics,
            ]
            name = f"{self.variant}-{index + 1}"
            self.processes.append(spawn(name, command, self._log(name)))


class NativeCopy(System):
    """``processes`` ``ferry-native-copy`` processes (default: one per CPU), each a contiguous block of partitions.

    The ceiling's work with no Python in the loop (``bench/native/copy.c``): the same processes, blocks
    and client settings as :class:`Ceiling`'s, which this class computes here (Ferry's client defaults,
    the cluster, ``client_config``'s overrides, ``compression``) and hands to each process as librdkafka
    properties, so the program holds no defaults of its own.
    """

    def __init__(
        self,
        *,
        stack: Stack,
        workdir: Path,
        partitions: int,
        slug: str,
        processes: int | None = None,
        client_config: dict[str, Any] | None = None,
        compression: str = "none",
        program: Path = NATIVE_COPY,
    ) -> None:
        super().__init__(stack=stack, workdir=workdir, partitions=partitions, slug=slug)
        self.name = "native" if processes is None else f"native-{processes}"
        self.count = max(1, min(partitions, processes or len(os.sched_getaffinity(0))))
        self.label = f"native limit ({self.count} librdkafka copy process{'es' if self.count > 1 else ''} in C)"
        self.client_config = client_config or {}
        self.compression = compression
        self.program = program

    def consumer_settings(self) -> dict[str, str]:
        overrides = self.client_config.get("consumer") or {}
        return _properties({**kafka_clients.CONSUMER_DEFAULTS, **self.source, **overrides})

    def producer_settings(self) -> dict[str, str]:
        overrides = self.client_config.get("producer") or {}
        return _properties(
            {**kafka_clients.PRODUCER_DEFAULTS, **self.destination, "compression.type": self.compression, **overrides}
        )

    def command(self, index: int, topics: list[str]) -> list[str]:
        """The command line of the ``index``-th process (of :attr:`count`)."""
        settings = [f"-c{k}={v}" for k, v in self.consumer_settings().items()]
        settings += [f"-p{k}={v}" for k, v in self.producer_settings().items()]
        return [
            str(self.program),
            "--partitions",
            str(self.partitions),
            "--block",
            f"{index}/{self.count}",
            *settings,
            "--",
            *topics,
        ]

    def start(self, topics: list[str]) -> None:
        if not os.access(self.program, os.X_OK):
            raise BenchError(f"no {self.program}: run `make setup` (or `make native`) to build it")
        admin = workload.admin(self.destination)
        for topic in topics:
            workload.create_topic(admin, topic, self.partitions)
        for index in range(self.count):
            name = f"native-{index + 1}"
            # glibc's thresholds as a worker sets them by default (common.allocator): the loops alone differ.
            self.processes.append(spawn(name, self.command(index, topics), self._log(name), allocator.environment()))


def _properties(settings: dict[str, Any]) -> dict[str, str]:
    """librdkafka properties as text: booleans as ``true``/``false``, as librdkafka spells them."""
    return {k: (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in settings.items()}


class FerryWorkers(System):
    """``workers`` Ferry worker processes; partitions split in contiguous blocks (0-3 and 4-7 for 2)."""

    def __init__(
        self,
        *,
        stack: Stack,
        workdir: Path,
        partitions: int,
        slug: str,
        workers: int,
        worker_config: dict[str, Any] | None = None,
        compression: str = "none",
        exactly_once: bool = False,
    ) -> None:
        super().__init__(stack=stack, workdir=workdir, partitions=partitions, slug=slug)
        self.workers = workers
        self.exactly_once = exactly_once
        self.compression = compression
        self.worker_config = worker_config or {}
        self.name = f"ferry-{'eos-' if exactly_once else ''}{workers}w"
        self.label = (
            f"Ferry{' exactly once' if exactly_once else ''}, {workers} worker process{'es' if workers > 1 else ''}"
        )
        self.layout = ZkLayout(f"/ferry-bench/{slug}")
        # A destination cluster name of its own gives the route a consumer group of its own.
        self.destination_name = f"dst-{slug}"
        self.route = f"src.{self.destination_name}"
        self.ids = [f"bench-w{i + 1}" for i in range(workers)]
        self._zk: Any = None
        self._committed_reader: Any = None

    def config(self) -> dict[str, Any]:
        return {
            "zookeeper": {"connect": self.stack.zookeeper.address, "root": self.layout.root},
            "clusters": {"src": dict(self.source), self.destination_name: dict(self.destination)},
            "routes": [
                {
                    "source": "src",
                    "destination": self.destination_name,
                    "compression": self.compression,
                    "delivery_guarantee": "exactly_once" if self.exactly_once else "at_least_once",
                }
            ],
            "worker": {**self.worker_config, "metrics_port": 0},
        }

    def start(self, topics: list[str]) -> None:
        config_path = self.workdir / f"{self.slug}-ferry.yaml"
        config_path.write_text(yaml.safe_dump(self.config()))
        self._zk = make_client(ZookeeperConfig(connect=self.stack.zookeeper.address))
        self._zk.start(timeout=15)
        for path in self.layout.persistent_paths():
            self._zk.ensure_path(path)
        for worker_id in self.ids:
            command = ferry_command(
                "--log-level",
                "WARNING",
                "worker",
                "--config",
                str(config_path),
                "--id",
                worker_id,
                "--metrics-port",
                "0",
            )
            self.processes.append(spawn(worker_id, command, self._log(worker_id)))

        def registered() -> bool:
            self.raise_if_failed()
            return all(self._zk.exists(self.layout.live_worker(w)) for w in self.ids)

        poll_until(registered, _START_TIMEOUT_S, "the Ferry workers to register")

    def copied(self, dst_admin: Any, topic: str) -> int:
        """Exactly once: the source offsets the route committed, which follow each committed transaction
        (the destination's log-end offsets also count the transactions' markers, and records of
        transactions still open: :meth:`produced`)."""
        if not self.exactly_once:
            return super().copied(dst_admin, topic)
        from confluent_kafka import TopicPartition

        from ferry.common.kafka import clients as kafka_clients

        if self._committed_reader is None:
            self._committed_reader = kafka_clients.consumer(self.source, f"ferry.{self.route}")
        try:
            offsets = self._committed_reader.committed(
                [TopicPartition(topic, p) for p in range(self.partitions)], timeout=10
            )
        except KafkaException:
            return 0
        return sum(max(0, tp.offset) for tp in offsets)

    def go(self, topics: list[str]) -> None:
        """Writes each worker's assignment (generation 1): its block of partitions of every topic."""
        for index, worker_id in enumerate(self.ids):
            block = [p for p in range(self.partitions) if p * self.workers // self.partitions == index]
            keys = frozenset(PartitionKey(self.route, t, p) for t in topics for p in block)
            self._zk.create(self.layout.assignment(worker_id), WorkerAssignment(1, keys).to_bytes(), makepath=True)

    def stop(self) -> None:
        if self._zk is not None and self._zk.connected:
            # Empty assignments first: the workers release (flush, commit) and SIGTERM need not
            # wait for a controller that does not exist.
            for worker_id in self.ids:
                with contextlib.suppress(Exception):
                    self._zk.set(self.layout.assignment(worker_id), WorkerAssignment(2).to_bytes())
            with contextlib.suppress(WaitTimeout):  # stopped by signal below, then
                poll_until(
                    lambda: all(self._released(w) for w in self.ids) or self.failure(),
                    30,
                    "the workers to release their partitions",
                )
        super().stop()

    def online(self) -> int:
        """How many partitions the workers report ONLINE in their status nodes."""
        count = 0
        for worker_id in self.ids:
            try:
                data, _ = self._zk.get(self.layout.worker_state(worker_id))
            except Exception:
                continue
            count += WorkerStatus.from_bytes(data).state_counts()[PartitionState.ONLINE]
        return count

    def _released(self, worker_id: str) -> bool:
        try:
            data, _ = self._zk.get(self.layout.worker_state(worker_id))
        except Exception:
            return True
        status = WorkerStatus.from_bytes(data)
        return status.generation >= 2 and not status.partitions

    def cleanup(self) -> None:
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.delete(self.layout.root, recursive=True)
            self._zk.stop()
            self._zk.close()
            self._zk = None
        group = f"ferry.{self.route}"
        admin = workload.admin(self.source)
        with contextlib.suppress(KafkaException):
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


class MirrorMaker2(System):
    """MirrorMaker 2 dedicated mode; cluster aliases unique per run, so its internal topics are too."""

    def __init__(
        self, *, stack: Stack, workdir: Path, partitions: int, slug: str, tasks: int, tuned: bool = False
    ) -> None:
        super().__init__(stack=stack, workdir=workdir, partitions=partitions, slug=slug)
        self.tasks = tasks
        self.tuned = tuned
        self.name = f"mm2-tuned-t{tasks}" if tuned else f"mm2-t{tasks}"
        self.label = f"MirrorMaker 2{' tuned' if tuned else ''}, tasks.max={tasks}"
        token = slug.replace("-", "")
        self.src_alias = f"src{token}"
        self.dst_alias = f"dst{token}"

    def properties(self, topics: list[str]) -> dict[str, str]:
        s, d = self.src_alias, self.dst_alias
        tuned: dict[str, str] = {}
        if self.tuned:
            # <source>.consumer.* reaches the source connector's consumer, <target>.producer.* the
            # Connect worker's producers for the target, which the source tasks use.
            tuned.update({f"{s}.consumer.{k}": v for k, v in MM2_TUNED["consumer"].items()})
            tuned.update({f"{d}.producer.{k}": v for k, v in MM2_TUNED["producer"].items()})
        return {
            "clusters": f"{s}, {d}",
            f"{s}.bootstrap.servers": self.stack.bootstrap("src"),
            f"{d}.bootstrap.servers": self.stack.bootstrap("dst"),
            f"{s}->{d}.enabled": "true",
            f"{d}->{s}.enabled": "false",
            # Topic names are regular expressions; the bench's names hold no regex metacharacters.
            f"{s}->{d}.topics": ",".join(topics),
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
            "tasks.max": str(self.tasks),
            # Only the data path: no heartbeats, checkpoints, offset syncs, group/config/ACL syncs.
            "emit.heartbeats.enabled": "false",
            "emit.checkpoints.enabled": "false",
            "emit.offset-syncs.enabled": "false",
            "sync.group.offsets.enabled": "false",
            "sync.topic.configs.enabled": "false",
            "sync.topic.acls.enabled": "false",
            "refresh.groups.enabled": "false",
            # One broker per cluster. (No offset-syncs.* setting: with offset syncs off MM2 rejects it.)
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "dedicated.mode.enable.internal.rest": "false",
            **tuned,
        }

    def start(self, topics: list[str]) -> None:
        folder = jars_dir("kafka")
        if not any(folder.glob("connect-mirror-*.jar")):
            raise BenchError(f"no connect-mirror jar in {folder}: run `make setup` (deploy/pom.xml fetches it)")
        props = self.workdir / f"{self.slug}-mm2.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.properties(topics).items()))
        log = self._log("mm2")
        command = [
            "java",
            *MM2_JVM_OPTS,
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dferry.log.file={log}",
            "-cp",
            f"{folder}/*",
            MM2_MAIN,
            str(props),
        ]
        self.processes.append(spawn(self.name, command, self._log("mm2-stdout")))

    def cleanup(self) -> None:
        # MM2's Connect worker keeps offsets, configs and status in topics named after the aliases.
        for cluster in (self.source, self.destination):
            admin = workload.admin(cluster)
            mine = [t for t in admin.list_topics(timeout=10).topics if self.src_alias in t or self.dst_alias in t]
            with contextlib.suppress(BenchError):
                workload.delete_topics(admin, mine)
        admin = workload.admin(self.destination)
        group = f"{self.src_alias}-mm2"
        with contextlib.suppress(KafkaException):
            admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
