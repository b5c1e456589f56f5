"""The controller's view of the Kafka clusters: topics, partition counts, offsets, topic configs.

Clients come from :mod:`common.kafka.clients` (one AdminClient per cluster, kept for the life
of the controller). Every call has a timeout; an unreachable cluster raises :class:`Unavailable`.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from ferry.common.core.topics.replicas import replica_count
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.kafka.pool import ClientPool
from ferry.controller.errors import Unavailable

TIMEOUT_S = 10.0
# What a client future's result(timeout) raises (the builtin TimeoutError from Python 3.11 on).
FutureTimeout = concurrent.futures.TimeoutError


class ClusterMetadata:
    def __init__(self, clusters: Mapping[str, Mapping[str, Any]]) -> None:
        self._clusters = clusters
        self._admins: ClientPool[str] = ClientPool(lambda cluster: kafka_clients.admin(clusters[cluster]))
        # Only reads committed offsets: never subscribes, assigns or commits.
        self._consumers: ClientPool[tuple[str, str]] = ClientPool(
            lambda key: kafka_clients.consumer(clusters[key[0]], key[1])
        )

    def _admin(self, cluster: str) -> Any:
        return self._admins[cluster]

    def _unavailable(self, cluster: str, exc: KafkaException | FutureTimeout) -> Unavailable:
        if isinstance(exc, FutureTimeout):
            return Unavailable(f"cluster {cluster!r} cannot be reached: no answer within {TIMEOUT_S:.0f}s")
        return Unavailable(f"cluster {cluster!r} cannot be reached: {kafka_error(exc)}")

    def reachable(self, cluster: str, timeout: float = 3.0) -> bool:
        """Whether ``cluster`` answers a metadata request within ``timeout``."""
        try:
            self._admin(cluster).list_topics(timeout=timeout)
        except KafkaException:
            return False
        return True

    def topics(self, cluster: str) -> dict[str, int]:
        """Every topic of ``cluster`` -> its partition count."""
        try:
            metadata = self._admin(cluster).list_topics(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        return {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}

    def partition_count(self, cluster: str, topic: str) -> int | None:
        """``topic``'s partition count on ``cluster``, or None when it does not exist there."""
        try:
            metadata = self._admin(cluster).list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        if metadata is None:
            return None
        if metadata.error is not None:
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return None
            raise Unavailable(f"cluster {cluster!r}: {metadata.error.str()}")
        return len(metadata.partitions)

    def replication_factors(self, cluster: str, topics: Iterable[str]) -> dict[str, int]:
        """Topic -> its replica count on ``cluster``, for those of ``topics`` that exist there."""
        wanted = set(topics)
        if not wanted:
            return {}
        try:
            metadata = self._admin(cluster).list_topics(timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        return {
            name: replica_count(len(p.replicas) for p in t.partitions.values())
            for name, t in metadata.topics.items()
            if name in wanted and t.error is None
        }

    def end_offsets(self, cluster: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Log-end offset of each (topic, partition); partitions the cluster does not answer for are left out."""
        try:
            return kafka_clients.log_offsets(self._admin(cluster), partitions, True, TIMEOUT_S)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        except TimeoutError:
            raise self._unavailable(cluster, FutureTimeout()) from None

    def committed(self, cluster: str, group: str, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Committed offset of ``group`` for each (topic, partition) that has one."""
        tps = [TopicPartition(t, p) for t, p in partitions]
        if not tps:
            return {}
        try:
            answered = self._consumers[(cluster, group)].committed(tps, timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        finally:
            kafka_clients.serve_logs(self._consumers[(cluster, group)])  # never consumes: its log waits for a poll
        return {(tp.topic, tp.partition): tp.offset for tp in answered if tp.offset >= 0}

    def topic_configs(self, cluster: str, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """Topic -> the configs set on the topic itself (not broker defaults)."""
        resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
        if not resources:
            return {}
        try:
            futures = self._admin(cluster).describe_configs(resources, request_timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise self._unavailable(cluster, exc) from None
        result: dict[str, dict[str, str]] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(TIMEOUT_S)
            except KafkaException:
                continue
            except FutureTimeout as exc:
                raise self._unavailable(cluster, exc) from None
            result[resource.name] = {
                name: entry.value
                for name, entry in entries.items()
                if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                and not entry.is_sensitive
                and entry.value is not None
            }
        return result

    def set_topic_configs(self, cluster: str, topic: str, changes: Mapping[str, str]) -> None:
        if not changes:
            return
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in changes.items()
            ],
        )
        try:
            self._admin(cluster).incremental_alter_configs([resource], request_timeout=TIMEOUT_S)[resource].result(
                TIMEOUT_S
            )
        except (KafkaException, FutureTimeout) as exc:
            raise self._unavailable(cluster, exc) from None

    def close(self) -> None:
        for consumer in self._consumers:
            consumer.close()
        self._consumers.clear()
