"""worker/copying/ledger.py: delivery runs settled when their last report arrives, proven by contiguous
destination offsets or settled only as far as their reports prove them; failures among them, the
offset maps they extend, the resume skip sets, the record age."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError

from ferry.common.core.offset_map import OffsetMap, Segment
from ferry.worker.copying.ledger import DeliveryLedger, DeliveryRun
from ferry.worker.errors import PartitionDeferred, PartitionStopped, ProducerFailed
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeMessage

KEY = (TOPIC, 0)
DESTINATION = f"dst.{TOPIC}"  # the route renames: reports name the destination topic
FAILED = -1001  # the offset librdkafka reports for a record it could not deliver


def _ledger(stops: list[tuple[Any, Any]], metrics: WorkerMetrics | None = None) -> DeliveryLedger:
    sources = {DESTINATION: TOPIC}
    return DeliveryLedger(
        route_name="src.dst",
        source_name=lambda topic: sources.get(topic, topic),
        stop=lambda key, failure: stops.append((key, failure)),
        metrics=metrics or WorkerMetrics(),
        wall_clock=lambda: 1_700_000_002.0,  # 2 s after FakeMessage's timestamps
    )


def _report(partition: int, destination_offset: int) -> FakeMessage:
    return FakeMessage(DESTINATION, partition, destination_offset)


def _destination_of(offsets: OffsetMap, source_offset: int) -> int | None:
    found = [d for d in (s.destination_of(source_offset) for s in offsets.segments()) if d is not None]
    return found[0] if found else None


def _run(
    ledger: DeliveryLedger,
    count: int,
    first: int,
    last: int,
    partition: int = 0,
    first_error: KafkaError | None = None,
    last_error: KafkaError | None = None,
) -> DeliveryRun:
    """A run of ``count`` records whose first and last landed at ``first`` and ``last`` (or failed)."""
    run = ledger.open_run()
    run.count = count
    if count > 1:
        run.on_first(first_error, _report(partition, FAILED if first_error else first))
    run.on_last(last_error, _report(partition, FAILED if last_error else last))
    return run


def test_a_run_at_contiguous_offsets_acknowledges_its_records_at_once_and_extends_the_map() -> None:
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12, 13])
    run = ledger.open_run()
    run.count = 3
    run.on_first(None, _report(0, 0))
    ledger.settle()
    assert ledger.committables() == {}  # the last report has not come
    run.on_last(None, _report(0, 2))
    assert ledger.committables() == {}  # queued, not applied yet
    ledger.settle()
    assert ledger.committables() == {KEY: 13} and ledger.in_flight() == 1
    assert ledger.maps[KEY].segments() == [Segment(10, 0, 3)]
    assert stops == [] and KEY not in ledger.exact


def test_another_writer_between_a_runs_ends_defers_the_partition_and_settles_only_the_ends() -> None:
    """Four records at destination 0..4: one of another writer's landed among them. The first and the
    last are where their reports say; the two between are not proven, so the watermark stays at the
    first of them and the partition restarts from the destination, settled record by record."""
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12, 13])
    _run(ledger, 4, 0, 4)
    ledger.settle()
    assert ledger.committables() == {KEY: 11} and ledger.in_flight() == 0
    assert _destination_of(ledger.maps[KEY], 10) == 0 and _destination_of(ledger.maps[KEY], 13) == 4
    assert _destination_of(ledger.maps[KEY], 11) is None and _destination_of(ledger.maps[KEY], 12) is None
    assert [key for key, _ in stops] == [KEY] and isinstance(stops[0][1], PartitionDeferred)
    assert "another writer" in str(stops[0][1])
    assert KEY in ledger.exact
    ledger.forget(KEY)
    assert KEY in ledger.exact  # still there when the partition is held again


def test_a_record_between_the_ends_that_failed_unreported_is_caught_by_the_offsets() -> None:
    """Three records, the middle one refused without a report of its own: the last landed right after
    the first, nearer than the run's length says."""
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12])
    _run(ledger, 3, 0, 1)
    ledger.settle()
    assert ledger.committables() == {KEY: 11}
    assert isinstance(stops[0][1], PartitionDeferred) and KEY in ledger.exact


def test_a_failed_record_between_the_ends_defers_the_partition_though_the_ends_look_contiguous() -> None:
    """Three records, the middle one refused, another writer's record where it would have landed."""
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12])
    run = ledger.open_run()
    run.count = 3
    run.on_first(None, _report(0, 0))
    run.on_between(KafkaError(KafkaError._MSG_TIMED_OUT), _report(0, FAILED))
    run.on_last(None, _report(0, 2))
    ledger.settle()
    assert ledger.committables() == {KEY: 11}
    assert _destination_of(ledger.maps[KEY], 11) is None and _destination_of(ledger.maps[KEY], 12) == 2
    assert isinstance(stops[0][1], PartitionDeferred) and "timed out" in str(stops[0][1]) and KEY in ledger.exact


