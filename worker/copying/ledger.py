"""What a route copier sent and what the destination acknowledged: the watermark, the delivery
reports and the offset maps they extend.

Source offsets are committed only up to the lowest offset the destination has not acknowledged yet
(:class:`common.core.watermark.OffsetWatermarks`), so a crash copies some records again and loses
none. The producer's delivery callback (:meth:`DeliveryLedger.on_delivery`) only queues each report;
:meth:`DeliveryLedger.settle` applies the queue in the order it arrived: a success acknowledges its
partition's oldest offset in flight (an idempotent producer reports a partition's deliveries in
produce order), so a run of a partition's successes acknowledges that many at once and extends the
partition's exact offset map (:mod:`common.core.offset_map`) in one call; a failure fails its
partition's oldest offset in flight and stops the partition.

States of a record the copier handles::

    SENT (the copy loop marks it) --a success settled--> ACKNOWLEDGED (in the offset map)
    SENT --a failure settled--> FAILED (the watermark stays below it; its partition stops)
    (not sent) --passed (not for this route, or gone from the source)--> settled at once
    (not sent) --already on the destination (the resume rule's skip set)--> settled at once

and of a delivery report: QUEUED (by the callback, inside the producer's poll or flush) --settle--> applied.

Driven by the copier's one thread (the worker's copy loop); the callback runs inside ``poll`` and
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
from ferry.worker.errors import PartitionDeferred, PartitionStopped, ProducerFailed, delivery_failure
from ferry.worker.metrics import WorkerMetrics

# What a failed delivery does to its partition: the copier stops it (and with a fatal error, the producer).
StopPartition = Callable[[TopicPartitionKey, PartitionStopped | PartitionDeferred | ProducerFailed], None]


class DeliveryLedger:
    """One route's watermark, queued delivery reports, offset maps and resume skip sets.

    ``watermarks`` is the tracker itself: the copy loop marks what it hands the producer on it
    (``sent_run``, ``passed``), bound once per batch. ``maps`` holds each held partition's offset
    map; the committer's :class:`worker.copying.map_writer.OffsetMapWriter` writes their segments.
    """

    def __init__(
        self,
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
        self.watermarks: OffsetWatermarks[TopicPartitionKey] = OffsetWatermarks()
        self.maps: dict[TopicPartitionKey, OffsetMap] = {}
        # Source offsets already on the destination (the resume rule), not copied again.
        self._skip: dict[TopicPartitionKey, set[int]] = {}
        self._skip_max: dict[TopicPartitionKey, int] = {}
        # Delivery reports not applied yet: successes in order, and each failure with its place among them.
        self._delivered: list[Any] = []
        self._failures: list[tuple[int, KafkaError, Any]] = []
        # Partitions with copies acknowledged since the last committed transaction (exactly-once routes).
        self._copied_in_transaction: set[TopicPartitionKey] = set()

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
        """Drops everything about ``key`` (released)."""
        self._skip.pop(key, None)
        self._skip_max.pop(key, None)
        self.maps.pop(key, None)
        self.watermarks.forget(key)
        self._copied_in_transaction.discard(key)

    # -- what the copy loop asks ------------------------------------------------------------

    @property
    def skips(self) -> Mapping[TopicPartitionKey, set[int]]:
        """The partitions with source offsets still to skip: the copy loop reads it once per batch."""
        return self._skip

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
        self.watermarks.sent(key, offset)
        self.watermarks.acked(key, offset)
        self._metrics.resume_skipped.labels(self._route_name).inc()
        return True

    # -- delivery reports -------------------------------------------------------------------

    def on_delivery(self, error: KafkaError | None, message: Any) -> None:
        """The producer's delivery callback: runs inside poll()/flush() on the copy loop's thread, once
        per record, so it only queues the report (a failure with its place among the successes)."""
        if error is None:
            self._delivered.append(message)
        else:
            self._failures.append((len(self._delivered), error, message))

    def settle(self) -> None:
        """Applies the queued delivery reports, in the order they arrived.

        Called after every poll/flush that may have served reports, before the watermark or the
        maps are read. Not between an offset-map write and the commit it guards
        (:meth:`worker.copying.committer.Committer.commit`): records acknowledged there count from
        the next commit on, once a segment describes them.
        """
        delivered, failures = self._delivered, self._failures
        if not delivered and not failures:
            return
        self._delivered = []
        if not failures:
            self._settle_successes(delivered)
            return
        self._failures = []
        start = 0
        for position, error, message in failures:
            self._settle_successes(delivered[start:position])
            start = position
            key = (self._source_name(message.topic()), message.partition())
            offset = self.watermarks.fail_oldest(key, error.str())
            self._stop(
                key, delivery_failure(kafka_error(error), f"offset {offset}: the destination rejected the record")
            )
        self._settle_successes(delivered[start:])

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
        return self.watermarks.in_flight()

    def committables(self) -> dict[TopicPartitionKey, int]:
        """Per partition, the source offset a commit may store: below it, everything is acknowledged."""
        return self.watermarks.committables()

    def _settle_successes(self, delivered: list[Any]) -> None:
        run_topic: str | None = None
        run_partition = -1
        run: list[int] = []
        run_starts: list[Any] = []  # the first record of each run, for the record age
        for message in delivered:
            partition = message.partition()
            if partition != run_partition or message.topic() != run_topic:
                if run:
                    self._settle_run(run_topic, run_partition, run)
                    run = []
                run_topic, run_partition = message.topic(), partition
                run_starts.append(message)
            run.append(message.offset())
        if run:
            self._settle_run(run_topic, run_partition, run)
            self._observe_record_age(run_starts)

    def _settle_run(self, topic: Any, partition: int, destination_offsets: list[int]) -> None:
        key = (self._source_name(topic), partition)
        source_offsets = self.watermarks.acked_oldest_run(key, len(destination_offsets))
        offsets = self.maps.get(key)
        if offsets is not None:
            offsets.record_run(source_offsets, destination_offsets)
            self._copied_in_transaction.add(key)

    def _observe_record_age(self, run_starts: list[Any]) -> None:
        """One record-age observation per settled run, of its first record (the oldest: a
        partition's records are acknowledged in order): acknowledged now, minus the record's
        timestamp as the destination holds it. Per run, not per record: the copy loop's cost."""
        now_ms = self._wall_clock() * 1000.0
        observe = self._record_age.observe
        for message in run_starts:
            timestamp_type, timestamp_ms = message.timestamp()
            if timestamp_type:  # 0: TIMESTAMP_NOT_AVAILABLE
                observe(max(0.0, now_ms - timestamp_ms) / 1000.0)
