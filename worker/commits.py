"""A route copier's commits and releases (:class:`PartitionCommits`, a base of
:class:`worker.copier.RouteCopier`): stopping a partition (ERROR, a position that left the source
log), committing only what the destination acknowledged, releasing (flush, commit, then unassign),
purging, closing, and the lag gauge.

The partition states are listed with the copier (:mod:`worker.copier`); this part runs on the same
one thread (the worker's copy loop), so no state here needs a lock either.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.config import RouteConfig, WorkerConfig
from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.watermark import OffsetWatermarks
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.destination import METADATA_TIMEOUT_S, DestinationTopics
from ferry.worker.errors import (
    RETRY_BACKOFF_S,
    PartitionDeferred,
    PartitionStopped,
    ProducerFailed,
)
from ferry.worker.map_writer import OffsetMapWriter
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.position.data_loss import Losses, SourceProbe, out_of_range
from ferry.worker.position.lookback import DestinationReader
from ferry.worker.position.mm2_takeover import Mm2Takeover

TopicPartitionKey = tuple[str, int]

# How long a release or SIGTERM waits for the destination to acknowledge what is in flight.
FLUSH_TIMEOUT_S = 30.0


class PartitionCommits:
    """The copier's commits, stops and releases, and its producer. The state is
    :class:`worker.copier.RouteCopier`'s, set in its ``__init__``."""

    route: RouteConfig
    changed: bool
    _log: logs.FieldsAdapter
    _destination_names: dict[str, str]
    _source_names: dict[str, str]
    _config: WorkerConfig
    _metrics: WorkerMetrics
    _clock: Callable[[], float]
    _consumer: Any
    _losses: Losses
    _recreated: dict[TopicPartitionKey, str]
    _created_here: set[str]
    _probe: SourceProbe
    _reset_offset: int
    _topic_start: Callable[[str], str | int | None]
    _destination: Mapping[str, Any]
    _producer_settings: dict[str, Any]
    _batch_size: int
    _producer: Any
    _topics: DestinationTopics
    _tracker: OffsetWatermarks[TopicPartitionKey]
    _assigned: set[TopicPartitionKey]
    _errors: dict[TopicPartitionKey, str]
    _retry_at: dict[TopicPartitionKey, float]
    _producer_fatal: bool
    _committed: dict[TopicPartitionKey, int]
    _reader: DestinationReader
    _skip: dict[TopicPartitionKey, set[int]]
    _skip_max: dict[TopicPartitionKey, int]
    _map_writer: OffsetMapWriter
    _maps: dict[TopicPartitionKey, OffsetMap]
    _mm2: Mm2Takeover | None
    _copied: dict[TopicPartitionKey, list[int]]
    _lags: dict[TopicPartitionKey, int]
    _paused: set[TopicPartitionKey]

    def held(self) -> set[TopicPartitionKey]:
        raise NotImplementedError  # the copier's

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        raise NotImplementedError  # the copier's

    def _settle_deliveries(self) -> None:
        raise NotImplementedError  # the copier's

    def _new_producer(self) -> Any:
        with logs.context(route=self.route.name):  # its librdkafka messages carry the route
            return kafka_clients.producer(self._destination, on_delivery=self._on_delivery, **self._producer_settings)

    def _left_the_log(self, key: TopicPartitionKey, position: int | None) -> None:
        """The position of ``key`` left the source log (worker/position/data_loss.py): report the records lost and
        go on from the log start, or stop when the log is shorter than what was copied."""
        tp = TopicPartition(key[0], key[1])
        try:
            if position is None or position < 0:
                position = self._consumer.position([tp])[0].offset
            log_start, log_end = self._consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            self._stop(
                key,
                None,
                PartitionDeferred(f"the position left the source log; reading its bounds: {kafka_error(exc)}"),
            )
            return
        decision = out_of_range(int(position or 0), log_start, log_end)
        if decision.resume_at is None:
            self._stop(key, None, PartitionStopped(decision.stop_reason or "the position left the source log"))
            return
        if decision.lost is not None:
            first, end = decision.lost
            self._losses.add(key, decision.lost)
            self._metrics.lost.labels(self.route.name, key[0]).inc(end - first)
            self._tracker.passed(key, end - 1)  # nothing to wait for below the log start: commits move past it
            self.changed = True
            self._log.error(
                "route %s: %s/%s: source records [%d, %d) (%d records) were deleted at the source before "
                "they were copied (retention or deleteRecords); copying goes on from %d",
                self.route.name,
                key[0],
                key[1],
                first,
                end,
                end - first,
                end,
                extra=_fields(key),
            )
        # librdkafka stopped fetching the partition (a seek is refused in that state): assign it anew there.
        self._consumer.incremental_unassign([tp])
        self._consumer.incremental_assign([TopicPartition(key[0], key[1], decision.resume_at)])

    def _stop(
        self, key: TopicPartitionKey, offset: int | None, failure: PartitionStopped | PartitionDeferred | ProducerFailed
    ) -> None:
        """ONLINE -> ERROR: pause the partition; the watermark never passes ``offset``.

        A :class:`PartitionDeferred` is temporary: :meth:`due_retries` offers the partition for a
        restart from its committed offset after its ``retry_after_s`` (default ``RETRY_BACKOFF_S``).
        A :class:`ProducerFailed` leaves the producer unusable: every partition of the route
        stops, and the producer is built anew when they are released for their restart.
        """
        if isinstance(failure, ProducerFailed):
            if not self._producer_fatal:
                self._producer_fatal = True
                for other in sorted(self._assigned - set(self._errors) - {key}):
                    self._stop(
                        other,
                        None,
                        PartitionDeferred(
                            f"the destination producer failed for good: {failure}", retry_after_s=RETRY_BACKOFF_S
                        ),
                    )
            failure = failure.record
        if key in self._errors:
            return
        reason = str(failure)
        if isinstance(failure, PartitionDeferred):
            delay = RETRY_BACKOFF_S if failure.retry_after_s is None else failure.retry_after_s
            reason += f" (temporary: restarting from the committed offset in {delay:.0f}s)"
            self._retry_at[key] = self._clock() + delay
        self._errors[key] = reason
        self.changed = True
        self._metrics.errors.labels(self.route.name, "partition").inc()
        self._log.error("route %s: %s/%s stopped: %s", self.route.name, key[0], key[1], reason, extra=_fields(key))
        if key in self._assigned:
            try:
                self._consumer.pause([TopicPartition(key[0], key[1])])
            except KafkaException as exc:  # the partition is skipped in copy_batch anyway
                self._log.warning(
                    "route %s: pausing %s/%s: %s", self.route.name, key[0], key[1], exc, extra=_fields(key)
                )

    def due_retries(self) -> list[TopicPartitionKey]:
        """Partitions stopped for a temporary reason whose backoff is over."""
        if not self._retry_at:
            return []
        now = self._clock()
        return [key for key, at in self._retry_at.items() if at <= now]

    # -- committing -------------------------------------------------------------------------

    def commit(self, keys: Collection[TopicPartitionKey] | None = None) -> bool:
        """Commits the watermark of ``keys`` (all held partitions when None); False if Kafka refused.

        The offset map's changed segments are written first, and the source offsets are committed
        only once the destination acknowledged them: a worker killed right after a commit never
        leaves committed records that no map segment describes (the next owner's look-back starts
        at the committed offset, so it could not describe them again).
        """
        self._settle_deliveries()  # and none until the commit: see _settle_deliveries
        # What may be committed is fixed before the map is written: every offset below it was
        # acknowledged, so recorded in the map, so described by the segments written now.
        # Deliveries acknowledged while waiting for the map's acknowledgements are queued, not
        # applied; they count from the next commit, once a segment describes them.
        committable = self._tracker.committables()
        if not self._map_writer.write_and_wait(self._producer, keys):
            self._log.warning(
                "route %s: the offset map was not written; the commit waits for the next round", self.route.name
            )
            return False
        offsets = []
        for key, offset in committable.items():
            if (keys is None or key in keys) and self._committed.get(key) != offset:
                offsets.append(TopicPartition(key[0], key[1], offset))
        if not offsets:
            return True
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self._metrics.errors.labels(self.route.name, "commit").inc()
            self._log.warning("route %s: commit failed (will retry): %s", self.route.name, kafka_error(exc))
            return False
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        return True

    def purge(self) -> None:
        """Drops everything the producer still holds (queued and in flight): this worker must stop writing now.

        The purged records fail their partitions for a temporary reason, so nothing is committed
        past them; whatever of them still reached the destination is found by the next owner's
        look-back and not copied again.
        """
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.poll(0)
        self._settle_deliveries()

    def poll(self, timeout: float) -> None:
        """Serves delivery reports without consuming anything."""
        self._producer.poll(timeout)
        self._settle_deliveries()

    def flush(self, timeout: float) -> int:
        """Waits for the destination to acknowledge everything sent; returns what is still in flight."""
        remaining: int = self._producer.flush(timeout)
        self._settle_deliveries()
        return remaining

    # -- ONLINE -> OFFLINE ------------------------------------------------------------------

    def release(self, keys: Collection[TopicPartitionKey], flush_timeout: float, commit_deadline: float) -> None:
        """Flushes, commits the watermark of ``keys``, and only then unassigns them.

        The new owner starts at the committed offset, so nothing is copied twice; anything the
        destination did not acknowledge stays uncommitted and is copied again, never lost.
        """
        if not keys:
            return
        # A fatally failed producer delivers nothing more: waiting for it would only stall.
        remaining = self.flush(0 if self._producer_fatal else flush_timeout)
        if remaining and not self._producer_fatal:
            self._log.error(
                "route %s: %d records still unacknowledged after %.0fs; releasing anyway (they will be copied again)",
                self.route.name,
                remaining,
                flush_timeout,
            )
        deadline = self._clock() + commit_deadline
        while not self.commit(keys) and self._clock() < deadline:
            time.sleep(0.2)
        self.flush(0 if self._producer_fatal else 5.0)  # the map segments commit() just wrote
        assigned = [TopicPartition(t, p) for t, p in keys if (t, p) in self._assigned]
        if assigned:
            self._consumer.incremental_unassign(assigned)
        for key in keys:
            self._assigned.discard(key)
            self._paused.discard(key)
            self._errors.pop(key, None)
            self._retry_at.pop(key, None)
            self._committed.pop(key, None)
            self._skip.pop(key, None)
            self._maps.pop(key, None)
            self._copied.pop(key, None)
            self._lags.pop(key, None)
            self._losses.forget(key)
            self._tracker.forget(key)
        if self._producer_fatal:
            self._log.warning("route %s: building a new destination producer after a fatal error", self.route.name)
            self._producer = self._new_producer()
            self._producer_fatal = False

    def abandon(self, commit_deadline: float) -> None:
        """Releases every partition without waiting for the destination (a tree distributor
        switching away from an unreachable target): records not acknowledged yet are purged from
        the producer, so the committed offsets stay below them and the next copier (to the new
        target) copies them again. Nothing is lost; the old target may hold some of them too.
        """
        try:
            self._producer.purge()
        except KafkaException as exc:
            self._log.warning("route %s: purging the producer: %s", self.route.name, exc)
        self._producer.flush(0)  # serves the purged records' delivery reports: each fails its offset
        self.release(self.held(), 0, commit_deadline)

    # -- lag --------------------------------------------------------------------------------

    def update_lag(self) -> None:
        """Sets the lag gauge of each ONLINE partition from the consumer's cached log-end offsets.

        Runs every commit interval, so it also hands the librdkafka messages of the clients the copy
        loop does not poll now to the log: the look-back reader's, and a copier holding nothing's."""
        self._reader.serve_logs()
        if not self._assigned:
            kafka_clients.serve_logs(self._consumer)
            self.poll(0)
            return
        try:
            positions = self._consumer.position([TopicPartition(t, p) for t, p in self._assigned])
        except KafkaException:
            return
        for tp in positions:
            if tp.offset < 0:
                continue
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                lag = self._lags[(tp.topic, tp.partition)] = max(0, high - tp.offset)
                self._metrics.lag.labels(self.route.name, tp.topic, str(tp.partition)).set(lag)

    def close(self, flush_timeout: float) -> None:
        self.flush(flush_timeout)
        self.commit()
        self.flush(flush_timeout)
        self._consumer.close()
        self._reader.close()
        self._probe.close()


def _fields(key: TopicPartitionKey) -> dict[str, Any]:
    """A partition's log fields (the route comes with the copier's logger)."""
    return {"topic": key[0], "partition": key[1]}