def test_a_failed_first_record_stops_its_partition_with_its_offset_and_holds_the_watermark() -> None:
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12])
    _run(ledger, 3, 0, 1, first_error=KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    ledger.settle()
    assert [key for key, _ in stops] == [KEY]
    failure = stops[0][1]
    assert isinstance(failure, PartitionStopped) and "offset 10" in str(failure)
    assert ledger.committables() == {KEY: 10} and ledger.in_flight() == 0
    assert ledger.maps[KEY].segments() == [Segment(12, 1, 1)]  # the last, where its report put it


def test_a_failed_last_record_names_its_offset_and_the_unreported_ones_stay_uncommitted() -> None:
    stops: list[tuple[Any, Any]] = []
    ledger = _ledger(stops)
    ledger.resume(KEY, OffsetMap())
    ledger.sent(KEY, [10, 11, 12])
    _run(ledger, 3, 0, 0, last_error=KafkaError(KafkaError.MSG_SIZE_TOO_LARGE))
    ledger.settle()
    assert len(stops) == 1 and isinstance(stops[0][1], PartitionStopped) and "offset 12" in str(stops[0][1])
    assert ledger.committables() == {KEY: 11}
    assert ledger.maps[KEY].segments() == [Segment(10, 0, 1)]


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
    ledger.sent(KEY, [0])
    _run(ledger, 1, 0, 0, last_error=error)
    ledger.settle()
    assert len(stops) == 1 and isinstance(stops[0][1], kind)
    assert KEY not in ledger.exact  # a run of one hides nothing


def test_runs_of_several_partitions_settle_each_to_its_own_key() -> None:
    ledger = _ledger([])
    other = (TOPIC, 1)
    ledger.sent(KEY, [0, 1])
    ledger.sent(other, [5])
    first = ledger.open_run()
    first.count = 2
    first.on_first(None, _report(0, 0))
    _run(ledger, 1, 0, 0, partition=1)
    first.on_last(None, _report(0, 1))
    ledger.settle()
    assert ledger.committables() == {KEY: 2, other: 6}


def test_records_passed_or_already_written_between_a_runs_ends_do_not_count_in_it() -> None:
    """The copy loop sends 0, passes 1 (not for this route), skips 2 (already there), sends 3: a run of
    two records at contiguous destination offsets."""
    ledger = _ledger([])
    ledger.resume(KEY, OffsetMap(), skip=[2])
    ledger.sent(KEY, [0])
    ledger.passed(KEY, 1)
    assert ledger.settled_as_already_written(KEY, 2)
    ledger.sent(KEY, [3])
    _run(ledger, 2, 7, 8)
    ledger.settle()
    assert ledger.committables() == {KEY: 4} and ledger.in_flight() == 0
    assert _destination_of(ledger.maps[KEY], 0) == 7 and _destination_of(ledger.maps[KEY], 3) == 8


def test_the_record_age_is_observed_once_per_settled_run() -> None:
    metrics = WorkerMetrics()
    ledger = _ledger([], metrics)
    ledger.sent(KEY, [0, 1, 2])
    ledger.sent((TOPIC, 1), [0])
    _run(ledger, 2, 0, 1)
    _run(ledger, 1, 0, 0, partition=1)
    _run(ledger, 1, 2, 2)
    ledger.settle()
    assert metrics.registry.get_sample_value("ferry_worker_record_age_seconds_count", {"route": "src.dst"}) == 3


def test_offsets_already_on_the_destination_are_settled_once_and_the_skip_set_ends_past_its_highest() -> None:
    metrics = WorkerMetrics()
    ledger = _ledger([], metrics)
    ledger.resume(KEY, OffsetMap(), skip=[3, 5])
    assert KEY in ledger.skips
    assert ledger.settled_as_already_written(KEY, 3)
    assert not ledger.settled_as_already_written(KEY, 4) and KEY in ledger.skips  # 4 is copied
    ledger.sent(KEY, [4])  # copied, and acknowledged
    run = ledger.open_run()
    run.count = 1
    run.on_last(None, _report(0, 0))
    ledger.settle()
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
    ledger.sent(KEY, [0, 1])
    ledger.forget(KEY)
    assert KEY not in ledger.maps and KEY not in ledger.skips and ledger.in_flight() == 0


def test_a_partition_resumed_with_copies_to_skip_commits_only_once_it_may_commit_past_the_highest() -> None:
    """Committed 0; the destination holds 2 and 3 (an earlier owner's gap at 0-1). The refills of 0 and 1
    land after 2 and 3: committing 2 then would leave 2 and 3 above the commit yet older than the refills,
    where the next owner's look-back may not read them. So nothing is committable until past 3."""
    ledger = _ledger([])
    ledger.resume(KEY, OffsetMap(), skip=[2, 3])
    ledger.sent(KEY, [0, 1])
    _run(ledger, 2, 10, 11)
    ledger.settle()
    assert ledger.committables() == {}  # 2 is acknowledged-below, but 2 and 3 were to be skipped
    assert ledger.settled_as_already_written(KEY, 2)
    assert ledger.committables() == {}
    assert ledger.settled_as_already_written(KEY, 3)
    assert ledger.committables() == {KEY: 4}
    ledger.sent(KEY, [4])
    _run(ledger, 1, 12, 12)
    ledger.settle()
    assert ledger.committables() == {KEY: 5}  # as any partition from then on
