"""The leader's side of fencing against the local stack: the grant's ZooKeeper write refuses to go on
while a fenced worker is live again, and fencing a writer id on a real broker aborts its open
transaction and fails its next write with ``_FENCED``."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient

from ferry.common.kafka import clients as kafka_clients
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.lead.store import Op, Store, WriteConflict
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics

pytestmark = pytest.mark.integration

LAYOUT = ZkLayout("/")


def test_a_grant_written_while_the_fenced_worker_is_live_again_changes_nothing(zk: KazooClient) -> None:
    store = Store(zk, LAYOUT)
    fence = zk.create("/fence", b"")
    zk.ensure_path(LAYOUT.live_workers)
    grant = Op(OpKind.CREATE, "/granted", b"w2")
    store.commit(fence, [grant], absent=[LAYOUT.live_worker("w1")])  # w1 is away: written
    assert zk.exists("/granted") is not None and zk.exists(LAYOUT.live_worker("w1")) is None
    zk.create(LAYOUT.live_worker("w1"), b"", ephemeral=True)  # w1 registered again
    with pytest.raises(WriteConflict, match="registered again"):
        store.commit(fence, [Op(OpKind.CREATE, "/granted-again", b"w2")], absent=[LAYOUT.live_worker("w1")])
    assert zk.exists("/granted-again") is None


def test_fencing_a_writer_id_aborts_its_open_transaction_and_fails_its_next_write(
    local_stack: devstack.Stack, topic_name: Callable[[str], str]
) -> None:
    dst = {"bootstrap.servers": local_stack.bootstrap("dst")}
    topic = topic_name("fenced")
    create_topics(kafka_clients.admin(dst), [NewTopic(topic, 1, 1)])
    writer = kafka_clients.producer(dst, **{"transactional.id": f"ferry.test.{topic}"})
    writer.init_transactions(30)
    writer.begin_transaction()
    writer.produce(topic, b"written before the fence")
    assert writer.flush(30) == 0
    kafka_clients.fence_writer(dst, f"ferry.test.{topic}", 30)
    with pytest.raises(KafkaException) as refused:
        writer.commit_transaction(30)
    fenced = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert refused.value.args[0].code() in fenced
    reader = kafka_clients.consumer(dst, f"check-{topic}", **{"isolation.level": "read_committed"})
    try:
        low, high = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        reader.assign([TopicPartition(topic, 0, low)])
        seen = [m for m in reader.consume(10, 3) if m.error() is None]
    finally:
        reader.close()
    assert seen == [] and high >= 1  # the record took an offset, and read_committed never sees it
