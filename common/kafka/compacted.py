"""Reading a small compacted topic whole: every record from its start to its end as it is now.

For topics other programs keep their state in (MirrorMaker 2's offsets, offset syncs and
checkpoints), read once when Ferry takes their work over.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from ferry.common.errors import UnreachableError
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error

READ_DEADLINE_S = 30.0
_METADATA_TIMEOUT_S = 10.0


def read_topic(
    cluster: Mapping[str, Any],
    topic: str,
    client_id: str,
    deadline_s: float = READ_DEADLINE_S,
    clock: Callable[[], float] = time.monotonic,
) -> list[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of ``topic`` up to its end now, partition by partition in order; [] when
    the topic does not exist. :class:`UnreachableError` when the cluster does not answer, or the
    topic is not read to its end within ``deadline_s``."""
    # assign()-only: the group id is never joined or committed to; librdkafka wants one.
    consumer = kafka_clients.consumer(cluster, f"ferry.read.{client_id}", **{"client.id": client_id})
    try:
        metadata = consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return []
        ends = {}
        for partition in metadata.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=_METADATA_TIMEOUT_S)
            if high > low:
                ends[partition] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        found: list[tuple[bytes | None, bytes | None]] = []
        positions: dict[int, int] = {}
        give_up = clock() + deadline_s
        while ends:
            if clock() > give_up:
                raise UnreachableError(f"{topic}: not read to its end within {deadline_s:.0f} s")
            for message in consumer.consume(kafka_clients.batch_to_end(ends, positions, 1000), 0.5):
                if message.error() is not None:
                    continue
                found.append((message.key(), message.value()))
                positions[message.partition() or 0] = (message.offset() or 0) + 1
                if (message.offset() or 0) + 1 >= ends.get(message.partition() or 0, 0):
                    ends.pop(message.partition() or 0, None)
        return found
    except KafkaException as exc:
        raise UnreachableError(f"{topic}: {kafka_error(exc)}") from None
    finally:
        consumer.close()
