"""common/kafka/topics.py: an internal topic is created once per cluster with its cluster's replication factor
capped at the cluster's brokers, and one that exists already is no error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.core.topics.replicas import Replicas
from ferry.common.kafka.topics import InternalTopic, WaitingForBrokers


class Admin:
    """An admin client of a cluster whose brokers ``0 .. brokers-1`` are registered, and whose existing
    topic has replicas on ``holders`` (registered or not)."""

    def __init__(self, answer: int | None = None, brokers: int = 1, holders: tuple[int, ...] = ()) -> None:
        self.answer = answer
        self.asked = 0
        self.brokers = brokers
        self.holders = holders
        self.created: list[tuple[str, int]] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        partition = SimpleNamespace(replicas=list(self.holders))
        return SimpleNamespace(
            brokers=dict.fromkeys(range(self.brokers)),
            topics={"__consumer_offsets": SimpleNamespace(partitions={0: partition})} if self.holders else {},
        )

    def create_topics(self, topics: list[NewTopic]) -> dict[str, Any]:
        self.asked += 1
        self.created.extend((t.topic, t.replication_factor) for t in topics)

        def result(timeout: float) -> None:
            if self.answer is not None:
                raise KafkaException(KafkaError(self.answer))

        return {t.topic: SimpleNamespace(result=result) for t in topics}


def test_created_once_per_cluster() -> None:
    topic, admin = InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor=lambda cluster: 3), Admin()
    assert not topic.ready("a")
    topic.ensure("a", lambda: admin)
    topic.ensure("a", lambda: admin)
    assert admin.asked == 1 and topic.ready("a") and not topic.ready("b")
    topic.ensure("b", lambda: admin)
    assert admin.asked == 2


def test_one_created_by_another_process_is_ready() -> None:
    topic = InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor=lambda cluster: 3)
    topic.ensure("a", lambda: Admin(KafkaError.TOPIC_ALREADY_EXISTS))
    assert topic.ready("a")


def test_a_refusal_raises_and_is_asked_again() -> None:
    topic, admin = (
        InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor=lambda cluster: 3),
        Admin(KafkaError.TOPIC_AUTHORIZATION_FAILED),
    )
    with pytest.raises(KafkaException):
        topic.ensure("a", lambda: admin)
    assert not topic.ready("a")
    admin.answer = None
    topic.ensure("a", lambda: admin)
    assert topic.ready("a") and admin.asked == 2


def test_each_cluster_gets_its_replication_factor_capped_at_its_brokers(caplog: pytest.LogCaptureFixture) -> None:
    topic = InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor={"a": 3, "b": 2, "c": 3}.__getitem__)
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


def test_a_topic_waits_while_a_broker_that_holds_replicas_is_away_and_is_created_whole_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor=lambda cluster: 3)
    restarting = Admin(brokers=2, holders=(0, 1, 2))  # broker 2 holds replicas but is not registered
    with pytest.raises(WaitingForBrokers) as waiting:
        topic.ensure("a", lambda: restarting)
    assert isinstance(waiting.value, KafkaException)  # a temporary condition to the callers
    assert "2 of the cluster's 3 brokers are registered (missing: [2])" in str(waiting.value)
    assert restarting.asked == 0 and not topic.ready("a")
    back = Admin(brokers=3, holders=(0, 1, 2))
    assert topic.ensure("a", lambda: back) == Replicas(3, 3)
    assert back.created == [("__ferry_x", 3)] and topic.ready("a")
    assert not [r for r in caplog.records if "instead of" in r.message]


def test_a_smaller_cluster_caps_at_its_size_though_a_broker_is_away() -> None:
    # Wanted 5 on a cluster of 3 known brokers, 2 registered: not now, then 3 (the cluster's size).
    topic = InternalTopic(name="__ferry_x", timeout_s=1.0, replication_factor=lambda cluster: 5)
    with pytest.raises(WaitingForBrokers):
        topic.ensure("a", lambda: Admin(brokers=2, holders=(0, 1, 2)))
    assert topic.ensure("a", lambda: Admin(brokers=3, holders=(0, 1, 2))) == Replicas(3, 5)
