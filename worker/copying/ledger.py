"""What a route copier sent and what the destination acknowledged: the watermark, the delivery
reports and the offset maps they extend.

Source offsets are committed only up to the lowest offset the destination has not acknowledged yet
(:class:`common.core.watermark.OffsetWatermarks`), so a crash copies some records again and loses
none.

Delivery reports come per run, not per record. The copy loop hands the producer each partition's
records of a batch as a :class:`DeliveryRun`: only the run's first and last record carry a Python
delivery callback (a run of one record carries one). An idempotent or transactional producer delivers
and reports a partition's records in produce order, so when both reports are successes and the last
record landed ``count - 1`` offsets after the first, and none of the records between failed, nothing
else was written between them: the run's records are acknowledged at those destination offsets in one
step (the watermark's oldest offsets in flight, and one run of the partition's exact offset map,
:mod:`common.core.offset_map`).

The records between the ends must be known not to have failed: contiguous offsets alone do not prove
it, since another writer's record may land where a failed one of the run would have (a failed record
takes no offset). On an at-least-once route each of them carries the run's failure catcher
(:attr:`DeliveryRun.on_between`, a C-level callable: no Python frame per record); on an exactly-once
route they carry nothing, because a failed record fails the open transaction, which is then aborted
with every copy and map segment in it (:mod:`worker.copying.committer`).

A record the destination may refuse on its own (one too large travels alone in its producer batch) is
a run of its own, so such a refusal names its offset at once.

Otherwise the run is settled only as far as its reports prove it:

- a failed report fails its record's source offset and stops the partition as that failure means
  (:func:`worker.errors.delivery_failure`: a record the destination will never accept, such as one too
  large, stops it for good with that offset named);
- a failed record between the ends, or another writer's records between Ferry's on the destination
  partition (active-active: the last offset is further from the first than ``count - 1``): the first
  and the last record are acknowledged where their reports put them, the records between are failed
  (the watermark stays below them), and the partition is stopped for a temporary reason. It restarts
  from the destination's own record of progress, whose look-back reads the provenance header of every
  record there, so nothing is mapped, committed or skipped that is not proven. From then on the
  partition is settled record by record (:attr:`DeliveryLedger.exact`): every record is a run of its
  own, so a failed one is named by its own offset.

A run's reports are applied when its last one arrives (:meth:`DeliveryLedger.settle`), runs in the
order their last reports arrived, which is produce order within a partition.

States of a record the copier handles::

    SENT (the copy loop marks it) --its run proven--> ACKNOWLEDGED (in the offset map)
    SENT --its own report a success, its run not proven--> ACKNOWLEDGED (in the offset map)
    SENT --its own report a failure, or not proven (no report)--> FAILED (the watermark stays below it;
        its partition stops)
    (not sent) --passed (not for this route, or gone from the source)--> settled at once
    (not sent) --already on the destination (the resume rule's skip set)--> settled at once

and of a run: OPEN (the copy loop adds records) --closed (its count fixed, its last record handed
over)--> CLOSED --its last report--> QUEUED --settle--> applied. When the producer refuses one of a
run's records (its partition stops), the records handed over before it are settled once delivered, as
far as their reports prove (:meth:`DeliveryLedger.settle_cut_short`).

Driven by the copier's one thread (the worker's copy loop); the callbacks run inside ``poll`` and
``flush`` on that thread, so no state here needs a lock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError

from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.watermark import OffsetWatermarks
from ferry.common.kafka.errors import kafka_error
from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.errors import (
    RETRY_BACKOFF_S,
    PartitionDeferred,
    PartitionStopped,
    ProducerFailed,
    delivery_failure,
)
from ferry.worker.metrics import WorkerMetrics

# What a failed delivery does to its partition: the copier stops it (and with a fatal error, the producer).
StopPartition = Callable[[TopicPartitionKey, PartitionStopped | PartitionDeferred | ProducerFailed], None]

# The watermark's reason for a record between a run's first and last that no report proves.
UNPROVEN = "not proven delivered: no report of its own, and its run's offsets are not contiguous"


class DeliveryRun:
    """A run of one partition's records handed to the producer in a row: its first record's callback
    is :meth:`on_first`, its last's :meth:`on_last` (a run of one: only :meth:`on_last`), and on an
    at-least-once route the records between carry :attr:`on_between`.

    :meth:`DeliveryLedger.closed` sets ``count`` (how many records the run holds) and ``size`` (their
    value bytes) once the copy loop handed over its last record.
    """

    __slots__ = ("_completed", "between", "count", "first", "first_error", "on_between", "size")

    def __init__(self, completed: list[tuple[DeliveryRun, KafkaError | None, Any]]) -> None:
        self._completed = completed
        self.count = 0
        self.size = 0
        self.first: Any = None
        self.first_error: KafkaError | None = None
        # The records between the ends: their reports by error (None: a success), newest kept. A C-level
        # callback (the dict's own __setitem__): no Python frame per record, and a failed one is seen.
        self.between: dict[KafkaError | None, Any] = {}
        self.on_between: Callable[[KafkaError | None, Any], None] = self.between.__setitem__

    def on_first(self, error: KafkaError | None, message: Any) -> None:
        """The first record's delivery callback: keeps its report until the last one arrives."""
        self.first_error = error
        self.first = message

    def on_last(self, error: KafkaError | None, message: Any) -> None:
        """The last record's delivery callback: queues the run for :meth:`DeliveryLedger.settle`."""
        self._completed.append((self, error, message))


