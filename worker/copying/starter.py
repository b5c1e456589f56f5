"""Starts a route copier's partitions: where each resumes, its destination topic prepared, and, when
its position leaves the source log, where it goes on.

A partition starts where the destination's own record of progress says
(:meth:`PartitionStarter.resume_at`: the committed offset, the route's copies read back from the
destination, MirrorMaker 2's progress on a takeover, else the route's ``start``), always at an explicit
offset. A partition whose destination partition an open transaction holds back (records past it
are invisible to the look-back until it ends: :mod:`worker.position.lookback`) is not started: it
is deferred, and the route's other partitions go on; one acquire waits for such transactions at most
:data:`~worker.position.lookback.OPEN_TRANSACTION_WAIT_S` in all (the copy loop waits with it). An
exactly-once route's writer registers (``init_transactions``, :meth:`Committer.settle`) before any of
its partitions reads the destination back; one acquire tries that once, and when the destination's
transaction coordinator does not answer, every topic of the acquire is deferred with that reason. A
partition of an at-least-once route that resumes past what was committed (nothing committed, its
copies found on the destination) has its start committable at once: with nothing more to copy it would
otherwise never commit, and show a lag it does not have. A destination topic is created or
expanded first, and the producer's batches are fitted to its ``max.message.bytes``. A partition whose
destination topic cannot be prepared for a temporary reason (a cluster unreachable) is not acquired;
:meth:`PartitionStarter.acquire` says so and the worker retries later.

The starter keeps nothing of a partition past its start but three hand-overs: the source topics whose
destination topics it created (until their partitions resume), the partitions it found re-created
(until acquire reports them), and the starts past what was committed (until acquire starts them). A
started partition's state is kept by :mod:`worker.copying.partition_states`.
Driven by the copier's one thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.config import InternalTopicsConfig, RouteConfig, WorkerConfig
from ferry.common.core import naming
from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.resume import resume_plan
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.copying.committer import Committer
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.names import TopicNames, TopicPartitionKey, partition_fields
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.destination import METADATA_TIMEOUT_S, DestinationTopics
from ferry.worker.errors import PartitionDeferred, PartitionStopped, WorkerError
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.position import start_offsets
from ferry.worker.position.data_loss import SourceProbe, destination_recreated, out_of_range, recreated_reason
from ferry.worker.position.lookback import (
    OPEN_TRANSACTION_WAIT_S,
    DestinationReader,
    LookBackTimeout,
    OpenTransaction,
)
from ferry.worker.position.mm2_takeover import Mm2Takeover, Mm2Unavailable

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AcquireResult:
    online: list[TopicPartitionKey]
    errors: dict[TopicPartitionKey, str]  # stopped for good: the reason
    deferred: dict[TopicPartitionKey, str]  # not acquired for a temporary reason: retry later


class PartitionStarter:
    """A route copier's partitions from OFFLINE to ONLINE, and back into the source log when they leave it."""

    def __init__(
        self,
        *,
        route: RouteConfig,
        config: WorkerConfig,
        source: Mapping[str, Any],
        destination: Mapping[str, Any],
        client_id: str,
        consumer: Any,
        names: TopicNames,
        states: PartitionStates,
        ledger: DeliveryLedger,
        committer: Committer,
        metrics: WorkerMetrics,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        topic_start: Callable[[str], str | int | None],
        internal_topics: InternalTopicsConfig | None = None,
    ) -> None:
        """``client_id``: the worker's client id, which the starter's own clients (the look-back reader,
        the source probe, MirrorMaker 2's reads) extend. ``consumer``: the route's source consumer.
        ``topic_start``: a topic's own start (added with one), else None for the route's; asked only for
        partitions nothing of the route is on the destination for; may raise ``PartitionDeferred``.
        ``internal_topics``: how the offset-map topic is created (default: 3 replicas, capped)."""
        self._route = route
        self._config = config
        self._log = logs.with_fields(log, route=route.name)
        self._consumer = consumer
        self._names = names
        self._states = states
        self._ledger = ledger
        self._committer = committer
        self._metrics = metrics
        self._clock = clock
        self._sleep = sleep
        self._topic_start = topic_start
        try:  # where a partition nothing was committed or copied for starts, as an explicit offset
            self._reset_offset = start_offsets.reset_offset(
                str(config.consumer.get("auto.offset.reset", config.auto_offset_reset))
            )
        except ValueError as exc:
            raise WorkerError(f"route {route.name}: {exc}") from None
        self._probe = SourceProbe(source, route.group_id, f"{client_id}-{route.name}-probe")
        destination_admin = kafka_clients.admin(destination)
        self._topics = DestinationTopics(
            route=route,
            admin=destination_admin,
            clock=clock,
            sleep=sleep,
            internal_topics=internal_topics,
            metrics=metrics,
        )
        # Exact offsets: the route's copies read back from the destination (the resume rule).
        waits = metrics.lookback_open_transaction_waits.labels(route.name)
        self._reader = DestinationReader(
            destination=destination,
            group_id=route.group_id,
            client_id=f"{client_id}-{route.name}-lookback",
            clock=clock,
            sleep=sleep,
            admin=destination_admin,
            on_open_transaction=waits.inc,
        )
        # Taking over a MirrorMaker 2 mirror: where a partition the route never copied starts.
        self._mm2 = (
            Mm2Takeover(route=route, source=source, destination=destination, metrics=metrics, client_id=client_id)
            if route.mirrormaker2 is not None
            else None
        )
        self._recreated: dict[TopicPartitionKey, str] = {}  # filled by resume_at, read by acquire
        # Partitions whose destination an open transaction holds back (deferred): filled by resume_at, read by acquire.
        self._held_back: dict[TopicPartitionKey, str] = {}
        # Until when an acquire's look-backs may wait for open transactions, all together (the copy loop waits).
        self._open_wait_until: float | None = None
        # Partitions resuming past their committed offset (none committed, own copies found): filled by
        # resume_at, read by acquire, which makes the start committable for those it starts.
        self._past_commit: dict[TopicPartitionKey, int] = {}
        self._created_here: set[str] = set()  # source topics whose destination topic this starter created

    # -- OFFLINE -> ONLINE ------------------------------------------------------------------

    def acquire(self, keys: Iterable[TopicPartitionKey]) -> AcquireResult:
        """Starts copying ``keys`` where the destination's own record of progress says (:meth:`resume_at`)."""
        self._open_wait_until = self._clock() + OPEN_TRANSACTION_WAIT_S
        by_topic: dict[str, list[int]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(partition)
        online: list[TopicPartitionKey] = []
        errors: dict[TopicPartitionKey, str] = {}
        deferred: dict[TopicPartitionKey, str] = {}
        to_assign: list[TopicPartition] = []
        # Why the route's writer did not register in this acquire: its later topics wait for the same
        # retry rather than hold the copy loop (every route's) with a registration each.
        unregistered: PartitionDeferred | None = None
        for topic, partitions in sorted(by_topic.items()):
            try:
                refused = naming.refusal(self._route, topic)
                if refused:
                    raise PartitionStopped(refused)
                source_partitions = self._prepare_destination(topic)
                if unregistered is None:
                    try:
                        # An exactly-once route's writer registers before anything trusts the destination:
                        # its registration settles every earlier transaction of its id first.
                        self._committer.settle()
                    except PartitionDeferred as exc:
                        unregistered = exc
                if unregistered is not None:
                    raise unregistered
            except PartitionDeferred as exc:
                deferred.update({(topic, p): str(exc) for p in partitions})
                continue
            except PartitionStopped as exc:
                errors.update({(topic, p): str(exc) for p in partitions})
                continue
            starting = []
            for partition in sorted(partitions):
                if partition >= source_partitions:
                    errors[(topic, partition)] = (
                        f"partition {partition} does not exist at the source ({source_partitions} partitions)"
                    )
                else:
                    starting.append(partition)
            try:
                starts = self.resume_at(topic, starting)
            except (KafkaException, LookBackTimeout, Mm2Unavailable) as exc:
                why = str(kafka_error(exc)) if isinstance(exc, KafkaException) else str(exc)
                deferred.update({(topic, p): f"resuming from the destination: {why}" for p in starting})
                continue
            for partition in [p for p in starting if (topic, p) in self._recreated]:
                errors[(topic, partition)] = self._recreated.pop((topic, partition))
                starting.remove(partition)
            for partition in [p for p in starting if (topic, p) in self._held_back]:
                deferred[(topic, partition)] = self._held_back.pop((topic, partition))
                starting.remove(partition)
            fresh = [p for p in starting if starts[p] is None]
            try:
                own_start = self._topic_start(topic) if fresh else None
                first = start_offsets.route_start(
                    self._consumer,
                    topic,
                    fresh,
                    self._route.start if own_start is None else own_start,
                    self._reset_offset,
                    METADATA_TIMEOUT_S,
                )
            except KafkaException as exc:
                deferred.update({(topic, p): f"finding the route's start: {kafka_error(exc)}" for p in starting})
                continue
            except PartitionDeferred as exc:
                deferred.update({(topic, p): str(exc) for p in starting})
                continue
            for partition in starting:
                start = starts[partition]
                # Always an explicit offset: without one librdkafka fetches the committed offset itself and,
                # on a NOT_COORDINATOR answer, never fetches the partition (librdkafka#5586,
                # worker/position/start_offsets.py).
                to_assign.append(TopicPartition(topic, partition, first[partition] if start is None else start))
                online.append((topic, partition))
                if (past := self._past_commit.pop((topic, partition), None)) is not None:
                    self._ledger.start_at((topic, partition), past)
        self._states.start(to_assign)
        self._past_commit.clear()  # of partitions not started now: read again when they are
        self._open_wait_until = None
        for key, reason in errors.items():
            self._states.not_started(key, reason)
        return AcquireResult(online, errors, deferred)

    def resume_at(self, topic: str, partitions: list[int]) -> dict[int, int | None]:
        """The resume rule (:mod:`common.core.resume`) for each partition: where to start, and what to skip.

        Reads the committed offsets, then each destination partition back from its end until it
        passes below the committed offset (bounded by ``resume_lookback_records``). The route's own
        records found there seed the offset map and the skip set.
        """
        if not partitions:
            return {}
        committed = start_offsets.committed_offsets(
            self._consumer,
            [TopicPartition(topic, p) for p in partitions],
            deadline_s=METADATA_TIMEOUT_S,
            clock=self._clock,
            sleep=self._sleep,
        )
        dest_topic = self._names.destination(topic)
        starts: dict[int, int | None] = {}
        for partition in partitions:
            self._held_back.pop((topic, partition), None)
        for partition in partitions:
            key = (topic, partition)
            wait_until = self._open_wait_until
            try:
                found = self._reader.look_back(
                    dest_topic,
                    partition,
                    self._route.source,
                    committed.get(partition),
                    self._config.resume_lookback_records,
                    open_transaction_wait_s=OPEN_TRANSACTION_WAIT_S
                    if wait_until is None
                    else max(0.0, wait_until - self._clock()),
                )
            except OpenTransaction as exc:  # this partition waits; the topic's others go on
                self._held_back[key] = f"resuming from the destination: {exc}"
                continue
            if committed.get(partition) is None and found.newest is not None:
                source_offset, timestamp, record_key = found.newest
                reason = recreated_reason(
                    source_offset, (timestamp, record_key), self._probe.record(topic, partition, source_offset)
                )
                if reason:
                    self._recreated[key] = reason
                    continue
            if (
                topic in self._created_here
                and committed.get(partition) is not None
                and not found.own
                and self._route.distributor is None
            ):  # a tree distributor keeps its offsets across targets
                # The route committed C, yet the destination topic did not exist: it was deleted under Ferry.
                # Copy the partition again from the source's log start rather than leave [0, C) missing.
                self._states.note(key, destination_recreated(committed[partition] or 0))
                self._log.error(
                    "route %s: %s/%s: %s",
                    self._route.name,
                    topic,
                    partition,
                    destination_recreated(committed[partition] or 0),
                    extra=partition_fields(key),
                )
                committed[partition] = None
                starts[partition] = OFFSET_BEGINNING
                self._ledger.resume(key, OffsetMap())
                continue
            plan = resume_plan(committed.get(partition), found.present)
            offsets = OffsetMap()
            for source, destination in reversed(found.own):
                offsets.record(source, destination)
            self._ledger.resume(key, offsets, plan.skip)
            starts[partition] = plan.start
            # Committed at once only where the commit writes the offset-map segments the look-back seeded
            # (an exactly-once route writes them in its next transaction, which the commit must not precede).
            if committed.get(partition) is None and plan.start is not None and not self._committer.transactional:
                self._past_commit[key] = plan.start
            if plan.start is None and self._mm2 is not None:  # nothing of the route's yet: where MirrorMaker 2 stopped
                starts[partition] = self._mm2.start(topic, partition, dest_topic, self._reader.end_offset)
            self._metrics.lookback.labels(self._route.name).inc(found.read)
            if found.bounded:
                self._log.warning(
                    "route %s: %s/%s: the look-back stopped at %d records before passing the committed offset "
                    "%s; records between may be copied twice, and the older ones are not in the offset map",
                    self._route.name,
                    topic,
                    partition,
                    found.read,
                    committed.get(partition),
                    extra=partition_fields((topic, partition)),
                )
            if plan.skip or plan.gaps:
                self._log.info(
                    "route %s: %s/%s resumes at %s, skipping %d records already on the destination%s",
                    self._route.name,
                    topic,
                    partition,
                    plan.start,
                    len(plan.skip),
                    f" ({plan.gaps} missing before them: a producer timeout left a gap; order is broken there)"
                    if plan.gaps
                    else "",
                    extra=partition_fields((topic, partition)),
                )
        self._created_here.discard(topic)
        return starts

    def _prepare_destination(self, topic: str) -> int:
        """Creates or expands the destination topic to the source's partition count; returns that count."""
        source = self._topics.source_topic(self._consumer, topic)
        destination_topic = self._names.destination(topic)
        committer = self._committer
        if self._topics.prepare(destination_topic, source, lambda: committer.producer, committer.fit_batches_to):
            self._created_here.add(topic)
        self._log.debug("route %s: %s is %s on the destination", self._route.name, topic, destination_topic)
        return source.partitions

    # -- ONLINE, when the position leaves the source log ------------------------------------

    def left_the_log(self, key: TopicPartitionKey, position: int | None) -> None:
        """The position of ``key`` left the source log (worker/position/data_loss.py): report the records lost and
        go on from the log start, or stop when the log is shorter than what was copied."""
        tp = TopicPartition(key[0], key[1])
        try:
            if position is None or position < 0:
                position = self._consumer.position([tp])[0].offset
            log_start, log_end = self._consumer.get_watermark_offsets(tp, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:
            self._states.stop(
                key, PartitionDeferred(f"the position left the source log; reading its bounds: {kafka_error(exc)}")
            )
            return
        decision = out_of_range(int(position or 0), log_start, log_end)
        if decision.resume_at is None:
            self._states.stop(key, PartitionStopped(decision.stop_reason or "the position left the source log"))
            return
        if decision.lost is not None:
            first, end = decision.lost
            self._states.lost(key, decision.lost)
            self._metrics.lost.labels(self._route.name, key[0]).inc(end - first)
            self._ledger.passed(key, end - 1)  # nothing to wait for below the log start: commits move past it
            self._log.error(
                "route %s: %s/%s: source records [%d, %d) (%d records) were deleted at the source before "
                "they were copied (retention or deleteRecords); copying goes on from %d",
                self._route.name,
                key[0],
                key[1],
                first,
                end,
                end - first,
                end,
                extra=partition_fields(key),
            )
        self._states.reassign(key, decision.resume_at)

    # -- its own clients --------------------------------------------------------------------

    def serve_logs(self) -> None:
        """Hands the look-back reader's librdkafka messages to the log (it is not polled between starts)."""
        self._reader.serve_logs()

    def close(self) -> None:
        self._reader.close()
        self._probe.close()
