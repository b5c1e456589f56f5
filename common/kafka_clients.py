"""The one place that builds Kafka clients (confluent-kafka / librdkafka).

Cluster settings come from the config's ``clusters`` entries and pass through as librdkafka
properties (security settings included); Ferry's own defaults for each role sit here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

# A replicator must not lose or reorder: idempotent, fully acknowledged writes.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "compression.type": "none",
    # Memory stays bounded under a backlog: produce() raises BufferError beyond this (librdkafka's
    # default is 1 GiB) and the worker waits for deliveries, which slows consumption.
    "queue.buffering.max.kbytes": 65536,
}

# Ferry consumes with assign(), never subscribe(), and commits only what the destination acked.
CONSUMER_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    # Records fetched ahead of the copy loop, per consumer (librdkafka's default is 64 MiB).
    "queued.max.messages.kbytes": 32768,
    # Larger fetches: one worker's single fetch pipeline per broker bounded its throughput; with
    # 4 MiB per partition it copied 20-25 % more records/s (BENCHMARKS.md).
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
}


def _merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return merged


def producer(cluster: Mapping[str, Any], **overrides: Any) -> Producer:
    return Producer(_merge(PRODUCER_DEFAULTS, cluster, overrides))


def consumer(cluster: Mapping[str, Any], group_id: str, **overrides: Any) -> Consumer:
    return Consumer(_merge(CONSUMER_DEFAULTS, cluster, {"group.id": group_id}, overrides))


def admin(cluster: Mapping[str, Any], **overrides: Any) -> AdminClient:
    return AdminClient(_merge(cluster, overrides))
