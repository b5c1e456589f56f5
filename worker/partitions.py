"""A route copier's acquiring of partitions (:class:`PartitionLifecycle`, the base of
:class:`worker.copier.RouteCopier`): where each partition resumes, its destination topic prepared,
its batches fitted to the destination's limits.

The partition states are listed with the copier (:mod:`worker.copier`); this part runs on the same
one thread (the worker's copy loop), so no state here needs a lock either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from ferry.common.core import naming
from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.resume import resume_plan
from ferry.common.kafka.errors import kafka_error
from ferry.worker.commits import FLUSH_TIMEOUT_S, PartitionCommits, TopicPartitionKey, _fields
from ferry.worker.destination import METADATA_TIMEOUT_S
from ferry.worker.errors import (
    PartitionDeferred,
    PartitionStopped,
)
from ferry.worker.position import start_offsets
from ferry.worker.position.data_loss import destination_recreated, recreated_reason
from ferry.worker.position.lookback import LookBackTimeout
from ferry.worker.position.mm2_takeover import Mm2Unavailable

# Room for the record batch's own framing under a topic's max.message.bytes.
_BATCH_FRAMING_BYTES = 1024


@dataclass(frozen=True)
class AcquireResult:
    online: list[TopicPartitionKey]
    errors: dict[TopicPartitionKey, str]  # stopped for good: the reason
    deferred: dict[TopicPartitionKey, str]  # not acquired for a temporary reason: retry later


class PartitionLifecycle(PartitionCommits):
    """The copier's partitions from OFFLINE to ONLINE. The state is :class:`worker.copier.RouteCopier`'s."""

    # -- OFFLINE -> ONLINE ------------------------------------------------------------------

    def acquire(self, keys: Iterable[TopicPartitionKey]) -> AcquireResult:
        """Starts copying ``keys`` where the destination's own record of progress says (:meth:`_resume_at`)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(partition)
        online: list[TopicPartitionKey] = []
        errors: dict[TopicPartitionKey, str] = {}
        deferred: dict[TopicPartitionKey, str] = {}
        to_assign: list[TopicPartition] = []
        for topic, partitions in sorted(by_topic.items()):
            try:
                refused = naming.refusal(self.route, topic)
                if refused:
                    raise PartitionStopped(refused)
                source_partitions = self._prepare_destination(topic)
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
                starts = self._resume_at(topic, starting)
            except (KafkaException, LookBackTimeout, Mm2Unavailable) as exc:
                why = str(kafka_error(exc)) if isinstance(exc, KafkaException) else str(exc)
                deferred.update({(topic, p): f"resuming from the destination: {why}" for p in starting})
                continue
            for partition in [p for p in starting if (topic, p) in self._recreated]:
                errors[(topic, partition)] = self._recreated.pop((topic, partition))
                starting.remove(partition)
            fresh = [p for p in starting if starts[p] is None]
            try:
                own_start = self._topic_start(topic) if fresh else None
                first = start_offsets.route_start(
                    self._consumer,
                    topic,
                    fresh,
                    self.route.start if own_start is None else own_start,
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
                # on a NOT_COORDINATOR answer, never fetches the partition (librdkafka#5586, worker/position/start_offsets.py).
                to_assign.append(TopicPartition(topic, partition, first[partition] if start is None else start))
                online.append((topic, partition))
        if to_assign:
            self._consumer.incremental_assign(to_assign)
            # A partition stopped in ERROR earlier was paused; the pause may outlive the unassign.
            self._consumer.resume(to_assign)
            self._assigned.update(online)
        for key, reason in errors.items():
            self._errors[key] = reason
            self._metrics.errors.labels(self.route.name, "partition").inc()
            self._log.error("route %s: %s/%s stopped: %s", self.route.name, key[0], key[1], reason, extra=_fields(key))
        return AcquireResult(online, errors, deferred)

    def _resume_at(self, topic: str, partitions: list[int]) -> dict[int, int | None]:
        """The resume rule (:mod:`common.core.resume`) for each partition: where to start, and what to skip.

        Reads the committed offsets, then each destination partition back from its end until it
        passes below the committed offset (bounded by ``resume_lookback_records``). The route's own
        records found there seed the offset map and the skip set.
        """
        if not partitions:
            return {}
        committed = start_offsets.committed_offsets(
            self._consumer, [TopicPartition(topic, p) for p in partitions], deadline_s=METADATA_TIMEOUT_S
        )
        dest_topic = self._destination_name(topic)
        starts: dict[int, int | None] = {}
        for partition in partitions:
            key = (topic, partition)
            found = self._reader.look_back(
                dest_topic, partition, self.route.source, committed.get(partition), self._config.resume_lookback_records
            )
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
                and self.route.distributor is None
            ):  # a tree distributor keeps its offsets across targets
                # The route committed C, yet the destination topic did not exist: it was deleted under Ferry.
                # Copy the partition again from the source's log start rather than leave [0, C) missing.
                self._losses.note(key, destination_recreated(committed[partition] or 0))
                self._log.error(
                    "route %s: %s/%s: %s",
                    self.route.name,
                    topic,
                    partition,
                    destination_recreated(committed[partition] or 0),
                    extra=_fields(key),
                )
                committed[partition] = None
                starts[partition] = OFFSET_BEGINNING
                self._maps[key] = OffsetMap()
                self._skip.pop(key, None)
                continue
            plan = resume_plan(committed.get(partition), found.present)
            offsets = OffsetMap()
            for source, destination in reversed(found.own):
                offsets.record(source, destination)
            self._maps[key] = offsets
            if plan.skip:
                self._skip[key] = set(plan.skip)
                self._skip_max[key] = max(plan.skip)
            else:
                self._skip.pop(key, None)
            starts[partition] = plan.start
            if plan.start is None and self._mm2 is not None:  # nothing of the route's yet: where MirrorMaker 2 stopped
                starts[partition] = self._mm2.start(topic, partition, dest_topic, self._reader.end_offset)
            self._metrics.lookback.labels(self.route.name).inc(found.read)
            if found.bounded:
                self._log.warning(
                    "route %s: %s/%s: the look-back stopped at %d records before passing the committed offset "
                    "%s; records between may be copied twice, and the older ones are not in the offset map",
                    self.route.name,
                    topic,
                    partition,
                    found.read,
                    committed.get(partition),
                    extra=_fields((topic, partition)),
                )
            if plan.skip or plan.gaps:
                self._log.info(
                    "route %s: %s/%s resumes at %s, skipping %d records already on the destination%s",
                    self.route.name,
                    topic,
                    partition,
                    plan.start,
                    len(plan.skip),
                    f" ({plan.gaps} missing before them: a producer timeout left a gap; order is broken there)"
                    if plan.gaps
                    else "",
                    extra=_fields((topic, partition)),
                )
        self._created_here.discard(topic)
        return starts

    def _prepare_destination(self, topic: str) -> int:
        """Creates or expands the destination topic to the source's partition count; returns that count."""
        source = self._topics.source_topic(self._consumer, topic)
        destination_topic = self._destination_name(topic)
        if self._topics.prepare(destination_topic, source, lambda: self._producer, self._fit_batches_to):
            self._created_here.add(topic)
        self._log.debug("route %s: %s is %s on the destination", self.route.name, topic, destination_topic)
        return source.partitions

    def _destination_name(self, topic: str) -> str:
        name = self._destination_names.get(topic)
        if name is None:
            name = self._destination_names[topic] = self.route.destination_topic(topic)
            self._source_names[name] = topic
        return name

    def _fit_batches_to(self, topic: str, limit: int) -> None:
        """Keeps producer batches under the destination topic's ``max.message.bytes`` (``limit``).

        The broker checks a whole record batch against that limit and librdkafka does not split
        a rejected batch, so a batch bigger than the limit would fail every record in it, good
        ones included. A record bigger than ``batch.size`` still travels alone in its own batch,
        so when the destination refuses it, only it fails, at its own offset.
        """
        fitting = max(1, limit - _BATCH_FRAMING_BYTES)
        if fitting >= self._batch_size:
            return
        remaining = self.flush(FLUSH_TIMEOUT_S)
        if remaining:
            self._log.warning(
                "route %s: %d records unacknowledged; keeping the larger batches for now", self.route.name, remaining
            )
            return
        self._log.info(
            "route %s: producer batches capped at %d bytes to fit %s's max.message.bytes=%d",
            self.route.name,
            fitting,
            topic,
            limit,
        )
        self._producer.flush(0)
        self._settle_deliveries()
        self._batch_size = fitting
        self._producer_settings["batch.size"] = fitting
        self._producer = self._new_producer()
