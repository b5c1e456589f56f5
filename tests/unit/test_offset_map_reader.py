"""The checkpoint job's offset-map reader (common/kafka/offset_map_reader.py) on an exactly-once
destination: the map's segments commit in the route's transactions, so the compacted map topic holds
transaction markers (offsets no reader is given), and a worker's transaction may be open there.

The fake consumer counts the reads that waited out their timeout: a refresh reads to the end by the
consumer's position, so it waits only for a fetch that brings something, never for records that will
not come."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, TopicPartition

from ferry.common.core.offset_map import MAP_TOPIC, Segment, segment_key, segment_value
from ferry.common.kafka import offset_map_reader
from ferry.common.kafka.offset_map_reader import OffsetMapReader

ROUTE, TOPIC = "src.dst", "orders"
MARKER = None  # a transaction marker in the map topic's log
# More reads that wait out their timeout than any refresh here needs: the fake gives up beyond it, so a
# reader that would wait until its deadline fails at once.
WAITS_ALLOWED = 20


class _Record:
    def __init__(self, offset: int, key: bytes, value: bytes | None) -> None:
        self._offset, self._key, self._value = offset, key, value

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes | None:
        return self._value


class MapTopic:
    """The map topic's one partition: ``log`` holds (key, value) records and markers; the records from
    ``open_from`` on belong to a transaction still open (the last stable offset is there)."""

    def __init__(self, log: list[tuple[bytes, bytes | None] | None], open_from: int | None = None) -> None:
        self.log = log
        self.open_from = open_from

    @property
    def high_watermark(self) -> int:
        return len(self.log)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark if self.open_from is None else self.open_from


class ReadCommittedConsumer:
    """A read_committed consumer of the map topic, as librdkafka's behaves for the reader: a fetch reads
    up to the last stable offset; markers are never returned, the position moves past those it served.
    A read with a timeout lets the next fetch arrive when nothing is queued; it ends once it has as many
    records as asked for, else it waits out its timeout (counted in ``waited_out``)."""

    def __init__(self, topic: MapTopic) -> None:
        self._topic = topic
        self._position = -1001  # nothing served yet (OFFSET_INVALID)
        self._fetched = 0  # the next offset to fetch
        self._queue: list[int] = []  # offsets fetched, not yet served
        self.waited_out = 0

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._fetched = 0 if partitions[0].offset < 0 else partitions[0].offset

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self._position) for tp in partitions]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        out = self._serve(num_messages)
        if len(out) < num_messages and timeout != 0 and not self._queue:
            self._fetch()
            out += self._serve(num_messages - len(out))
        if len(out) < num_messages and timeout != 0:
            self.waited_out += 1
            if self.waited_out > WAITS_ALLOWED:
                raise AssertionError(f"waited out the timeout of {self.waited_out} reads")
        return out

    def _fetch(self) -> None:
        end = self._topic.last_stable_offset
        self._queue += range(self._fetched, end)
        self._fetched = max(self._fetched, end)

    def _serve(self, most: int) -> list[Any]:
        out: list[Any] = []
        while self._queue and len(out) < most:
            offset = self._queue.pop(0)
            entry = self._topic.log[offset]
            if entry is not MARKER:
                out.append(_Record(offset, *entry))
            self._position = offset + 1
        return out

    def close(self) -> None:
        pass


class MapAdmin:
    """The destination's AdminClient as the reader asks it: the map topic's metadata and its ends (the last
    stable offset for a read_committed ListOffsets, else the high watermark)."""

    def __init__(self, topic: MapTopic) -> None:
        self._topic = topic

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        partitions = {0: SimpleNamespace(id=0)}
        return SimpleNamespace(topics={MAP_TOPIC: SimpleNamespace(partitions=partitions, error=None)})

    def list_offsets(self, request: dict[Any, Any], **options: Any) -> dict[Any, Any]:
        stable = options.get("isolation_level") == IsolationLevel.READ_COMMITTED
        end = self._topic.last_stable_offset if stable else self._topic.high_watermark
        return {tp: SimpleNamespace(result=lambda timeout: SimpleNamespace(offset=end)) for tp in request}


def _segment(segment: Segment) -> tuple[bytes, bytes]:
    return segment_key(ROUTE, TOPIC, 0, segment.dst_start), segment_value(segment)


def _reader(monkeypatch: pytest.MonkeyPatch, topic: MapTopic) -> tuple[OffsetMapReader, ReadCommittedConsumer]:
    consumer = ReadCommittedConsumer(topic)
    monkeypatch.setattr(offset_map_reader.kafka_clients, "consumer", lambda *args, **settings: consumer)
    monkeypatch.setattr(offset_map_reader.kafka_clients, "admin", lambda *args, **settings: MapAdmin(topic))
    return OffsetMapReader(cluster={}, client_id="test"), consumer


def test_a_refresh_reads_past_the_transaction_markers_to_the_end_without_waiting_out_a_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three transactions of the route, each extending the partition's segment, each with its marker (the
    # last one at the topic's end); then one more after the first refresh.
    first, longer, longest = Segment(0, 0, 10), Segment(0, 0, 20, (10,)), Segment(0, 0, 30, (10, 21))
    topic = MapTopic([_segment(first), MARKER, _segment(longer), MARKER, _segment(longest), MARKER])
    reader, consumer = _reader(monkeypatch, topic)

    reader.refresh()
    assert reader.segments(ROUTE, TOPIC, 0) == [longest]

    newest = Segment(0, 0, 40, (10, 21, 32))
    topic.log += [_segment(newest), MARKER]
    reader.refresh()
    assert reader.segments(ROUTE, TOPIC, 0) == [newest]
    assert consumer.waited_out == 0


def test_a_refresh_stops_at_an_open_transaction_of_the_map_with_what_was_committed_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker's transaction is open on the map topic (its segment is written, its commit not yet): a
    # read_committed reader gets nothing past the last stable offset until the transaction ends, so the
    # refresh ends there, with the segments of the committed transactions.
    committed, pending = Segment(0, 0, 10), Segment(0, 0, 20, (10,))
    topic = MapTopic([_segment(committed), MARKER, _segment(pending)], open_from=2)
    reader, consumer = _reader(monkeypatch, topic)

    reader.refresh()
    assert reader.segments(ROUTE, TOPIC, 0) == [committed]
    assert consumer.waited_out == 0

    topic.log.append(MARKER)  # the transaction commits
    topic.open_from = None
    reader.refresh()
    assert reader.segments(ROUTE, TOPIC, 0) == [pending]
    assert consumer.waited_out == 0


def test_a_refresh_of_an_empty_map_topic_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    reader, consumer = _reader(monkeypatch, MapTopic([]))
    reader.refresh()
    assert reader.partitions(ROUTE) == []
    assert consumer.waited_out == 0
