"""The soak's records: Kafka's own ``VerifiableProducer`` writing to the source, and reading them back.

:class:`Stream` runs the producer at a steady rate until stopped and keeps what the source
acknowledged (its ``producer_send_success`` events: partition, offset and value; the values are
the producer's own sequence numbers, unique in a run). :func:`read_values` reads a topic back from
its start with a given ``isolation.level``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from ferry.bench.errors import BenchError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import kafka_tool_command


class Stream:
    """``VerifiableProducer`` at ``rate`` records/s (acks=all) to ``topic`` until :meth:`stop`.

    States: RUNNING (``start``) -> STOPPED (``stop``: SIGTERM; the tool flushes what it holds, reports
    it and exits). The events are read by a thread of its own while it runs.
    """

    def __init__(self, bootstrap: str, topic: str, rate: int, log: Path) -> None:
        self.command = kafka_tool_command(
            "VerifiableProducer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--throughput",
            str(rate),
            "--acks",
            "-1",
        )
        self.log = log
        self._acked: dict[int, list[tuple[int, str]]] = defaultdict(list)
        self.failed = 0
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        with open(self.log, "ab") as errors:
            self._process = subprocess.Popen(
                self.command, stdout=subprocess.PIPE, stderr=errors, stdin=subprocess.DEVNULL, text=True
            )
        self._reader = threading.Thread(target=self._read, name="verifiable-producer-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            if not line.startswith("{"):
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            name = event.get("name")
            with self._lock:
                if name == "producer_send_success":
                    self._acked[int(event["partition"])].append((int(event["offset"]), str(event["value"])))
                elif name == "producer_send_error":
                    self.failed += 1

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(values) for values in self._acked.values())

    def acked(self) -> dict[int, list[str]]:
        """Partition -> the acknowledged values in source (offset) order."""
        with self._lock:
            return {p: [value for _, value in sorted(records)] for p, records in self._acked.items()}

    def stop(self, timeout: float = 120.0) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(30)
        if self._reader is not None:
            self._reader.join(30)


def read_values(
    cluster: Mapping[str, Any],
    topic: str,
    partitions: int,
    isolation: str,
    timeout: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
) -> dict[int, list[str]]:
    """Partition -> every value of ``topic`` on ``cluster`` in offset order, read from the start up to
    each partition's end (as ``isolation`` sees it: ``read_committed`` stops at the last stable offset)."""
    consumer = kafka_clients.consumer(
        cluster,
        f"ferry-soak-read-{uuid.uuid4().hex[:8]}",
        **{"isolation.level": isolation, "enable.partition.eof": True},
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: dict[int, list[str]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = clock() + timeout
    try:
        while len(at_end) < partitions:
            if clock() > deadline:
                missing = sorted(set(range(partitions)) - at_end)
                raise BenchError(f"{topic}: partitions {missing} not read to their end within {timeout:.0f}s")
            for message in consumer.consume(10_000, timeout=1.0):
                error, partition = message.error(), message.partition()
                if partition is None:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        at_end.add(partition)
                    continue
                raw = message.value()
                values[partition].append(raw.decode(errors="replace") if raw is not None else "")
                at_end.discard(partition)
    finally:
        consumer.close()
    return values
