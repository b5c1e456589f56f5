"""The leader's heartbeat job: writes heartbeats on every route's source, reads them everywhere.

What heartbeats are and how latency is derived: :mod:`common.core.heartbeat`. This module is the I/O:
one producer per source cluster, one group-less reader per cluster (``assign()`` only, never
commits), one AdminClient per cluster to create the heartbeat topic with
``message.timestamp.type=LogAppendTime`` wherever a route touches. Kafka errors are logged and
the next tick tries again; a cluster that is down just stops its heartbeats' arrivals, which the
``sinceLastS`` figures show.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import heartbeat, provenance
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.kafka.pool import ClientPool
from ferry.common.kafka.topics import InternalTopic

log = logging.getLogger(__name__)

_TIMEOUT_S = 5.0


class HeartbeatJob:
    """State: the clusters whose heartbeat topic exists (created once), the readers' assignments,
    and the :class:`common.core.heartbeat.HeartbeatBook`. Driven by one scheduler thread."""

    def __init__(self, config: FerryConfig, routes: Callable[[], list[RouteConfig]], now_ms: Callable[[], int]) -> None:
        self._config = config
        self._routes = routes
        self._now_ms = now_ms
        self.book = heartbeat.HeartbeatBook()
        self._clusters = sorted({c for r in config.routes for c in (r.source, r.destination)})
        self._topic = InternalTopic(
            name=heartbeat.TOPIC,
            timeout_s=_TIMEOUT_S,
            replication_factor=config.internal_topics.replication_factor_on,
            config={"message.timestamp.type": "LogAppendTime"},
        )
        self._producers: ClientPool[str] = ClientPool(lambda cluster: kafka_clients.producer(config.clusters[cluster]))
        self._readers: dict[str, Any] = {}
        self._assigned: dict[str, set[str]] = {}

    def tick(self) -> None:
        routes = self._routes()
        for cluster in self._clusters:
            self._ensure_topic(cluster)
        for source in sorted({r.source for r in routes}):
            if not self._topic.ready(source):
                continue
            producer = self._producers[source]
            try:
                producer.produce(heartbeat.TOPIC, value=heartbeat.encode(source, self._now_ms()), key=source.encode())
                producer.poll(0)
            except (BufferError, KafkaException) as exc:
                log.warning("heartbeat on %s not written: %s", source, exc)
        for cluster in self._clusters:
            names = {heartbeat.TOPIC} | {
                r.destination_topic(heartbeat.TOPIC) for r in routes if r.destination == cluster
            }
            self._read(cluster, names)

    def _ensure_topic(self, cluster: str) -> None:
        try:
            self._topic.ensure(cluster, lambda: kafka_clients.admin(self._config.clusters[cluster]))
        except KafkaException as exc:
            log.warning("heartbeat topic on %s not created yet: %s", cluster, kafka_error(exc))

    def _read(self, cluster: str, names: set[str]) -> None:
        reader = self._readers.get(cluster)
        if reader is None:
            reader = self._readers[cluster] = kafka_clients.consumer(
                self._config.clusters[cluster], group_id=f"ferry.heartbeats.reader.{cluster}"
            )
        assigned = self._assigned.setdefault(cluster, set())
        missing = sorted(names - assigned)
        if missing:
            try:
                topics = reader.list_topics(timeout=_TIMEOUT_S).topics
            except KafkaException:
                return
            new = [
                TopicPartition(t, p, OFFSET_END)
                for t in missing
                if t in topics and topics[t].error is None
                for p in topics[t].partitions
            ]
            if new:
                reader.incremental_assign(new)
                assigned.update(tp.topic for tp in new)
        if not assigned:
            kafka_clients.serve_logs(reader)  # not consuming yet: its log waits for a poll
            return
        while True:
            messages = reader.consume(1000, timeout=0.2)
            if not messages:
                return
            for message in messages:
                if message.error() is not None:
                    continue
                decoded = heartbeat.decode(message.value())
                if decoded is None:
                    continue
                try:
                    headers: Any = message.headers()
                    prov = provenance.read(headers, message.topic())
                except provenance.ProvenanceError:
                    continue
                origin, sent_ms = decoded
                self.book.record(cluster, origin, prov.path if prov else (), sent_ms, message.timestamp()[1])

    def close(self) -> None:
        for reader in self._readers.values():
            with contextlib.suppress(KafkaException, RuntimeError):
                reader.close()
        for producer in self._producers:
            producer.flush(1)
