"""The bench's ``core-copy`` loop (``bench/native/core.c`` inside this process, over confluent-kafka's own
clients) copies every record as Ferry's stamper would: same partition, key, value, timestamp and headers,
plus the provenance header Python's :class:`Stamper` writes for its source offset."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from ferry.bench import copy_core
from ferry.common.core.provenance import Stamper
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack
from tests.harness.processes import wait_until

PARTITIONS = 3
RECORDS = 600


def _read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[Any] = []

        def read() -> bool:
            out.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
            return len(out) >= count

        wait_until(read, 60, f"{count} records of {topic}")
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def test_the_core_copy_loop_copies_every_record_with_the_stampers_header(
    local_stack: devstack.Stack,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("core")
    src, dst = local_stack.bootstrap("src"), local_stack.bootstrap("dst")
    create_topic("src", topic, PARTITIONS)
    create_topic("dst", topic, PARTITIONS)
    producer = kafka_clients.producer({"bootstrap.servers": src})
    for i in range(RECORDS):
        headers = [("app", f"h{i}".encode())] if i % 3 else None
        producer.produce(
            topic, f"v{i}".encode(), f"k{i}".encode(), i % PARTITIONS, timestamp=1_700_000_000_000 + i, headers=headers
        )
    assert producer.flush(30) == 0

    consumer = kafka_clients.consumer({"bootstrap.servers": src}, "ferry-test-core")
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    copier = kafka_clients.producer({"bootstrap.servers": dst})
    watcher = Consumer({"bootstrap.servers": dst, "group.id": "watch"})
    checks = 0

    def copied_all() -> bool:
        nonlocal checks
        checks += 1
        if checks % 20:
            return False
        ends = [watcher.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(PARTITIONS)]
        return sum(ends) >= RECORDS

    try:
        assert copy_core.copy(consumer, copier, [topic], copied_all) == []
        assert copier.flush(30) == 0
    finally:
        consumer.close()
        watcher.close()

    originals = _read_all(src, topic, RECORDS)
    copies = _read_all(dst, topic, RECORDS)
    assert len(copies) == RECORDS
    stamp = Stamper("src").for_topic(topic, topic).stamp
    for original, copy in zip(originals, copies, strict=True):
        assert (copy.partition(), copy.offset(), copy.key(), copy.value(), copy.timestamp()) == (
            original.partition(),
            original.offset(),
            original.key(),
            original.value(),
            original.timestamp(),
        )
        assert copy.headers() == stamp(original.headers(), original.offset())
