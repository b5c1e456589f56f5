"""worker/copying/ledger.py: delivery reports queued by the producer's callback and settled per run,
failures among them, the offset maps they extend, the resume skip sets, the record age."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from ferry.common.core.offset_map import OffsetMap, Segment
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.errors import PartitionDeferred, PartitionStopped, ProducerFailed
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeMessage

KEY = (TOPIC, 0)
DESTINATION = f"dst.{TOPIC}"  # the route renames: reports name the destination topic


def _ledger(stops: list[tuple[Any, Any]], metrics: WorkerMetrics | None = None) -> DeliveryLedger:
    sources = {DESTINATION: TOPIC}
    return DeliveryLedger(
        "src.dst",
        lambda topic: sources.get(topic, topic),
        lambda key, failure: stops.append((key, failure)),
        metrics or WorkerMetrics(),
        lambda: 1_700_000_002.0,  # 2 s after FakeMessage's timestamps
    )


def _report(partition: int, destination_offset: int) -> FakeMessage:
    return FakeMessage(DESTINATION, partition, destination_offset)


def test_a_run_of_successes_acknowledges_the_oldest_offsets_in_flight_and_extends_the_map() -> None:
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.watermarks.sent_run(KEY, [10, 11, 12])
    for destination_offset in (0, 1):
        ledger.on_delivery(None, _report(0, destination_offset))
    assert ledger.committables() == {} and ledger.watermarks.in_flight() == 3  # queued, not applied yet
    ledger.settle()
    assert ledger.committables() == {KEY: 12} and ledger.in_flight() == 1
    assert ledger.maps[KEY].segments() == [Segment(10, 0, 2)]
    assert stops == []


def test_a_failure_stops_its_partition_in_its_place_among_the_successes() -> None:
    """Reports 10 ok, 11 refused for good, 12 ok: the watermark stays at 11, both successes are
    in the map, and the partition is stopped with the failed offset in its reason."""
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.watermarks.sent_run(KEY, [10, 11, 12])
    ledger.on_delivery(None, _report(0, 0))
    ledger.on_delivery(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), _report(0, -1))
    ledger.on_delivery(None, _report(0, 1))
    ledger.settle()
    assert [key for key, _ in stops] == [KEY]
    failure = stops[0][1]
    assert isinstance(failure, PartitionStopped) and "offset 11" in str(failure)
    assert ledger.committables() == {KEY: 11} and ledger.in_flight() == 0
    assert ledger.maps[KEY].segments() == [Segment(10, 0, 1), Segment(12, 1, 1)]


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (KafkaError(KafkaError._MSG_TIMED_OUT), PartitionDeferred),
        (KafkaError(KafkaError._FATAL, fatal=True), ProducerFailed),
    ],
)
def test_what_a_failure_means_is_handed_to_the_stop(error: KafkaError, kind: type[Exception]) -> None:
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.watermarks.sent_run(KEY, [0])
    ledger.on_delivery(error, _report(0, -1))
    ledger.settle()
    assert len(stops) == 1 and isinstance(stops[0][1], kind)


def test_runs_of_several_partitions_settle_each_to_its_own_key() -> None:
    ledger = _ledger([])
    other = (TOPIC, 1)
    ledger.watermarks.sent_run(KEY, [0, 1])
    ledger.watermarks.sent_run(other, [5])
    for report in (_report(0, 0), _report(1, 0), _report(0, 1)):
        ledger.on_delivery(None, report)
    ledger.settle()
    assert ledger.committables() == {KEY: 2, other: 6}


def test_the_record_age_is_observed_once_per_settled_run() -> None:
    metrics = WorkerMetrics()
    ledger = _ledger([], metrics)
    ledger.watermarks.sent_run(KEY, [0, 1, 2])
    ledger.watermarks.sent_run((TOPIC, 1), [0])
    for report in (_report(0, 0), _report(0, 1), _report(1, 0), _report(0, 2)):
        ledger.on_delivery(None, report)
    ledger.settle()
    assert metrics.registry.get_sample_value("ferry_worker_record_age_seconds_count", {"route": "src.dst"}) == 3


def test_offsets_already_on_the_destination_are_settled_once_and_the_skip_set_ends_past_its_highest() -> None:
    metrics = WorkerMetrics()
    ledger = _ledger([], metrics)
    ledger.resume(KEY, OffsetMap(), skip=[3, 5])
    assert KEY in ledger.skips
    assert ledger.settled_as_already_written(KEY, 3)
    assert not ledger.settled_as_already_written(KEY, 4) and KEY in ledger.skips  # 4 is copied
    ledger.watermarks.sent(KEY, 4)
    ledger.watermarks.acked(KEY, 4)
    assert ledger.settled_as_already_written(KEY, 5) and KEY not in ledger.skips  # the last one: the set ends
    assert ledger.committables() == {KEY: 6}
    assert metrics.resume_skipped.labels("src.dst")._value.get() == 2


def test_a_skip_set_is_dropped_once_the_copy_passes_its_highest_offset() -> None:
    ledger = _ledger([])
    ledger.resume(KEY, OffsetMap(), skip=[3])
    assert not ledger.settled_as_already_written(KEY, 7)
    assert KEY not in ledger.skips


def test_forget_drops_the_watermark_the_map_and_the_skip_set() -> None:
    ledger = _ledger([])
    ledger.resume(KEY, OffsetMap(), skip=[9])
    ledger.watermarks.sent_run(KEY, [0, 1])
    ledger.forget(KEY)
    assert KEY not in ledger.maps and KEY not in ledger.skips and ledger.in_flight() == 0
