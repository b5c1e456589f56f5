"""common/kafka/topics.py: an internal topic is created once per cluster, and one that exists already is no error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.kafka.topics import InternalTopic


class Admin:
    def __init__(self, answer: int | None = None) -> None:
        self.answer = answer
        self.asked = 0

    def create_topics(self, topics: list[NewTopic]) -> dict[str, Any]:
        self.asked += 1

        def result(timeout: float) -> None:
            if self.answer is not None:
                raise KafkaException(KafkaError(self.answer))

        return {t.topic: SimpleNamespace(result=result) for t in topics}


def test_created_once_per_cluster() -> None:
    topic, admin = InternalTopic(NewTopic("__ferry_x", num_partitions=1), 1.0), Admin()
    assert not topic.ready("a")
    topic.ensure("a", lambda: admin)
    topic.ensure("a", lambda: admin)
    assert admin.asked == 1 and topic.ready("a") and not topic.ready("b")
    topic.ensure("b", lambda: admin)
    assert admin.asked == 2


def test_one_created_by_another_process_is_ready() -> None:
    topic = InternalTopic(NewTopic("__ferry_x", num_partitions=1), 1.0)
    topic.ensure("a", lambda: Admin(KafkaError.TOPIC_ALREADY_EXISTS))
    assert topic.ready("a")


def test_a_refusal_raises_and_is_asked_again() -> None:
    topic, admin = (
        InternalTopic(NewTopic("__ferry_x", num_partitions=1), 1.0),
        Admin(KafkaError.TOPIC_AUTHORIZATION_FAILED),
    )
    with pytest.raises(KafkaException):
        topic.ensure("a", lambda: admin)
    assert not topic.ready("a")
    admin.answer = None
    topic.ensure("a", lambda: admin)
    assert topic.ready("a") and admin.asked == 2
