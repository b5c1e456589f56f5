"""The soak's records: Kafka's own ``VerifiableProducer`` writing to the source, and reading them back.

:class:`Stream` runs the producer at a steady rate until stopped and keeps what the source
acknowledged (its ``producer_send_success`` events: partition, offset and value; the values are
the producer's own sequence numbers, unique in a run, kept as integers in arrays: an hour at 2,000
records/s is 7.2 million of them). :func:`read_values` reads a topic back from its start with a
given ``isolation.level``.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import threading
import time
import uuid
from array import array
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from ferry.bench.errors import BenchError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import kafka_tool_command

# The soak's own clients (reading offsets, reading back) log nothing: the faults make them complain on purpose.
QUIET = logging.getLogger("ferry.bench.soak.clients")
QUIET.setLevel(logging.CRITICAL + 1)
QUIET.propagate = False


class Stream:
    """``VerifiableProducer`` at ``rate`` records/s (acks=all) to ``topic`` until :meth:`stop`.

    States: RUNNING (``start``) -> STOPPED (``stop``: SIGTERM; the tool flushes what it holds, reports
    it and exits). The events are read by a thread of its own while it runs.
    """

    def __init__(self, *, bootstrap: str, topic: str, rate: int, log: Path) -> None:
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
        # Partition -> the acknowledged offsets and values, in the order the acknowledgements came.
        self._offsets: dict[int, array[int]] = defaultdict(lambda: array("q"))
        self._values: dict[int, array[int]] = defaultdict(lambda: array("q"))
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
                    partition = int(event["partition"])
                    self._offsets[partition].append(int(event["offset"]))
                    self._values[partition].append(int(event["value"]))
                elif name == "producer_send_error":
                    self.failed += 1

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def acked_count(self) -> int:
        with self._lock:
            return sum(len(values) for values in self._values.values())

    def acked(self) -> dict[int, Sequence[int]]:
        """Partition -> the acknowledged values in source (offset) order."""
        acked: dict[int, Sequence[int]] = {}
        with self._lock:
            for partition, offsets in self._offsets.items():
                values = self._values[partition]
                if all(offsets[i] < offsets[i + 1] for i in range(len(offsets) - 1)):
                    acked[partition] = array("q", values)
                else:
                    acked[partition] = array("q", (v for _, v in sorted(zip(offsets, values, strict=True))))
        return acked

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
) -> dict[int, array[int]]:
    """Partition -> every value of ``topic`` on ``cluster`` in offset order, read from the start up to
    each partition's end (as ``isolation`` sees it: ``read_committed`` stops at the last stable offset).
    A value is the integer its text says (VerifiableProducer's), -1 when it says none."""
    consumer = kafka_clients.consumer(
        cluster,
        f"ferry-soak-read-{uuid.uuid4().hex[:8]}",
        **{"isolation.level": isolation, "enable.partition.eof": True, "logger": QUIET},
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    values: dict[int, array[int]] = {p: array("q") for p in range(partitions)}
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
                values[partition].append(_number(raw))
                at_end.discard(partition)
    finally:
        consumer.close()
    return values


def _number(raw: bytes | None) -> int:
    try:
        return int(raw or b"")
    except ValueError:
        return -1
