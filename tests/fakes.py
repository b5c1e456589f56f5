"""Fakes shared by the tests: one clock, Ferry's Kafka clients, as Ferry's own adapters hand them out.

Tests replace only Ferry's adapters (``common.kafka.clients``, the controller parts the REST layer
asks), never library internals. The Kafka fakes hand back plain messages, metadata and delivery
reports so the copy path, the watermark and the ERROR states can be checked without servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from ferry.common.core.offset_map import MAP_TOPIC

TOPIC = "orders"


class FakeClock:
    """A clock tests move by hand: call it for the time; ``sleep`` records the wait and moves it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeMessage:
    _topic: str
    _partition: int
    _offset: int
    _value: bytes = b"v"
    headers_: list[tuple[str, bytes]] | None = None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"1")] if self.headers_ is None else self.headers_

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self._offset)

    def error(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._value)


def metadata(partitions: int | None, topic: str = TOPIC) -> Any:
    """Cluster metadata with ``topic`` of ``partitions`` partitions (None: no such topic)."""
    topics = {} if partitions is None else {topic: SimpleNamespace(partitions=dict.fromkeys(range(partitions)), error=None)}
    return SimpleNamespace(topics=topics)


@dataclass
class FakeConsumer:
    calls: list[tuple[str, Any]]
    source_partitions: int | None = 2
    queue: list[FakeMessage] = field(default_factory=list)
    committed_offsets: dict[int, int] = field(default_factory=dict)
    destination: dict[int, list[Any]] = field(default_factory=dict)  # partition -> headers of each record
    reading: list[FakeMessage] | None = None

    def consume(self, num: int, timeout: float) -> list[FakeMessage]:
        if self.reading is not None:  # the look-back reader shares this fake
            batch, self.reading[:] = self.reading[:num], self.reading[num:]
            return batch
        batch, self.queue[:] = self.queue[:num], self.queue[num:]
        return batch

    def poll(self, timeout: float) -> FakeMessage | None:
        return self.queue.pop(0) if self.queue else None

    def list_topics(self, topic: str, timeout: float) -> Any:
        return metadata(self.source_partitions)

    def incremental_assign(self, tps: list[Any]) -> None:
        self.calls.append(("assign", sorted((tp.topic, tp.partition) for tp in tps)))

    def incremental_unassign(self, tps: list[Any]) -> None:
        self.calls.append(("unassign", sorted((tp.topic, tp.partition) for tp in tps)))

    def resume(self, tps: list[Any]) -> None:
        self.calls.append(("resume", sorted((tp.topic, tp.partition) for tp in tps)))

    def pause(self, tps: list[Any]) -> None:
        self.calls.append(("pause", sorted((tp.topic, tp.partition) for tp in tps)))

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.calls.append(("commit", sorted((tp.topic, tp.partition, tp.offset) for tp in offsets)))

    def close(self) -> None:
        self.calls.append(("close", None))

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, -1001)) for tp in tps]

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        # The destination partition, for the look-back: (low, high) of what the test put there.
        records = self.destination.get(tp.partition, [])
        return (0, len(records))

    def assign(self, tps: list[Any]) -> None:
        tp = tps[0]
        self.reading = [FakeMessage(tp.topic, tp.partition, o, headers_=h)
                        for o, h in enumerate(self.destination.get(tp.partition, [])) if o >= tp.offset]

    def unassign(self) -> None:
        self.reading = None


@dataclass
class FakeProducer:
    calls: list[tuple[str, Any]]
    on_delivery: Any
    pending: list[tuple[str, int, int]] = field(default_factory=list)
    fail: dict[tuple[str, int, int], KafkaError] = field(default_factory=dict)  # (topic, partition, nth produce) -> error
    produced: list[tuple[str, int, bytes]] = field(default_factory=list)
    map_writes: list[tuple[bytes, bytes]] = field(default_factory=list)
    delivered: dict[tuple[str, int], int] = field(default_factory=dict)  # next destination offset
    map_pending: list[Any] = field(default_factory=list)  # offset-map writes' delivery callbacks

    def produce(self, topic: str, value: bytes, key: bytes, partition: int = -1, timestamp: int = 0,
                headers: Any = None, on_delivery: Any = None) -> None:
        if topic == MAP_TOPIC:
            self.map_writes.append((key, value))
            self.map_pending.append(on_delivery)
            return
        self.produced.append((topic, partition, value))
        nth = sum(1 for t, p, _ in self.produced if (t, p) == (topic, partition))
        self.pending.append((topic, partition, nth))

    def poll(self, timeout: float) -> int:
        return self.flush(timeout)

    def flush(self, timeout: float) -> int:
        self.calls.append(("flush", len(self.pending)))
        pending, self.pending = self.pending, []
        map_pending, self.map_pending = self.map_pending, []
        for callback in map_pending:  # the offset map's writes are acknowledged like any record
            callback(None, None)
        for topic, partition, nth in pending:
            error = self.fail.pop((topic, partition, nth), None)
            offset = self.delivered.get((topic, partition), 0)
            if error is None:
                self.delivered[(topic, partition)] = offset + 1
            self.on_delivery(error, SimpleNamespace(topic=lambda t=topic: t, partition=lambda p=partition: p,
                                                    offset=lambda o=offset: o))
        return 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        return metadata(2)


class FakeAdmin:
    def __init__(self, destination_partitions: int | None) -> None:
        self.destination_partitions = destination_partitions
        self.max_message_bytes = 1_048_588
        self.created: list[tuple[str, int]] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        return metadata(self.destination_partitions)

    def describe_configs(self, resources: list[Any]) -> dict[Any, Any]:
        entries = {"max.message.bytes": SimpleNamespace(value=str(self.max_message_bytes))}
        return {r: SimpleNamespace(result=lambda timeout: entries) for r in resources}

    def create_topics(self, topics: list[Any]) -> dict[str, Any]:
        if topics[0].topic == MAP_TOPIC:
            self.map_topic_created = True
            return {MAP_TOPIC: SimpleNamespace(result=lambda timeout: None)}
        self.created.extend((t.topic, t.num_partitions) for t in topics)
        self.destination_partitions = topics[0].num_partitions
        return {t.topic: SimpleNamespace(result=lambda timeout: None) for t in topics}
