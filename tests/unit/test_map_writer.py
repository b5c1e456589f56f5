"""worker/copying/map_writer.py: offset-map segments written before a commit, and written again when refused."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from ferry.common.core.offset_map import OffsetMap, Segment, parse_segment
from ferry.worker.copying.map_writer import OffsetMapWriter
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeProducer

KEY = (TOPIC, 0)


def _writer(*runs: tuple[range, range]) -> OffsetMapWriter:
    offsets = OffsetMap()
    writer = OffsetMapWriter(
        route_name="src.dst",
        destination_name=lambda topic: f"dst-{topic}",
        maps={KEY: offsets},
        metrics=WorkerMetrics(),
    )
    for source, destination in runs:
        offsets.record_run(list(source), list(destination))
    return writer


def _segments(producer: FakeProducer) -> list[Any]:
    return [parse_segment(*write) for write in producer.map_writes]


def test_changed_segments_are_written_keyed_by_the_destination_topic_and_acknowledged() -> None:
    producer = FakeProducer([], on_delivery=None)
    writer = _writer((range(0, 3), range(0, 3)), (range(5, 8), range(3, 6)))
    assert writer.write_and_wait(producer, None)
    assert [(where, segment) for where, _, segment in _segments(producer)] == [
        (("src.dst", f"dst-{TOPIC}", 0), Segment(0, 0, 3)),
        (("src.dst", f"dst-{TOPIC}", 0), Segment(5, 3, 3)),
    ]
    assert writer.write_and_wait(producer, None) and len(producer.map_writes) == 2  # nothing changed since


def test_only_the_keys_asked_for_are_written() -> None:
    producer = FakeProducer([], on_delivery=None)
    writer = _writer((range(0, 3), range(0, 3)))
    assert writer.write_and_wait(producer, [("other", 0)]) and producer.map_writes == []


def test_a_full_queue_leaves_every_unwritten_segment_for_the_next_round() -> None:
    producer = FakeProducer([], on_delivery=None)
    writer = _writer((range(0, 3), range(0, 3)), (range(5, 8), range(3, 6)))
    produce = producer.produce

    def full(topic: str, *args: Any, **kwargs: Any) -> None:
        raise BufferError("queue full")

    producer.produce = full  # type: ignore[method-assign]
    assert not writer.write_and_wait(producer, None)
    producer.produce = produce  # type: ignore[method-assign]
    assert writer.write_and_wait(producer, None)
    assert [s[2] for s in _segments(producer)] == [Segment(0, 0, 3), Segment(5, 3, 3)]


def test_a_failed_delivery_is_counted_and_written_again() -> None:
    producer = FakeProducer([], on_delivery=None)
    metrics = WorkerMetrics()
    offsets = OffsetMap()
    offsets.record_run([0, 1], [0, 1])
    writer = OffsetMapWriter(
        route_name="src.dst", destination_name=lambda topic: topic, maps={KEY: offsets}, metrics=metrics
    )
    producer.poll = lambda timeout: (
        [
            cb(KafkaError(KafkaError._MSG_TIMED_OUT), None)  # type: ignore[method-assign]
            for cb in producer.map_pending
        ]
        and 0
    )
    assert not writer.write_and_wait(producer, None)
    assert metrics.errors.labels("src.dst", "offset_map")._value.get() == 1
    del producer.poll
    producer.map_pending.clear()
    assert writer.write_and_wait(producer, None)
    assert len(producer.map_writes) == 2 and producer.map_writes[0] == producer.map_writes[1]  # the same segment again