class DeliveryLedger:
    """One route's watermark, queued delivery reports, offset maps and resume skip sets.

    The ledger owns the watermark (:class:`common.core.watermark.OffsetWatermarks`): the others say
    what happened to a source offset through its verbs (:meth:`sent`, :meth:`passed`, :meth:`failed`,
    :meth:`start_at`), and read it through :meth:`in_flight` and :meth:`committables`. ``maps`` holds
    each held partition's offset map; the committer's :class:`worker.copying.map_writer.OffsetMapWriter`
    writes their segments.
    """

    def __init__(
        self,
        *,
        route_name: str,
        source_name: Callable[[str], str],
        stop: StopPartition,
        metrics: WorkerMetrics,
        wall_clock: Callable[[], float],
    ) -> None:
        """``source_name``: a delivery report's destination topic -> its source topic. ``stop``: what a
        failed delivery does to its partition. ``wall_clock`` (seconds since the epoch) is compared with
        record timestamps for the record age."""
        self._route_name = route_name
        self._source_name = source_name
        self._stop = stop
        self._metrics = metrics
        self._record_age = metrics.record_age.labels(route_name)
        self._wall_clock = wall_clock
        self._watermarks: OffsetWatermarks[TopicPartitionKey] = OffsetWatermarks()
        self.maps: dict[TopicPartitionKey, OffsetMap] = {}
        # Source offsets already on the destination (the resume rule), not copied again.
        self._skip: dict[TopicPartitionKey, set[int]] = {}
        self._skip_max: dict[TopicPartitionKey, int] = {}
        # Runs whose last report arrived, not applied yet, in the order those reports arrived.
        self._completed: list[tuple[DeliveryRun, KafkaError | None, Any]] = []
        # Partitions whose run showed another writer or a failure: settled record by record from then on.
        self._exact: set[TopicPartitionKey] = set()
        # Partitions with copies acknowledged since the last committed transaction (exactly-once routes).
        self._copied_in_transaction: set[TopicPartitionKey] = set()
        # Value bytes of each partition's closed runs whose last report has not been settled yet.
        self._bytes_in_flight: dict[TopicPartitionKey, int] = {}

    # -- a partition's start and end --------------------------------------------------------

    def resume(self, key: TopicPartitionKey, offsets: OffsetMap, skip: Collection[int] = ()) -> None:
        """Starts ``key``'s ledger: its offset map as found on the destination, and the source offsets
        already there (the resume rule's skip set), which the copy loop settles without copying."""
        self.maps[key] = offsets
        if skip:
            self._skip[key] = set(skip)
            self._skip_max[key] = max(skip)
        else:
            self._skip.pop(key, None)

    def forget(self, key: TopicPartitionKey) -> None:
        """Drops everything about ``key`` (released), except that it is settled record by record:
        another writer on its destination partition is still there when it is held again."""
        self._skip.pop(key, None)
        self._skip_max.pop(key, None)
        self.maps.pop(key, None)
        self._watermarks.forget(key)
        self._copied_in_transaction.discard(key)
        self._bytes_in_flight.pop(key, None)

    # -- what happened to a source offset ---------------------------------------------------

    def sent(self, key: TopicPartitionKey, offsets: list[int]) -> None:
        """``offsets`` of ``key`` (ascending, above any sent before) went to the producer: SENT."""
        self._watermarks.sent_run(key, offsets)

    def sent_span(self, key: TopicPartitionKey, first: int, count: int) -> None:
        """The ``count`` consecutive offsets of ``key`` from ``first`` (above any sent before) went to the
        producer: SENT, in O(1) (the copy core's runs)."""
        self._watermarks.sent_span(key, first, count)

    def passed(self, key: TopicPartitionKey, offset: int) -> None:
        """``offset`` of ``key`` needs no copy (not for this route's destination, or the source log now
        starts past it): settled at once, so it never holds a commit back."""
        self._watermarks.passed(key, offset)

    def failed(self, key: TopicPartitionKey, offset: int, reason: str) -> None:
        """The producer refused ``offset`` of ``key`` (or it never reached the destination): the watermark
        stays below it, and its partition stops (the caller stops it)."""
        self._watermarks.failed(key, offset, reason)

    def start_at(self, key: TopicPartitionKey, offset: int) -> None:
        """``key`` starts at ``offset``, past what was committed (its records below are on the destination):
        committable from there at once."""
        self._watermarks.start_at(key, offset)

    # -- what the copy loop asks ------------------------------------------------------------

    @property
    def skips(self) -> Mapping[TopicPartitionKey, set[int]]:
        """The partitions with source offsets still to skip: the copy loop reads it once per batch."""
        return self._skip

    @property
    def exact(self) -> Collection[TopicPartitionKey]:
        """The partitions whose every record is a run of its own (another writer or a failure was
        seen on them): the copy loop reads it once per batch."""
        return self._exact

    @property
    def bytes_in_flight(self) -> Mapping[TopicPartitionKey, int]:
        """Per partition, the value bytes of its closed runs not settled yet (absent: none): what the
        copy loop reads before it opens a partition's next run (``RouteCopier``'s window)."""
        return self._bytes_in_flight

    def bytes_in_flight_beside(self, key: TopicPartitionKey) -> int:
        """The value bytes of the other partitions' closed runs not settled yet (asked only when ``key``'s
        window is full, so summed then rather than kept up to date at every run)."""
        return sum(self._bytes_in_flight.values()) - self._bytes_in_flight.get(key, 0)

    def open_run(self) -> DeliveryRun:
        """A new run for the copy loop to hand a partition's records over in."""
        return DeliveryRun(self._completed)

    def closed(self, key: TopicPartitionKey, run: DeliveryRun, count: int, size: int) -> None:
        """The copy loop handed over the last of ``run``'s ``count`` records of ``key`` (``size`` value
        bytes): the run is in flight until its last report is settled."""
        run.count = count
        run.size = size
        self._bytes_in_flight[key] = self._bytes_in_flight.get(key, 0) + size

    def settled_as_already_written(self, key: TopicPartitionKey, offset: int) -> bool:
        """Settles ``offset`` as copied when the destination already has it (resume rule): marks it
        sent and acknowledged in the watermark, counts it, and says True; else says False.

        Not a pure check: it also consumes the partition's skip set (drops ``offset`` from it, and
        the whole set once the copy passed its highest offset)."""
        skip = self._skip[key]
        if offset not in skip:
            if offset > self._skip_max[key]:
                del self._skip[key]
            return False
        skip.discard(offset)
        if not skip:
            del self._skip[key]
        self._watermarks.sent(key, offset)
        self._watermarks.acked(key, offset)
        self._metrics.resume_skipped.labels(self._route_name).inc()
        return True

    # -- delivery reports -------------------------------------------------------------------

    def settle(self) -> None:
        """Applies the runs whose last report arrived, in the order those reports arrived.

        Called after every poll/flush that may have served reports, before the watermark or the
        maps are read. Not between an offset-map write and the commit it guards
        (:meth:`worker.copying.committer.Committer.commit`): records acknowledged there count from
        the next commit on, once a segment describes them.
        """
        completed = self._completed
        if not completed:
            return
        # The same list stays bound to the open runs' callbacks: empty it in place.
        runs = completed[:]
        del completed[:]
        now_ms = self._wall_clock() * 1000.0
        for run, error, last in runs:
            self._settle_run(run, error, last, now_ms)

    def settle_cut_short(self, run: DeliveryRun, handed: int) -> None:
        """Settles a run the producer refused a record of, once the ``handed`` records before that one
        were delivered: they went without the run's closing callback, so the newest success among the
        records between (the run's catcher keeps it) stands for the last. Proven as a run when nothing
        failed and the offsets are contiguous; otherwise only the first as its report says, and the rest
        failed (on an exactly-once route, which reports nothing between the ends, always so). Stops
        nothing: the refusal stopped the partition already, with its own reason."""
        self.settle()
        first = run.first
        if first is None:
            return  # not reported (the flush gave up): the records stay unacknowledged
        key = (self._source_name(first.topic()), first.partition())
        watermarks = self._watermarks
        between_failed = any(error is not None for error in run.between)
        last = first if handed == 1 else run.between.get(None)
        if run.first_error is None and not between_failed and last is not None:
            start = first.offset()
            if last.offset() - start == handed - 1:
                self._acknowledged_run(key, start, handed)
                return
        if run.first_error is None:
            self._acknowledged(key, [watermarks.acked_oldest(key)], first.offset(), 1)
        else:
            watermarks.fail_oldest(key, run.first_error.str())
        for _ in range(handed - 1):
            watermarks.fail_oldest(key, UNPROVEN)
        if handed > 1:
            self._exact.add(key)

    def transaction_committed(self) -> None:
        """The destination committed the open transaction: each partition it wrote copies to got a
        transaction marker right after its newest copy, which its offset map takes into account."""
        for key in self._copied_in_transaction:
            offsets = self.maps.get(key)
            if offsets is not None:
                offsets.end_transaction()
        self._copied_in_transaction.clear()

    def in_flight(self) -> int:
        """How many records the destination has not acknowledged yet (reports settled first)."""
        self.settle()
        return self._watermarks.in_flight()

    def committables(self) -> dict[TopicPartitionKey, int]:
        """Per partition, the source offset a commit may store: below it, everything is acknowledged.

        A partition that resumed with offsets to skip (the resume rule found them on the destination past
        the committed offset) commits nothing until it may commit past the highest of them. The copies it
        makes of records missing below them (a gap an earlier owner left) land after them on the
        destination; a commit between would leave those found copies above the committed offset yet
        older than copies below it, where the next owner's look-back, which stops once it passed below
        that offset, may not read them, and would copy them again."""
        committables = self._watermarks.committables()
        if self._skip_max:
            for key, highest in list(self._skip_max.items()):
                offset = committables.get(key)
                if offset is None:
                    continue
                if offset <= highest:
                    del committables[key]
                else:
                    del self._skip_max[key]  # passed: the partition commits as any other from now on
        return committables

    def _settle_run(self, run: DeliveryRun, error: KafkaError | None, last: Any, now_ms: float) -> None:
        count = run.count
        first, first_error = (last, error) if count == 1 else (run.first, run.first_error)
        key = (self._source_name(last.topic()), last.partition())
        in_flight = self._bytes_in_flight.get(key)
        if in_flight is not None:  # None: released meanwhile
            self._bytes_in_flight[key] = max(0, in_flight - run.size)
        watermarks = self._watermarks
        between_failed = next((e for e in run.between if e is not None), None)
        if error is None and first_error is None and between_failed is None:
            start = first.offset()
            if last.offset() - start == count - 1:  # contiguous: nothing else landed between
                self._acknowledged_run(key, start, count)
                self._observe_record_age(first, now_ms)
                return
        # Not proven as a whole: each end as its own report says, the records between failed.
        failure: tuple[int, KafkaError] | None = None
        if first_error is None:
            self._acknowledged(key, [watermarks.acked_oldest(key)], first.offset(), 1)
            self._observe_record_age(first, now_ms)
        else:
            failure = (watermarks.fail_oldest(key, first_error.str()), first_error)
        if count > 1:
            self._exact.add(key)
            for _ in range(count - 2):
                watermarks.fail_oldest(key, UNPROVEN)
            if error is None:
                self._acknowledged(key, [watermarks.acked_oldest(key)], last.offset(), 1)
            else:
                offset = watermarks.fail_oldest(key, error.str())
                failure = failure or (offset, error)
        if failure is not None:
            offset, reason = failure
            what = f"offset {offset}: the destination rejected the record"
            self._stop(key, delivery_failure(kafka_error(reason), what))
        elif between_failed is not None:
            self._stop(
                key,
                PartitionDeferred(
                    f"a record between destination offsets {first.offset()} and {last.offset()} failed "
                    f"({kafka_error(between_failed)}); restarting from the destination, record by record",
                    retry_after_s=RETRY_BACKOFF_S,
                ),
            )
        else:
            self._stop(
                key,
                PartitionDeferred(
                    f"{count} records landed at destination offsets {first.offset()}..{last.offset()}: another "
                    "writer interleaved, or a record between them failed; restarting from the destination",
                    retry_after_s=RETRY_BACKOFF_S,
                ),
            )

    def _acknowledged_run(self, key: TopicPartitionKey, start: int, count: int) -> None:
        """The ``count`` oldest offsets of ``key`` in flight landed at the consecutive destination offsets from
        ``start``: acknowledged, and mapped (as one span when their source offsets are consecutive too)."""
        source_first = self._watermarks.acked_oldest_span(key, count)
        if source_first is None:
            self._acknowledged(key, self._watermarks.acked_oldest_run(key, count), start, count)
            return
        offsets = self.maps.get(key)
        if offsets is not None:
            offsets.record_span(source_first, start, count)
            self._copied_in_transaction.add(key)

    def _acknowledged(self, key: TopicPartitionKey, source_offsets: list[int], start: int, count: int) -> None:
        offsets = self.maps.get(key)
        if offsets is not None:
            offsets.record_run(source_offsets, list(range(start, start + count)))
            self._copied_in_transaction.add(key)

    def _observe_record_age(self, first: Any, now_ms: float) -> None:
        """One record-age observation per settled run, of its first record (the oldest: a partition's
        records are acknowledged in order): acknowledged now, minus the record's timestamp as the
        destination holds it. Per run, not per record: the copy loop's cost."""
        timestamp_type, timestamp_ms = first.timestamp()
        if timestamp_type:  # 0: TIMESTAMP_NOT_AVAILABLE
            self._record_age.observe(max(0.0, now_ms - timestamp_ms) / 1000.0)
