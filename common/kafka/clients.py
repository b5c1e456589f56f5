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
    # Measured (issue 17; BENCHMARKS.md "Client settings by measurement"). Once the prefetch queue
    # is over queued.min.messages or the kbytes cap above, librdkafka stops fetching for this long.
    # Its default, 1000 ms, is several times what the copy loop takes to drain the queue on a
    # quiet machine, so a busy worker sat idle most of each second (a hot partition at 0.5x);
    # 0 makes the fetcher spin while the queue is full (23-45 % more CPU per record, measured);
    # 10 ms removed the spin and leaves at most 10 ms idle per drained queue.
    "fetch.queue.backoff.ms": 10,
    # fetch.wait.max.ms stays librdkafka's 500: it only bounds how long the broker holds a fetch
    # that found nothing (a record arriving ends the wait at once), so 10-100 ms bought no
    # measurable records/s, but they make an idle worker poll: 200 idle partitions cost 2.2 % of
    # a core at 10 ms, 1.3 % at 25, 0.55 % at 100, 0.35 % at 500 (measured).
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
