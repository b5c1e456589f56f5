"""An unplanned failover's RPO on an exactly-once destination: where the newest copy from the source
is (controller/failover/kafka_side.py), read past the route's transaction markers."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition

from ferry.common.core import provenance
from ferry.controller.failover.kafka_side import FailoverKafka

TOPIC = "orders"


class _Record:
    def __init__(self, offset: int, headers: list[tuple[str, bytes | None]]) -> None:
        self._offset, self._headers = offset, headers

    def error(self) -> None:
        return None

    def offset(self) -> int:
        return self._offset

    def headers(self) -> list[tuple[str, bytes | None]]:
        return self._headers


class ReadCommittedPartition:
    """A read_committed consumer of one destination partition. ``log``: per offset, the headers of the
    record there, or None for a transaction marker. Like Kafka's, it never returns a marker, and its
    position moves past the markers it reads over; it counts the reads asked for at the log end."""

    def __init__(self, log: list[list[tuple[str, bytes | None]] | None]) -> None:
        self._log = log
        self._position = 0
        self.reads_at_the_end = 0

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._position = partitions[0].offset

    def unassign(self) -> None:
        pass

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        if self._position >= len(self._log):
            self.reads_at_the_end += 1
            return []
        out: list[Any] = []
        while self._position < len(self._log) and len(out) < num_messages:
            headers = self._log[self._position]
            if headers is not None:
                out.append(_Record(self._position, headers))
            self._position += 1
        return out

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, self._position) for tp in partitions]


def _copy(source: str, source_offset: int) -> list[tuple[str, bytes | None]]:
    return [(provenance.HEADER, provenance.encode([source], 0, source_offset, TOPIC))]


def test_the_newest_copy_is_found_reading_to_the_partitions_end_past_its_last_transaction_marker() -> None:
    # Two transactions of the route (copies of source offsets 100-103 and 104-107), each with its marker,
    # the last marker at the partition's end.
    log = [*(_copy("src", 100 + n) for n in range(4)), None, *(_copy("src", 104 + n) for n in range(4)), None]
    consumer = ReadCommittedPartition(log)
    found = FailoverKafka._last_copy(consumer, TopicPartition(TOPIC, 0), 0, len(log), "src")
    assert found == 107
    assert consumer.reads_at_the_end == 0  # it stops at the end, not when its deadline passes


def test_a_window_of_markers_and_foreign_records_only_is_passed_over_for_the_copies_below() -> None:
    log = [*(_copy("src", n) for n in range(3)), None, [("app", b"x")], None]
    consumer = ReadCommittedPartition(log)
    assert FailoverKafka._last_copy(consumer, TopicPartition(TOPIC, 0), 0, len(log), "src") == 2
    assert consumer.reads_at_the_end == 0


def test_a_newest_copy_of_an_exactly_once_route_leaves_the_last_copy_to_the_offset_map() -> None:
    # Version 3 headers say no source offset: the map, committed with the copies, is exact, so the
    # look for the last copy stops at the first window holding one rather than read the whole partition.
    transactional = [(provenance.HEADER, provenance.encode(["src"], 0, None, TOPIC))]
    log = [*(_copy("src", n) for n in range(600)), None, *([transactional] * 3), None]
    consumer = ReadCommittedPartition(log)
    assert FailoverKafka._last_copy(consumer, TopicPartition(TOPIC, 0), 0, len(log), "src") is None
    assert consumer.reads_at_the_end == 0
