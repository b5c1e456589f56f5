"""Reading a topic as a reader of an exactly-once destination does: ``isolation.level=read_committed``.

A route writes its destination in Kafka transactions (exactly once, the default), so each committed
transaction's marker takes a destination offset, and so do the copies of a killed writer's aborted
transaction: a partition's log-end offset is not its record count. These helpers read up to each
partition's last stable offset (the end of its committed transactions) by the consumer's position,
which passes over markers and aborted records, and count or return what a read_committed reader gets.
On a topic no transaction writes they read exactly what the log-end offsets say.
"""

from __future__ import annotations

import os
import time
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from ferry.common.core import provenance
from ferry.common.kafka import clients as kafka_clients


def stable_ends(cluster: dict[str, str], topic: str, timeout: float = 10) -> dict[int, int]:
    """Partition -> last stable offset of ``topic`` (its log end once no transaction is open there);
    empty while the topic does not exist."""
    admin = kafka_clients.admin(cluster)
    metadata = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        return {}
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in metadata.partitions}
    futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
    return {tp.partition: int(future.result().offset) for tp, future in futures.items()}


def read(cluster: dict[str, str], topic: str, timeout: float = 60) -> dict[int, list[Any]]:
    """Partition -> the records (confluent_kafka messages, in offset order) a read_committed reader gets
    from the start of ``topic`` up to its last stable offsets as they are when the read starts; fails
    naming the partitions not read to there within ``timeout`` s."""
    ends = stable_ends(cluster, topic)
    records: dict[int, list[Any]] = {p: [] for p in ends}
    unread = {p for p, end in ends.items() if end > 0}
    if not unread:
        return records
    consumer = kafka_clients.consumer(
        cluster, f"read-committed-{os.urandom(4).hex()}", **{"isolation.level": "read_committed"}
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(unread)])
    deadline = time.monotonic() + timeout
    try:
        while unread and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.2):
                if message.error() is None and message.offset() < ends[message.partition()]:
                    records[message.partition()].append(message)
            positions = consumer.position([TopicPartition(topic, p) for p in unread])
            unread -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    finally:
        consumer.close()
    assert not unread, f"{topic}: not read to its last stable offsets {ends} within {timeout:.0f} s: {sorted(unread)}"
    return records


def count(cluster: dict[str, str], topic: str, partition: int = 0) -> int:
    """How many records a read_committed reader gets from ``topic``'s ``partition`` now (0 while the
    topic does not exist)."""
    return len(read(cluster, topic).get(partition, []))


def counts(cluster: dict[str, str], topic: str) -> dict[int, int]:
    """Partition -> how many records a read_committed reader gets there now."""
    return {p: len(records) for p, records in read(cluster, topic).items()}


def copy_offsets(
    cluster: dict[str, str],
    topic: str,
    source: str,
    partition: int = 0,
    *,
    source_cluster: dict[str, str],
    source_topic: str | None = None,
) -> dict[int, int]:
    """Source offset -> the offset of its newest copy on ``topic``'s ``partition``, for the records a
    route from cluster ``source`` (reached at ``source_cluster``; its topic ``source_topic``, by default
    ``topic``) copied there (their provenance header). A group that read a source partition up to offset
    ``c`` goes on, on the destination, right after the copy of ``c - 1``: with the route's transaction
    markers between the copies, that is not ``c``.

    An at-least-once route's header says the copy's source offset. An exactly-once route's does not (its
    offset map says it, which these tests check): there the copy's source offset is the offset of the
    source record with the same key, value and timestamp, read from the source (the tests' records are
    unique; a source with two equal records fails here)."""
    contents: dict[tuple[Any, Any, int], int] | None = None
    out: dict[int, int] = {}
    for message in read(cluster, topic).get(partition, []):
        origin = provenance.read(message.headers())
        if origin is None or origin.source != source:
            continue
        source_offset = origin.source_offset
        if source_offset is None:
            if contents is None:
                contents = source_offsets_by_content(read(source_cluster, source_topic or topic).get(partition, []))
            source_offset = contents[content(message)]
        out[source_offset] = message.offset()
    return out


def content(message: Any) -> tuple[Any, Any, int]:
    """What identifies a test's record and its copies: key, value and timestamp."""
    return message.key(), message.value(), message.timestamp()[1]


def source_offsets_by_content(messages: list[Any]) -> dict[tuple[Any, Any, int], int]:
    """:func:`content` -> offset of each of a source partition's ``messages``; fails on two equal records."""
    out: dict[tuple[Any, Any, int], int] = {}
    for message in messages:
        found = content(message)
        assert found not in out, f"two source records with the same key, value and timestamp: {found!r}"
        out[found] = message.offset()
    return out
