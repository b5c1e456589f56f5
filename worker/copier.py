"""Copies one route's partitions: an ``assign()``-only consumer on the source, a producer on the destination.

Every record goes to the same partition of the route's destination topic (the source name, or
the route's renaming: :mod:`common.core.naming`) with its key, value, headers and timestamp, plus
Ferry's provenance header (:mod:`common.core.provenance`: the clusters it came through, its copy flags
and its source offset). A route with loop prevention or a tree distributor's level skips the
records it must not copy (:func:`common.core.topology.copy_flags`); a skipped record is settled at once
in the watermark, so it never holds commits back. Source offsets are committed (group ``ferry.<route name>``)
only up to the lowest offset the destination has not acknowledged yet
(:class:`common.core.watermark.OffsetWatermarks`), so a crash copies some records again and loses none.

States of a partition on this copier (the worker reports them in its status)::

    (not held) --acquire--> ONLINE --release--> (not held; reported OFFLINE)
    ONLINE --the destination rejects a record for good--> ERROR (paused; nothing committed past it)
    ONLINE --a record fails for a temporary reason--> ERROR (paused), and after RETRY_BACKOFF_S
        the worker releases it (committing up to the failed record) and acquires it again
    ERROR --release--> (not held)
    ONLINE --pause--> PAUSED (flushed, committed, consumer paused) --resume--> ONLINE (continues at
        the next offset: nothing skipped, nothing twice);  PAUSED --release--> (not held)

A route's throttle (:class:`common.core.operate.rate.RouteThrottle`, this worker's share of the
route's budget) is checked once per batch: it limits how many records the batch takes, and an
empty bucket takes none (the loop serves delivery reports meanwhile).

A partition whose destination topic cannot be prepared for a temporary reason (a cluster
unreachable) is not acquired; :meth:`RouteCopier.acquire` says so and the worker retries later.

The copier is driven by one thread (the worker's copy loop); delivery callbacks run inside
``poll``/``flush`` on that same thread, so no state here needs a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.config import InternalTopicsConfig, RouteConfig, WorkerConfig
from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.operate.rate import RouteThrottle
from ferry.common.core.provenance import Provenance, ProvenanceError, Stamper
from ferry.common.core.topology import copy_flags
from ferry.common.core.watermark import OffsetWatermarks
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.model import PartitionStatus
from ferry.common.vocabulary import PartitionState
from ferry.worker.commits import FLUSH_TIMEOUT_S as FLUSH_TIMEOUT_S
from ferry.worker.commits import TopicPartitionKey as TopicPartitionKey
from ferry.worker.destination import DestinationTopics
from ferry.worker.errors import (
    PERMANENT_CONSUMER_ERRORS,
    PartitionStopped,
    WorkerError,
)
from ferry.worker.errors import delivery_failure as _delivery_failure  # the copy loop's name for it
from ferry.worker.map_writer import OffsetMapWriter
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.partitions import AcquireResult as AcquireResult
from ferry.worker.partitions import PartitionLifecycle
from ferry.worker.position import start_offsets
from ferry.worker.position.data_loss import Losses, SourceProbe
from ferry.worker.position.lookback import DestinationReader
from ferry.worker.position.mm2_takeover import Mm2Takeover

log = logging.getLogger(__name__)

LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
# librdkafka's answer when a position leaves the source log under auto.offset.reset=error.
_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})


class RouteCopier(PartitionLifecycle):
    """One route's consumer, producer and offset tracker. See the module docstring for states."""

    def __init__(
        self,
        route: RouteConfig,
        source: Mapping[str, Any],
        destination: Mapping[str, Any],
        config: WorkerConfig,
        metrics: WorkerMetrics,
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
        origins: frozenset[str] | None = None,
        wall_clock: Callable[[], float] = time.time,
        topic_start: Callable[[str], str | int | None] = lambda topic: None,
        internal_topics: InternalTopicsConfig | None = None,
    ) -> None:
        """``origins``: with loop prevention, the origins whose records this route copies
        (``FerryConfig.copied_origins``); None copies every record (unless a tree level says otherwise).
        ``wall_clock`` (seconds since the epoch) is compared with record timestamps for the record age.
        ``topic_start``: a topic's own start (added with one), else None for the route's; asked only for
        partitions nothing of the route is on the destination for; may raise ``PartitionDeferred``.
        ``internal_topics``: how the offset-map topic is created (default: 3 replicas, capped)."""
        self.route = route
        self._topic_start = topic_start
        self._log = logs.with_fields(log, route=route.name)
        self._origins = origins
        self._stamper = Stamper(route.source, self._copy_decision(route, origins))
        self._destination_names: dict[str, str] = {}
        self._source_names: dict[str, str] = {}  # the reverse, for delivery reports
        self._config = config
        self._metrics = metrics
        self._record_age = metrics.record_age.labels(route.name)
        self._clock = clock
        self._wall_clock = wall_clock
        # auto.offset.reset=error: every start is an explicit offset, so a reset only means the position left
        # the source log (records deleted before they were copied, a re-created topic): worker/position/data_loss.py.
        self._consumer = kafka_clients.consumer(
            source,
            route.group_id,
            **{"client.id": f"{client_id}-{route.name}", **config.consumer, "auto.offset.reset": "error"},
        )
        self._losses = Losses()
        self._recreated: dict[TopicPartitionKey, str] = {}  # filled by _resume_at, read by acquire
        self._created_here: set[str] = set()  # source topics whose destination topic this copier created
        self._probe = SourceProbe(source, route.group_id, f"{client_id}-{route.name}-probe")
        try:  # where a partition nothing was committed or copied for starts, as an explicit offset
            self._reset_offset = start_offsets.reset_offset(
                str(config.consumer.get("auto.offset.reset", config.auto_offset_reset))
            )
        except ValueError as exc:
            raise WorkerError(f"route {route.name}: {exc}") from None
        self._destination = destination
        self._producer_settings: dict[str, Any] = {
            "client.id": f"{client_id}-{route.name}",
            "compression.type": route.compression,
            **config.producer,
        }
        self._batch_size = int(self._producer_settings.get("batch.size", LIBRDKAFKA_BATCH_SIZE))
        self._producer = self._new_producer()
        self._topics = DestinationTopics(
            route, kafka_clients.admin(destination), clock, internal_topics=internal_topics
        )
        self._tracker: OffsetWatermarks[TopicPartitionKey] = OffsetWatermarks()
        self._assigned: set[TopicPartitionKey] = set()
        self._errors: dict[TopicPartitionKey, str] = {}
        self._retry_at: dict[TopicPartitionKey, float] = {}
        self._producer_fatal = False  # a fatal producer error: rebuild it at the next release
        self._committed: dict[TopicPartitionKey, int] = {}
        self._warned_at: dict[int, float] = {}
        # Exact offsets: source offsets already on the destination (resume rule), and the map.
        self._reader = DestinationReader(destination, route.group_id, f"{client_id}-{route.name}-lookback")
        self._skip: dict[TopicPartitionKey, set[int]] = {}
        self._skip_max: dict[TopicPartitionKey, int] = {}
        self._map_writer = OffsetMapWriter(route.name, self._destination_name, metrics)
        self._maps: dict[TopicPartitionKey, OffsetMap] = self._map_writer.maps  # filled here, written there
        # Taking over a MirrorMaker 2 mirror: where a partition the route never copied starts.
        self._mm2 = (
            Mm2Takeover(route, source, destination, metrics, client_id) if route.mirrormaker2 is not None else None
        )
        # Delivery reports not applied yet to the tracker and the offset map: the callback only
        # queues them, _settle_deliveries() applies them in order, successes per run of a partition.
        self._delivered: list[Any] = []
        self._failures: list[tuple[int, KafkaError, Any]] = []  # (position in _delivered, error, message)
        self.changed = False  # a partition went to ERROR since the worker last looked
        # Per partition since the worker last took them (records, value bytes), added per run of a
        # partition's records in copy_batch, never per record; and the lag update_lag last saw.
        self._copied: dict[TopicPartitionKey, list[int]] = {}
        self._lags: dict[TopicPartitionKey, int] = {}
        self._paused: set[TopicPartitionKey] = set()  # held, consumer paused (an operator's pause)
        self.throttle: RouteThrottle | None = None  # this worker's share of the route's throttle

    # -- what the worker reads --------------------------------------------------------------

    def statuses(self) -> dict[TopicPartitionKey, PartitionStatus]:
        """Every partition this copier holds, ONLINE or ERROR with its reason."""
        result = {key: PartitionStatus(PartitionState.ONLINE, self._losses.reason(key)) for key in self._assigned}
        for key in self._paused:
            if key in self._assigned:
                result[key] = PartitionStatus(PartitionState.PAUSED)
        for key, reason in self._errors.items():
            result[key] = PartitionStatus(PartitionState.ERROR, reason)
        return result

    def set_paused(self, keys: set[TopicPartitionKey], commit_deadline: float) -> None:
        """Pauses exactly ``keys`` among the held partitions (level-triggered): newly paused ones are
        flushed and committed, then no longer consumed; the others consume again where they stopped."""
        keys = keys & self._assigned
        pause, resume = keys - self._paused, self._paused - keys
        if pause:
            self.flush(FLUSH_TIMEOUT_S)
            deadline = self._clock() + commit_deadline
            while not self.commit(pause) and self._clock() < deadline:
                time.sleep(0.2)
            self._consumer.pause([TopicPartition(t, p) for t, p in sorted(pause)])
            self._log.info("route %s: paused %d partitions", self.route.name, len(pause))
        if resume:
            self._consumer.resume([TopicPartition(t, p) for t, p in sorted(resume)])
            self._log.info("route %s: resumed %d partitions", self.route.name, len(resume))
        self._paused = keys

    def held(self) -> set[TopicPartitionKey]:
        return self._assigned | set(self._errors)

    def take_copied(self) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(records, value bytes) copied per partition since the last call, and starts counting again."""
        copied, self._copied = self._copied, {}
        return {key: (records, size) for key, (records, size) in copied.items()}

    def lags(self) -> dict[TopicPartitionKey, int]:
        """The lag of each held partition as :meth:`update_lag` last measured it (absent: not measured yet)."""
        return {key: lag for key, lag in self._lags.items() if key in self._assigned}

    def in_flight(self) -> int:
        self._settle_deliveries()
        return self._tracker.in_flight()

    # -- copying ----------------------------------------------------------------------------

    @staticmethod
    def _copy_decision(
        route: RouteConfig, origins: frozenset[str] | None
    ) -> Callable[[Provenance | None], int | None] | None:
        """The route's copy decision for the stamper (:func:`common.core.topology.copy_flags`); None: copy every record."""
        level = route.copy_level
        if origins is None and level is None:
            return None
        destination = route.destination
        return lambda previous: copy_flags(previous, destination, origins, level)

    def copy_batch(self, timeout: float) -> int:
        """Consumes one batch and hands it to the producer; returns the number of records sent."""
        # consume(n, timeout) waits for n records or the whole timeout: at a modest rate that adds
        # the timeout to every record's latency. Take what is fetched already; when nothing is,
        # wait for the first record only.
        most = self._config.consume_batch
        throttle = self.throttle
        if throttle is not None:
            most = throttle.records_allowed(most, self._clock())
            if not most:  # the route's budget is spent: serve deliveries until it refills
                self._producer.poll(min(timeout, throttle.wait_s(self._clock())))
                self._settle_deliveries()
                return 0
        messages: list[Any] = self._consumer.consume(most, 0)
        if not messages:
            first = self._consumer.poll(timeout)
            if first is None:
                self._producer.poll(0)
                self._settle_deliveries()
                return 0
            messages = [first, *self._consumer.consume(most - 1, 0)] if most > 1 else [first]
        produce = self._producer.produce
        stamp = self._stamper.stamp
        names = self._destination_names
        tracker = self._tracker
        errors = self._errors
        skips = self._skip
        copied = 0
        skipped = 0
        size = 0
        # librdkafka hands a partition's fetched records out in runs: per run, the key and the
        # destination topic are looked up once, and the offsets handed to the producer go to the
        # tracker in one call (before anything that may serve delivery reports or settle the key).
        run_topic: str | None = None
        run_partition = -1
        key: TopicPartitionKey = ("", -1)
        destination_topic = ""
        run: list[int] = []
        counted = (0, 0)  # copied and size when this partition's run began, for its load counters
        for message in messages:
            if message.error() is not None:
                self._consumer_error(message)
                continue
            partition = message.partition()
            if partition != run_partition or message.topic() != run_topic:
                if run:
                    tracker.sent_run(key, run)
                    run = []
                if copied != counted[0]:
                    self._count_copied(key, copied - counted[0], size - counted[1])
                    counted = (copied, size)
                run_topic, run_partition = message.topic(), partition
                key = (run_topic, partition)
                destination_topic = names.get(run_topic) or self._destination_name(run_topic)
            if errors and key in errors:
                continue  # stopped: fetched before the pause took effect; never committed past
            offset = message.offset()
            if skips and key in skips:
                if run:
                    tracker.sent_run(key, run)
                    run = []
                if self._settled_as_already_written(key, offset):
                    continue
            timestamp_type, timestamp = message.timestamp()
            try:
                headers = stamp(message.headers(), offset)
            except ProvenanceError as exc:
                self._stop(key, offset, PartitionStopped(f"offset {offset}: {exc}"))
                continue
            if headers is None:  # loop prevention or the tree level: not for this route's destination
                if run:
                    tracker.sent_run(key, run)
                    run = []
                tracker.passed(key, offset)
                skipped += 1
                continue
            while True:
                try:
                    produce(
                        destination_topic,
                        message.value(),
                        message.key(),
                        partition,
                        timestamp=timestamp if timestamp_type else 0,
                        headers=headers,
                    )
                    break
                except BufferError:
                    # The producer's queue is full: wait for deliveries (back-pressure on the source).
                    if run:
                        tracker.sent_run(key, run)
                        run = []
                    self._producer.poll(0.05)
                    self._settle_deliveries()  # a failure among them stops its partition now
                except KafkaException as exc:
                    self._stop(
                        key,
                        offset,
                        _delivery_failure(
                            kafka_error(exc), f"offset {offset}: the destination producer refused the record"
                        ),
                    )
                    break
            if errors and key in errors:
                continue
            run.append(offset)
            copied += 1
            size += len(message)
        if run:
            tracker.sent_run(key, run)
        if copied != counted[0]:
            self._count_copied(key, copied - counted[0], size - counted[1])
        self._producer.poll(0)
        self._settle_deliveries()
        self._metrics.records.labels(self.route.name).inc(copied)
        if skipped:
            self._metrics.skipped.labels(self.route.name).inc(skipped)
        self._metrics.bytes.labels(self.route.name).inc(size)
        if throttle is not None:
            throttle.used(copied + skipped, size, self._clock())
        return copied

    def _count_copied(self, key: TopicPartitionKey, records: int, size: int) -> None:
        counts = self._copied.get(key)
        if counts is None:
            self._copied[key] = [records, size]
        else:
            counts[0] += records
            counts[1] += size

    def _settled_as_already_written(self, key: TopicPartitionKey, offset: int) -> bool:
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
        self._tracker.sent(key, offset)
        self._tracker.acked(key, offset)
        self._metrics.resume_skipped.labels(self.route.name).inc()
        return True

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        # Runs inside poll()/flush() on the copy-loop thread, once per record: it only queues the
        # report (a failure with its place among the successes); _settle_deliveries applies them.
        if error is None:
            self._delivered.append(message)
        else:
            self._failures.append((len(self._delivered), error, message))

    def _settle_deliveries(self) -> None:
        """Applies the queued delivery reports, in the order they arrived.

        A success acknowledges its partition's oldest offset in flight (an idempotent producer
        reports a partition's deliveries in produce order), so a run of a partition's successes
        acknowledges that many and extends the offset map at once. A failure fails its partition's
        oldest offset in flight and stops the partition (:meth:`_stop`).
        Called after every poll/flush that may have served reports, before the tracker or the
        map is read. Not between an offset-map write and the commit it guards (:meth:`commit`):
        records acknowledged there count from the next commit on, once a segment describes them.
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
            topic = message.topic()
            key = (self._source_names.get(topic, topic), message.partition())
            offset = self._tracker.fail_oldest(key, error.str())
            self._stop(
                key,
                offset,
                _delivery_failure(kafka_error(error), f"offset {offset}: the destination rejected the record"),
            )
        self._settle_successes(delivered[start:])

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

    def _settle_run(self, topic: Any, partition: int, destination_offsets: list[int]) -> None:
        key = (self._source_names.get(topic, topic), partition)
        source_offsets = self._tracker.acked_oldest_run(key, len(destination_offsets))
        offsets = self._maps.get(key)
        if offsets is not None:
            offsets.record_run(source_offsets, destination_offsets)

    def _consumer_error(self, message: Any) -> None:
        error: KafkaError = message.error()
        topic, partition = message.topic(), message.partition()
        if error.code() in _OUT_OF_RANGE and topic and partition is not None and partition >= 0:
            self._left_the_log((topic, partition), message.offset())
            return
        if error.code() in PERMANENT_CONSUMER_ERRORS and topic and partition is not None and partition >= 0:
            self._stop((topic, partition), None, PartitionStopped(f"the source reports: {error.str()}"))
            return
        self._metrics.errors.labels(self.route.name, "consumer").inc()
        now = self._clock()
        if now - self._warned_at.get(error.code(), -1e9) > 30:  # one line per kind per 30 s
            self._warned_at[error.code()] = now
            self._log.warning("route %s: source consumer: %s", self.route.name, error.str())
