"""What the worker's gap-less destination producer relies on, against a real broker.

An at-least-once route's producer takes ``GAPLESS_SETTINGS`` (worker/copying/committer.py): with them a
record of a partition is never written after an earlier one of it failed, so the records between a
delivery run's ends need no report of their own. Without them librdkafka skips a refused batch and
writes what follows: the gap those reports are there to catch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import create_topics, end_offsets
from ferry.worker.copying.committer import GAPLESS_SETTINGS


def _values(cluster: dict[str, str], topic: str) -> list[bytes]:
    end = end_offsets(kafka_clients.admin(cluster), topic).get(0, 0)
    consumer = kafka_clients.consumer(cluster, "gapless-check")
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    try:
        while len(values) < end:
            message = consumer.poll(10)
            assert message is not None, f"{len(values)} of {end} records read"
            if message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


@pytest.mark.parametrize("gapless", [True, False], ids=["gapless", "librdkafka-default"])
def test_a_refused_batch_is_never_followed_by_a_later_record_of_its_partition_when_gapless(
    cluster_conf: Callable[[str], dict[str, str]], topic_name: Callable[[str], str], gapless: bool
) -> None:
    cluster = cluster_conf("dst")
    topic = topic_name("gapless")
    create_topics(kafka_clients.admin(cluster), [NewTopic(topic, 1, 1, config={"max.message.bytes": "5000"})])
    settings: dict[str, Any] = {"linger.ms": 50}
    settings.update(GAPLESS_SETTINGS if gapless else {"message.timeout.ms": 30_000})
    producer = kafka_clients.producer(cluster, **settings)
    reports: dict[str, KafkaError | None] = {}

    def report(name: str) -> Callable[[KafkaError | None, Any], None]:
        return lambda error, _message: reports.__setitem__(name, error)

    def serve() -> None:
        for _ in range(10):  # a callback that meets the fatal error raises it: serve the rest after
            try:
                producer.flush(10)
                return
            except (KafkaException, SystemError):
                continue

    producer.produce(topic, b"first", None, 0, report("first"))
    serve()
    # One batch (linger) larger than the topic allows: the broker refuses all three.
    producer.produce(topic, b"before", None, 0, report("before"))
    producer.produce(topic, b"x" * 20_000, None, 0, report("big"))
    producer.produce(topic, b"after", None, 0, report("after"))
    serve()
    assert reports["first"] is None
    assert reports["big"] is not None and reports["big"].code() == KafkaError.MSG_SIZE_TOO_LARGE
    try:
        producer.produce(topic, b"later", None, 0, report("later"))
        serve()
    except KafkaException as exc:
        assert gapless and exc.args[0].code() == KafkaError._FATAL
    if gapless:
        assert _values(cluster, topic) == [b"first"]  # failed for good: nothing after the refused batch
    else:
        assert _values(cluster, topic) == [b"first", b"later"]  # the gap
