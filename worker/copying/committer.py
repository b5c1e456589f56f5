"""A route's destination producer and its commits: the producer's life (built, rebuilt with smaller
batches or after a fatal error, polled, flushed, purged), the offset-map segments written before each
commit, and the commit of the source offsets the destination acknowledged.

A commit stores, per partition, only the offset below which the destination acknowledged every
record (the delivery ledger's watermark, :mod:`worker.copying.ledger`), and only once the offset
map's segments that describe those records are acknowledged too (:mod:`worker.copying.map_writer`):
a worker killed right after a commit never leaves committed records that no segment describes.

States of the producer::

    WORKING --a fatal error (fail)--> FAILED (delivers nothing more; flushes do not wait for it)
    FAILED --renew_if_failed (once the stopped partitions are released)--> WORKING (a new producer)
    WORKING --fit_batches_to a smaller max.message.bytes--> WORKING (flushed, a new producer with smaller batches)

Every poll, flush and purge settles the delivery reports it served (:meth:`DeliveryLedger.settle`),
except the waits inside :meth:`Committer.commit` for its map segments. Driven by the copier's one
thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.map_writer import OffsetMapWriter
from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# How long a release or SIGTERM waits for the destination to acknowledge what is in flight.
FLUSH_TIMEOUT_S = 30.0
# How long a release waits for the map segments its commit wrote.
SEGMENT_FLUSH_S = 5.0
# Between two tries of a refused commit, until the caller's deadline.
COMMIT_RETRY_S = 0.2
LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
# Room for the record batch's own framing under a topic's max.message.bytes.
BATCH_FRAMING_BYTES = 1024


class Committer:
    """One route's destination producer and its commits to the source group. See the module docstring for states."""

    def __init__(
        self,
        route_name: str,
        destination: Mapping[str, Any],
        settings: Mapping[str, Any],
        consumer: Any,
        ledger: DeliveryLedger,
        destination_name: Callable[[str], str],
        metrics: WorkerMetrics,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        """``settings``: the producer's librdkafka properties. ``consumer``: the source consumer, whose
        group the commits go to. ``destination_name``: a source topic's destination topic, for the map's keys."""
        self._route_name = route_name
        self._log = logs.with_fields(log, route=route_name)
        self._destination = destination
        self._settings = dict(settings)
        self._batch_size = int(self._settings.get("batch.size", LIBRDKAFKA_BATCH_SIZE))
        self._consumer = consumer
        self._ledger = ledger
        self._map_writer = OffsetMapWriter(route_name, destination_name, ledger.maps, metrics)
        self._metrics = metrics
        self._clock = clock
        self._sleep = sleep
        self._committed: dict[TopicPartitionKey, int] = {}
        self._failed = False
        self._producer: Any = self._new_producer()

    @property
    def producer(self) -> Any:
        """The destination producer now (a new one after :meth:`fit_batches_to` or :meth:`renew_if_failed`)."""
        return self._producer

    def _new_producer(self) -> Any:
        with logs.context(route=self._route_name):  # its librdkafka messages carry the route
            return kafka_clients.producer(self._destination, on_delivery=self._ledger.on_delivery, **self._settings)

    # -- the producer -----------------------------------------------------------------------

    def poll(self, timeout: float) -> None:
        """Serves delivery reports."""
        self._producer.poll(timeout)
        self._ledger.settle()

    def flush(self, timeout: float) -> int:
        """Waits for the destination to acknowledge everything sent; returns what is still in flight."""
        remaining: int = self._producer.flush(timeout)
        self._ledger.settle()
        return remaining

    def purge(self) -> None:
        """Drops everything the producer still holds (queued and in flight): this worker must stop writing now.

        The purged records fail their partitions for a temporary reason, so nothing is committed
        past them; whatever of them still reached the destination is found by the next owner's
        look-back and not copied again.
        """
        self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        self._producer.poll(0)
        self._ledger.settle()

    def drop_unacknowledged(self) -> None:
        """Purges what the destination has not acknowledged and serves the purged records' reports
        (each fails its offset); they are settled by the next flush or poll."""
        try:
            self._producer.purge()
        except KafkaException as exc:
            self._log.warning("route %s: purging the producer: %s", self._route_name, exc)
        self._producer.flush(0)

    @property
    def failed(self) -> bool:
        """The producer failed for good (FAILED): it delivers nothing more."""
        return self._failed

    def fail(self) -> bool:
        """WORKING -> FAILED; True when it was WORKING (the caller stops the route's partitions)."""
        if self._failed:
            return False
        self._failed = True
        return True

    def renew_if_failed(self) -> None:
        """FAILED -> WORKING: a new producer (call once the partitions it stopped are released)."""
        if self._failed:
            self._log.warning("route %s: building a new destination producer after a fatal error", self._route_name)
            self._producer = self._new_producer()
            self._failed = False

    def fit_batches_to(self, topic: str, limit: int) -> None:
        """Keeps producer batches under the destination topic's ``max.message.bytes`` (``limit``).

        The broker checks a whole record batch against that limit and librdkafka does not split
        a rejected batch, so a batch bigger than the limit would fail every record in it, good
        ones included. A record bigger than ``batch.size`` still travels alone in its own batch,
        so when the destination refuses it, only it fails, at its own offset.
        """
        fitting = max(1, limit - BATCH_FRAMING_BYTES)
        if fitting >= self._batch_size:
            return
        remaining = self.flush(FLUSH_TIMEOUT_S)
        if remaining:
            self._log.warning(
                "route %s: %d records unacknowledged; keeping the larger batches for now", self._route_name, remaining
            )
            return
        self._log.info(
            "route %s: producer batches capped at %d bytes to fit %s's max.message.bytes=%d",
            self._route_name,
            fitting,
            topic,
            limit,
        )
        self._producer.flush(0)
        self._ledger.settle()
        self._batch_size = fitting
        self._settings["batch.size"] = fitting
        self._producer = self._new_producer()

    # -- committing -------------------------------------------------------------------------

    def commit(self, keys: Collection[TopicPartitionKey] | None = None) -> bool:
        """Commits the watermark of ``keys`` (all held partitions when None); False if Kafka refused.

        The offset map's changed segments are written first, and the source offsets are committed
        only once the destination acknowledged them: a worker killed right after a commit never
        leaves committed records that no map segment describes (the next owner's look-back starts
        at the committed offset, so it could not describe them again).
        """
        self._ledger.settle()  # and none until the commit: see DeliveryLedger.settle
        # What may be committed is fixed before the map is written: every offset below it was
        # acknowledged, so recorded in the map, so described by the segments written now.
        # Deliveries acknowledged while waiting for the map's acknowledgements are queued, not
        # applied; they count from the next commit, once a segment describes them.
        committable = self._ledger.committables()
        if not self._map_writer.write_and_wait(self._producer, keys):
            self._log.warning(
                "route %s: the offset map was not written; the commit waits for the next round", self._route_name
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
            self._metrics.errors.labels(self._route_name, "commit").inc()
            self._log.warning("route %s: commit failed (will retry): %s", self._route_name, kafka_error(exc))
            return False
        for tp in offsets:
            self._committed[(tp.topic, tp.partition)] = tp.offset
        return True

    def commit_within(self, keys: Collection[TopicPartitionKey], deadline_s: float) -> bool:
        """Commits ``keys``, trying again every ``COMMIT_RETRY_S`` until ``deadline_s`` has passed;
        False when the last try was refused too."""
        deadline = self._clock() + deadline_s
        while not self.commit(keys):
            if self._clock() >= deadline:
                return False
            self._sleep(COMMIT_RETRY_S)
        return True

    def hand_over(self, keys: Collection[TopicPartitionKey], flush_timeout: float, commit_deadline: float) -> None:
        """Flushes, commits the watermark of ``keys`` (retried until ``commit_deadline``), and waits for
        the map segments that commit wrote: what a release does before the consumer lets ``keys`` go.

        Anything the destination did not acknowledge stays uncommitted and is copied again, never lost.
        """
        # A failed producer delivers nothing more: waiting for it would only stall.
        remaining = self.flush(0 if self._failed else flush_timeout)
        if remaining and not self._failed:
            self._log.error(
                "route %s: %d records still unacknowledged after %.0fs; releasing anyway (they will be copied again)",
                self._route_name,
                remaining,
                flush_timeout,
            )
        self.commit_within(keys, commit_deadline)
        self.flush(0 if self._failed else SEGMENT_FLUSH_S)

    def forget(self, key: TopicPartitionKey) -> None:
        """Drops what was committed for ``key`` (released): its next owner commits from scratch."""
        self._committed.pop(key, None)

    def close(self, flush_timeout: float) -> None:
        """Flushes, commits every partition, and waits for the map segments that commit wrote."""
        self.flush(flush_timeout)
        self.commit()
        self.flush(flush_timeout)
