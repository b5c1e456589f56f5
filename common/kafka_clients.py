"""The one place that builds Kafka clients (confluent-kafka / librdkafka).

Cluster settings come from the config's ``clusters`` entries and pass through as librdkafka
properties (security settings included); Ferry's own defaults for each role sit here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
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


Role = Literal["producer", "consumer", "admin"]
ROLES: tuple[Role, ...] = ("producer", "consumer", "admin")
_AS = {"producer": "as a producer", "consumer": "as a consumer", "admin": "as an admin client"}

# librdkafka's own log lines while a client is built only to check its properties.
_SILENT = logging.getLogger("ferry.kafka_clients.check")
_SILENT.setLevel(logging.CRITICAL + 1)
_SILENT.propagate = False
_CREATE = re.compile(r"^Failed to create [a-z ]+: ")
_NAMED = re.compile(r' for configuration property "[^"]+"|: "[^"]+"$')


def _build_offline(properties: Mapping[str, Any], role: Role) -> None:
    """Builds and closes the ``role`` client librdkafka would make of ``properties``, without
    ``bootstrap.servers``: nothing connects, yet every property name and value is checked."""
    conf = {key: value for key, value in properties.items() if key != "bootstrap.servers"}
    conf["logger"] = _SILENT
    if role == "producer":
        Producer(conf)
    elif role == "consumer":
        Consumer(conf).close()
    else:
        AdminClient(conf)


def _refusal(exc: Exception, secrets: list[str]) -> str:
    error = exc.args[0] if exc.args else None
    text = error.str() if isinstance(error, KafkaError) else str(exc)
    for secret in secrets:  # librdkafka may quote a value: never a secret one
        text = text.replace(secret, "***")
    return text


def property_problems(cluster: Mapping[str, Any], role: Role) -> list[str]:
    """What librdkafka refuses in a cluster's properties merged as Ferry merges them for ``role``
    (its defaults, the cluster's properties, a group id), each as ``"<property>: <why>"`` or, for
    a refusal of the whole set (``acks`` against ``enable.idempotence``, an unreadable
    ``ssl.ca.location``), ``"as a producer: <why>"`` (consumer, admin client). Builds clients but never connects.

    Each of the cluster's properties is tried on its own first, so that every misspelled name or
    bad value is named as written (librdkafka stops at the first, under its canonical name).
    """
    defaults = {"producer": PRODUCER_DEFAULTS, "consumer": CONSUMER_DEFAULTS, "admin": {}}[role]
    base = _merge(defaults, {"group.id": "ferry.check"} if role == "consumer" else {})
    secrets = [str(value) for key, value in cluster.items() if type(value) is not str and isinstance(value, str)]
    problems: list[str] = []
    refused: set[str] = set()
    for key, value in cluster.items():
        if key == "bootstrap.servers":
            continue
        try:
            _build_offline({**base, key: value}, role)
        except (KafkaException, TypeError, ValueError) as exc:
            text = _refusal(exc, secrets)
            if not text.startswith("Failed to create"):  # that one depends on the other properties
                refused.add(key)
                why = _NAMED.sub("", text)
                problems.append(f"{key}: {why} {value!r}" if why == "Invalid value" else f"{key}: {why}")
    try:
        _build_offline(_merge(base, {k: v for k, v in cluster.items() if k not in refused}), role)
    except (KafkaException, TypeError, ValueError) as exc:
        text = _refusal(exc, secrets)
        problems.append(f"{_AS[role]}: {_CREATE.sub('', text)}")
    return problems
