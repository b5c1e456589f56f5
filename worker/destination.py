"""Prepares a route's destination topics before the copier assigns their partitions.

For each source topic: its partition count and replica count at the source, the destination topic
created (with the route's ``replication_factor``, else the source's replica count, capped at the
destination cluster's size, never at the brokers registered at the moment: :mod:`common.core.topics.replicas`)
or expanded to that partition count, the
producer's metadata waited for (bounded) until it shows the new partitions, the topic's
``max.message.bytes`` handed to the copier (which fits its producer batches under it), and the
compacted offset-map topic created once (with the destination's ``internal_topics`` replication
factor).

The destination topic's other configs, ``min.insync.replicas`` among them, follow the source's
through the leader's topic observer.

What cannot be done is classified once: a refusal that will not change (the topic is missing at
the source, the destination forbids creating it) is :class:`PartitionStopped`; anything else (a
cluster unreachable, a topic waiting for the destination's brokers to come back) is
:class:`PartitionDeferred`, and the worker tries again later.

States of a destination topic here: *waiting for brokers* (not created because a broker the
destination knows is away; counted in ``ferry_worker_topics_waiting_for_brokers``, logged once),
then *ready* once it exists (created here, capped only when the cluster is smaller:
``ferry_worker_topics_capped_total``, or by another worker).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from ferry.common import logs
from ferry.common.config import InternalTopicsConfig, RouteConfig
from ferry.common.core.offset_map import MAP_TOPIC
from ferry.common.core.topics.replicas import replica_count
from ferry.common.kafka.errors import kafka_error
from ferry.common.kafka.topics import InternalTopic, WaitingForBrokers, creation_replicas
from ferry.worker.errors import PartitionDeferred, PartitionStopped
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S = 10.0
ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SourceTopic:
    """What the destination topic is made to match: the source topic's partition and replica counts."""

    partitions: int
    replicas: int


