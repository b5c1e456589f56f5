"""common/kafka/topics.py: an internal topic is created once per cluster with its cluster's replication factor
capped at the cluster's brokers, and one that exists already is no error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.kafka.topics import InternalTopic


class Admin:
    def __init__(self, answer: int | None = None, brokers: int = 1) -> None:
        self.answer = answer
        self.asked = 0
        self.brokers = brokers
        self.created: list[tuple[str, int]] = []

    def list_topics(self, topic: str, timeout: float) -> Any:
        return SimpleNamespace(brokers=dict.fromkeys(range(self.brokers)))

    def create_topics(self, topics: list[NewTopic]) -> dict[str, Any]:
        self.asked += 1
        self.created.extend((t.topic, t.replication_factor) for t in topics)

        def result(timeout: float) -> None:
            if self.answer is not None:
                raise KafkaException(KafkaError(self.answer))

        return {t.topic: SimpleNamespace(result=result) for t in topics}


def test_created_once_per_cluster() -> None:
    topic, admin = InternalTopic("__ferry_x", 1.0, lambda cluster: 3), Admin()
    assert not topic.ready("a")
    topic.ensure("a", lambda: admin)
    topic.ensure("a", lambda: admin)
    assert admin.asked == 1 and topic.ready("a") and not topic.ready("b")
    topic.ensure("b", lambda: admin)
    assert admin.asked == 2


def test_one_created_by_another_process_is_ready() -> None:
    topic = InternalTopic("__ferry_x", 1.0, lambda cluster: 3)
    topic.ensure("a", lambda: Admin(KafkaError.TOPIC_ALREADY_EXISTS))
    assert topic.ready("a")


def test_a_refusal_raises_and_is_asked_again() -> None:
    topic, admin = (
        InternalTopic("__ferry_x", 1.0, lambda cluster: 3),
        Admin(KafkaError.TOPIC_AUTHORIZATION_FAILED),
    )
    with pytest.raises(KafkaException):
        topic.ensure("a", lambda: admin)
    assert not topic.ready("a")
    admin.answer = None
    topic.ensure("a", lambda: admin)
    assert topic.ready("a") and admin.asked == 2


def test_each_cluster_gets_its_replication_factor_capped_at_its_brokers(caplog: pytest.LogCaptureFixture) -> None:
    topic = InternalTopic("__ferry_x", 1.0, {"a": 3, "b": 2, "c": 3}.__getitem__)
    big, small = Admin(brokers=5), Admin(brokers=1)
    topic.ensure("a", lambda: big)
    topic.ensure("b", lambda: big)
    assert big.created == [("__ferry_x", 3), ("__ferry_x", 2)]
    assert not [r for r in caplog.records if "instead of" in r.message]
    topic.ensure("c", lambda: small)
    assert small.created == [("__ferry_x", 1)]
    assert [r.message for r in caplog.records if "instead of" in r.message] == [
        "created __ferry_x on c with 1 replicas instead of 3: the cluster has 1 brokers"
    ]
