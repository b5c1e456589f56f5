"""The local stack is real: ZooKeeper nodes and watches, Kafka records and topics."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from confluent_kafka import TopicPartition
from kazoo.client import KazooClient

from ferry.common.kafka import clients as kafka_clients


def test_kazoo_creates_and_watches_nodes(zk: KazooClient) -> None:
    seen: list[list[str]] = []
    changed = threading.Event()

    @zk.ChildrenWatch("/")
    def _children(children: list[str]) -> None:
        seen.append(sorted(children))
        if "w-ephemeral" in children:
            changed.set()

    zk.create("/workers/w1", b"hello", makepath=True)
    zk.create("/w-ephemeral", b"", ephemeral=True)
    assert changed.wait(10), seen
    assert seen[0] == []  # the watch fired first with the empty chroot
    data, stat = zk.get("/workers/w1")
    assert data == b"hello" and stat.version == 0
    assert zk.server_version()[0] == 3


def test_records_round_trip_with_keys_headers_and_timestamps(
    cluster_conf: Callable[[str], dict[str, str]], create_topic: Callable[..., None], topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("roundtrip")
    create_topic("src", topic, partitions=2)
    producer = kafka_clients.producer(cluster_conf("src"))
    sent = []
    now_ms = int(time.time() * 1000)  # recent timestamps: older records may be deleted by retention
    for i in range(20):
        record = (f"k{i}".encode(), f"v{i}".encode(), [("h1", b"a"), ("n", str(i).encode())], now_ms - 60_000 + i)
        producer.produce(topic, key=record[0], value=record[1], headers=record[2], timestamp=record[3], partition=i % 2)
        sent.append(record)
    assert producer.flush(30) == 0

    consumer = kafka_clients.consumer(cluster_conf("src"), group_id=f"g-{topic}")
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got = []
    for _ in range(100):
        got.extend(m for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None)
        if len(got) >= len(sent):
            break
    consumer.close()
    received = sorted((m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got)
    assert received == sorted(sent)


def test_admin_creates_a_topic_on_dst_and_sees_its_partitions(
    cluster_conf: Callable[[str], dict[str, str]], create_topic: Callable[..., None], topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("dst-admin")
    create_topic("dst", topic, partitions=4)
    metadata = kafka_clients.admin(cluster_conf("dst")).list_topics(topic=topic, timeout=10)
    assert sorted(metadata.topics[topic].partitions) == [0, 1, 2, 3]
    # The clusters are independent: the topic exists on dst only.
    src_topics = kafka_clients.admin(cluster_conf("src")).list_topics(timeout=10).topics
    assert topic not in src_topics


def test_topics_are_not_auto_created(
    cluster_conf: Callable[[str], dict[str, str]], topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("never-created")
    producer = kafka_clients.producer(cluster_conf("src"), **{"message.timeout.ms": 3000})
    errors = []
    producer.produce(topic, value=b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