class DestinationTopics:
    """A route's destination topics, prepared through the destination's admin client."""

    def __init__(
        self,
        *,
        route: RouteConfig,
        admin: Any,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        internal_topics: InternalTopicsConfig | None = None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        """``metrics``: where topics waiting for brokers and capped topics are counted (none: not counted)."""
        self.route = route
        self._metrics = metrics
        self._waiting: set[str] = set()  # topics not created yet: brokers of the destination are away
        self._log = logs.with_fields(log, route=route.name)
        self._admin = admin
        self._clock = clock
        self._sleep = sleep
        internal = internal_topics or InternalTopicsConfig()
        self._map_topic = InternalTopic(
            name=MAP_TOPIC,
            timeout_s=ADMIN_TIMEOUT_S,
            replication_factor=internal.replication_factor_on,
            config={"cleanup.policy": "compact"},
        )

    def source_topic(self, consumer: Any, topic: str) -> SourceTopic:
        """How many partitions and replicas ``topic`` has at the source (read through the route's consumer)."""
        try:
            source_meta = consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise PartitionDeferred(f"source cluster unreachable: {kafka_error(exc)}") from None
        if source_meta is None or source_meta.error is not None:
            code = source_meta.error.code() if source_meta is not None and source_meta.error is not None else None
            if code in (None, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.TOPIC_AUTHORIZATION_FAILED):
                raise PartitionStopped(f"topic {topic!r} does not exist at the source (or is not readable)")
            raise PartitionDeferred(f"source metadata for {topic!r}: {source_meta.error}")
        replicas = replica_count(len(p.replicas) for p in source_meta.partitions.values())
        return SourceTopic(len(source_meta.partitions), replicas)

    def prepare(
        self, topic: str, source: SourceTopic, producer: Callable[[], Any], fit_batches: Callable[[str, int], None]
    ) -> bool:
        """Creates destination topic ``topic`` like ``source`` or expands it to ``source.partitions``,
        waits until ``producer()`` sees them, calls ``fit_batches(topic, max.message.bytes)`` and
        creates the offset-map topic once. True when it created the topic."""
        created = False
        wanted = source.partitions
        try:
            cluster = self._admin.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            dest_meta = cluster.topics.get(topic)
            if dest_meta is None or dest_meta.error is not None:
                created = self._create(topic, source, cluster.brokers)
            elif len(dest_meta.partitions) < wanted:
                future = self._admin.create_partitions([NewPartitions(topic, wanted)])[topic]
                admin_result(future, KafkaError.INVALID_PARTITIONS)
                self._log.info(
                    "route %s: expanded destination topic %s to %d partitions", self.route.name, topic, wanted
                )
            self._await_producer_metadata(producer(), topic, wanted)
            limit = self.max_message_bytes(topic)
            if limit is not None:
                fit_batches(topic, limit)
            self.ensure_map_topic()
            return created
        except WaitingForBrokers as exc:
            raise PartitionDeferred(f"destination topic not created yet: {kafka_error(exc).message}") from None
        except KafkaException as exc:
            error = kafka_error(exc)
            if error.code in (
                KafkaError.TOPIC_AUTHORIZATION_FAILED,
                KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                KafkaError.TOPIC_EXCEPTION,
                KafkaError.POLICY_VIOLATION,
            ):
                raise PartitionStopped(f"cannot create destination topic {topic!r}: {error}") from None
            raise PartitionDeferred(f"destination cluster: {error}") from None

    def _create(self, topic: str, source: SourceTopic, registered: Collection[int]) -> bool:
        """Creates ``topic`` with the source's partitions and the route's replicas (logs and counts a cap;
        raises :class:`WaitingForBrokers` while brokers of the destination are away). True: done here."""
        wanted = self.route.replication_factor if self.route.replication_factor is not None else source.replicas
        with self._waiting_for_brokers(topic):
            replicas = creation_replicas(self._admin, max(1, wanted), registered, ADMIN_TIMEOUT_S)
        new = NewTopic(topic, num_partitions=source.partitions, replication_factor=replicas.factor)
        created = admin_result(self._admin.create_topics([new])[topic], KafkaError.TOPIC_ALREADY_EXISTS)
        if created:
            self._log.info(
                "route %s: created destination topic %s with %d partitions, %d replicas",
                self.route.name,
                topic,
                source.partitions,
                replicas.factor,
            )
            if replicas.capped:
                self._count_capped()
                self._log.warning(
                    "route %s: destination topic %s has %d replicas instead of %d: the destination has %d brokers",
                    self.route.name,
                    topic,
                    replicas.factor,
                    replicas.wanted,
                    replicas.factor,  # capped only at the cluster's size
                )
        return created

    def max_message_bytes(self, topic: str) -> int | None:
        """The destination topic's ``max.message.bytes``; None (with a warning) when it cannot be read."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        try:
            entries = self._admin.describe_configs([resource])[resource].result(ADMIN_TIMEOUT_S)
            return int(entries["max.message.bytes"].value)
        except (KafkaException, KeyError, ValueError, TypeError) as exc:
            self._log.warning(
                "route %s: cannot read max.message.bytes of %s on the destination: %s", self.route.name, topic, exc
            )
            return None

    def ensure_map_topic(self) -> None:
        """Creates the compacted offset-map topic on the destination once (another worker may have);
        raises :class:`WaitingForBrokers` while brokers of the destination are away."""
        with self._waiting_for_brokers(MAP_TOPIC):
            replicas = self._map_topic.ensure(self.route.destination, lambda: self._admin)
        if replicas is not None and replicas.capped:
            self._count_capped()

    @contextlib.contextmanager
    def _waiting_for_brokers(self, topic: str) -> Iterator[None]:
        """Keeps ``topic`` among the topics waiting for brokers while the body raises :class:`WaitingForBrokers`."""
        try:
            yield
        except WaitingForBrokers as exc:
            if topic not in self._waiting:
                self._waiting.add(topic)
                self._log.warning(
                    "route %s: destination topic %s not created yet: %s",
                    self.route.name,
                    topic,
                    kafka_error(exc).message,
                )
                self._show_waiting()
            raise
        if topic in self._waiting:
            self._waiting.discard(topic)
            self._log.info("route %s: the destination's brokers are back for topic %s", self.route.name, topic)
            self._show_waiting()

    def _show_waiting(self) -> None:
        if self._metrics is not None:
            self._metrics.topics_waiting_for_brokers.labels(self.route.name).set(len(self._waiting))

    def _count_capped(self) -> None:
        if self._metrics is not None:
            self._metrics.topics_capped.labels(self.route.name).inc()

    def _await_producer_metadata(self, producer: Any, topic: str, partitions: int) -> None:
        """Waits (bounded) until the producer's metadata shows ``partitions`` partitions of ``topic``.

        Right after a topic is created or expanded, librdkafka's cached metadata may not know the
        new partitions yet, and ``produce`` would refuse records for them as an unknown partition.
        """
        deadline = self._clock() + METADATA_TIMEOUT_S
        while True:
            meta = producer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) >= partitions:
                return
            if self._clock() > deadline:
                raise PartitionDeferred(f"the destination does not show {partitions} partitions of {topic!r} yet")
            self._sleep(0.2)


def admin_result(future: Any, benign: int) -> bool:
    """Waits for an admin operation; ``benign`` (another worker did it first) is no error. True: done here."""
    try:
        future.result(timeout=ADMIN_TIMEOUT_S)
        return True
    except KafkaException as exc:
        if kafka_error(exc).code != benign:
            raise
        return False
