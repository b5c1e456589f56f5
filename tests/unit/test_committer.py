"""worker/copying/committer.py: the destination producer's life and the commits, with fake clients."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.common.core.offset_map import OffsetMap
from ferry.common.kafka import clients as kafka_clients
from ferry.worker.copying.committer import COMMIT_RETRY_S, Committer
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeClock, FakeConsumer, FakeMessage, FakeProducer

KEY = (TOPIC, 0)


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    calls: list[tuple[str, Any]] = []
    parts = SimpleNamespace(
        calls=calls, clock=FakeClock(1000.0), consumer=FakeConsumer(calls), producers=[], route_stops=[]
    )

    def make_producer(cluster: Any, on_delivery: Any, **settings: Any) -> FakeProducer:
        parts.producers.append(FakeProducer(calls, on_delivery))
        parts.settings = settings
        return parts.producers[-1]

    monkeypatch.setattr(kafka_clients, "producer", make_producer)
    parts.ledger = DeliveryLedger("src.dst", lambda topic: topic, lambda key, failure: None, WorkerMetrics(), lambda: 0)
    parts.committer = Committer(
        "src.dst",
        {},
        {"batch.size": 100_000},
        parts.consumer,
        parts.ledger,
        lambda topic: topic,
        WorkerMetrics(),
        parts.clock,
        parts.clock.sleep,
        parts.route_stops.append,
    )
    return parts


def _copy(parts: SimpleNamespace, offsets: list[int]) -> None:
    """``offsets`` sent and acknowledged, as the copy loop and the producer would leave them."""
    parts.ledger.resume(KEY, OffsetMap())
    parts.ledger.watermarks.sent_run(KEY, offsets)
    for destination_offset, _ in enumerate(offsets):
        parts.ledger.on_delivery(None, FakeMessage(TOPIC, 0, destination_offset))


def test_a_commit_refused_every_time_gives_up_at_its_deadline_sleeping_the_injected_sleep(
    parts: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy(parts, [0, 1, 2])

    def refuse(offsets: Any, asynchronous: bool) -> None:
        raise KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT))

    monkeypatch.setattr(parts.consumer, "commit", refuse)
    assert not parts.committer.commit_within([KEY], 2.0)
    assert parts.clock.now >= 1002.0 and set(parts.clock.sleeps) == {COMMIT_RETRY_S}
    assert len(parts.clock.sleeps) <= 2.0 / COMMIT_RETRY_S + 1


def test_a_commit_accepted_at_once_does_not_sleep(parts: SimpleNamespace) -> None:
    _copy(parts, [0, 1, 2])
    assert parts.committer.commit_within([KEY], 2.0)
    assert ("commit", [(TOPIC, 0, 3)]) in parts.calls and parts.clock.sleeps == []


def test_a_failed_producer_is_renewed_once_and_not_waited_for(parts: SimpleNamespace) -> None:
    first = parts.committer.producer
    assert parts.committer.fail() and not parts.committer.fail()  # only the first failure stops the route
    parts.committer.hand_over([KEY], flush_timeout=30, commit_deadline=1)
    assert parts.committer.failed and parts.committer.producer is first
    parts.committer.renew_if_failed()
    assert not parts.committer.failed and parts.committer.producer is not first and len(parts.producers) == 2
    parts.committer.renew_if_failed()
    assert len(parts.producers) == 2


def test_batches_shrink_to_a_smaller_destination_limit_with_a_new_producer(parts: SimpleNamespace) -> None:
    parts.committer.fit_batches_to(TOPIC, 200_000)  # already fits
    assert len(parts.producers) == 1
    parts.committer.fit_batches_to(TOPIC, 50_000)
    assert len(parts.producers) == 2 and parts.settings["batch.size"] == 50_000 - 1024
