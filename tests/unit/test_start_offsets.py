"""worker/position/start_offsets.py: committed offsets read with retries, and explicit start offsets
(librdkafka#5586)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition

from ferry.worker.position.start_offsets import committed_offsets, reset_offset
from tests.fakes import FakeClock


class Coordinator:
    """A consumer whose committed() fails with ``errors`` (one per call, None: request OK), then answers."""

    def __init__(self, errors: list[Any], committed: dict[int, int]) -> None:
        self.errors = errors
        self.committed_offsets = committed
        self.calls = 0

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[Any]:
        assert timeout > 0
        self.calls += 1
        error = self.errors.pop(0) if self.errors else None
        if isinstance(error, KafkaError):
            raise KafkaException(error)
        out = []
        for tp in partitions:
            failed = (
                KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)
                if error == "per-partition" and tp.partition == 0
                else None
            )
            # TopicPartition's error is read-only: a look-alike carries a per-partition error.
            out.append(
                SimpleNamespace(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=self.committed_offsets.get(tp.partition, -1001),
                    error=failed,
                )
            )
        return out


PARTITIONS = [TopicPartition("t", 0), TopicPartition("t", 1)]


def test_not_coordinator_is_retried_with_backoff_until_the_coordinator_answers() -> None:
    fake = FakeClock()
    coordinator = Coordinator(
        [KafkaError(KafkaError.NOT_COORDINATOR), KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE), "per-partition"],
        {1: 41},
    )
    found = committed_offsets(coordinator, PARTITIONS, deadline_s=10, clock=fake, sleep=fake.sleep)
    assert found == {0: None, 1: 41}
    assert coordinator.calls == 4 and fake.sleeps == [0.2, 0.4, 0.8]


def test_the_error_surfaces_at_the_deadline_and_a_permanent_one_at_once() -> None:
    fake = FakeClock()
    endless = Coordinator([KafkaError(KafkaError.NOT_COORDINATOR)] * 100, {})
    with pytest.raises(KafkaException):
        committed_offsets(endless, PARTITIONS, deadline_s=5, clock=fake, sleep=fake.sleep)
    assert fake.now <= 5 and 3 <= endless.calls < 10

    denied = Coordinator([KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED)], {})
    with pytest.raises(KafkaException):
        committed_offsets(denied, PARTITIONS, deadline_s=5, clock=fake, sleep=fake.sleep)
    assert denied.calls == 1


def test_reset_offset_is_an_explicit_logical_offset() -> None:
    assert reset_offset("earliest") == reset_offset("smallest") == OFFSET_BEGINNING
    assert reset_offset("latest") == reset_offset("Largest") == OFFSET_END
    with pytest.raises(ValueError, match="no start offset"):
        reset_offset("error")
