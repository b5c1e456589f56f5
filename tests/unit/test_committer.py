"""worker/copying/committer.py: the destination producer's life and the commits, with fake clients."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.common.core.offset_map import MAP_TOPIC, OffsetMap
from ferry.common.kafka import clients as kafka_clients
from ferry.worker.copying.committer import (
    COMMIT_RETRY_S,
    REGISTRATION_CHECK_S,
    TRANSACTION_CALL_TIMEOUT_S,
    Committer,
)
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.copying.stopping import PartitionStopper
from ferry.worker.errors import RETRY_BACKOFF_S, PartitionDeferred, ProducerFailed
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeClock, FakeConsumer, FakeMessage, FakeProducer

KEY = (TOPIC, 0)


class RecordingStopper(PartitionStopper):
    """The route's stopper, which also keeps every writer failure it was told of."""

    def __init__(self, route_stops: list[ProducerFailed], consumer: Any) -> None:
        super().__init__(
            PartitionStates(route_name="src.dst", consumer=consumer, metrics=WorkerMetrics(), clock=FakeClock(0.0))
        )
        self._route_stops = route_stops

    def stop_route(self, failure: ProducerFailed) -> None:
        if not self.writer_failed:
            self._route_stops.append(failure)
        super().stop_route(failure)


def _ledger() -> DeliveryLedger:
    return DeliveryLedger(
        route_name="src.dst",
        source_name=lambda topic: topic,
        stop=lambda key, failure: None,
        metrics=WorkerMetrics(),
        wall_clock=lambda: 0,
    )


@pytest.fixture
def parts(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    calls: list[tuple[str, Any]] = []
    parts = SimpleNamespace(
        calls=calls, clock=FakeClock(1000.0), consumer=FakeConsumer(calls), producers=[], route_stops=[]
    )

    def make_producer(cluster: Any, **settings: Any) -> FakeProducer:
        parts.producers.append(FakeProducer(calls))
        parts.settings = settings
        return parts.producers[-1]

    monkeypatch.setattr(kafka_clients, "producer", make_producer)
    parts.ledger = _ledger()
    parts.committer = _committer(parts)
    return parts


def _committer(parts: SimpleNamespace, transactional_id: str | None = None) -> Committer:
    """A committer over ``parts``' fakes, with a stopper of its own that keeps the writer's failures in
    ``parts.route_stops``."""
    parts.stopper = RecordingStopper(parts.route_stops, parts.consumer)
    return Committer(
        route_name="src.dst",
        destination={},
        settings={"batch.size": 100_000},
        consumer=parts.consumer,
        ledger=parts.ledger,
        stopper=parts.stopper,
        destination_name=lambda topic: topic,
        metrics=WorkerMetrics(),
        clock=parts.clock,
        sleep=parts.clock.sleep,
        transactional_id=transactional_id,
    )


def _copy(parts: SimpleNamespace, offsets: list[int]) -> None:
    """``offsets`` sent and acknowledged, as the copy loop and the producer would leave them."""
    parts.ledger.resume(KEY, OffsetMap())
    parts.ledger.sent(KEY, offsets)
    run = parts.ledger.open_run()
    run.count = len(offsets)
    run.on_first(None, FakeMessage(TOPIC, 0, 0))
    run.on_last(None, FakeMessage(TOPIC, 0, len(offsets) - 1))


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
    parts.stopper.stop_route(ProducerFailed(PartitionDeferred("a fatal error")))
    parts.stopper.stop_route(ProducerFailed(PartitionDeferred("another")))
    assert len(parts.route_stops) == 1  # only the first failure stops the route
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


@pytest.fixture
def transactional(parts: SimpleNamespace) -> SimpleNamespace:
    """``parts`` with a committer that writes in transactions (an exactly-once route)."""
    parts.committer = _committer(parts, transactional_id="ferry.src.dst.w1")
    return parts


def _sent(parts: SimpleNamespace, offsets: list[int]) -> None:
    """``offsets`` handed to the producer in the open transaction (acknowledged at its next flush)."""
    parts.ledger.resume(KEY, OffsetMap())
    parts.ledger.sent(KEY, offsets)
    run = parts.ledger.open_run()
    run.count = len(offsets)
    for nth in range(len(offsets)):  # one delivery run: callbacks on its first and its last record
        callback = run.on_last if nth == len(offsets) - 1 else run.on_first if nth == 0 else None
        parts.committer.producer.produce(TOPIC, b"v", b"k", partition=0, on_delivery=callback)


def test_an_exactly_once_commit_commits_the_copies_and_their_segments_in_one_transaction_then_the_source(
    transactional: SimpleNamespace,
) -> None:
    parts = transactional
    assert parts.settings["transactional.id"] == "ferry.src.dst.w1"
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    assert parts.committer.commit([KEY])
    names = [name for name, _ in parts.calls]
    assert names.index("init_transactions") < names.index("begin_transaction") < names.index("commit_transaction")
    assert names.index("commit_transaction") < names.index("commit")  # the source offsets after the transaction
    assert ("commit", [(TOPIC, 0, 3)]) in parts.calls
    assert parts.committer.producer.map_writes  # the segments went into the transaction
    assert not parts.committer.in_transaction and parts.route_stops == []


def test_a_transaction_the_destination_refuses_is_aborted_and_nothing_is_committed_at_the_source(
    transactional: SimpleNamespace,
) -> None:
    parts = transactional
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    parts.committer.producer.refuse_commit = KafkaError(KafkaError._TIMED_OUT, txn_requires_abort=True)
    assert parts.committer.commit([KEY])  # nothing may be committed: True, the route restarts instead
    assert ("abort_transaction", None) in parts.calls
    assert not any(name == "commit" for name, _ in parts.calls)
    assert parts.committer.failed and not parts.committer.fenced
    (failure,) = parts.route_stops
    assert "transaction aborted" in str(failure) and not failure.fenced
    assert parts.committer.commit([KEY]) and not any(name == "commit" for name, _ in parts.calls)


def test_a_fenced_writer_fails_for_good_and_says_so(transactional: SimpleNamespace) -> None:
    parts = transactional
    assert parts.committer.begin()
    _sent(parts, [0])
    parts.committer.producer.refuse_commit = KafkaError(KafkaError._FENCED, fatal=True)
    parts.committer.commit([KEY])
    assert parts.committer.failed and parts.committer.fenced
    assert parts.route_stops[0].fenced and "fenced" in str(parts.route_stops[0])
    fenced_writer = parts.committer.producer
    parts.committer.renew_if_failed()  # its partitions released: a fenced writer stays fenced
    assert parts.committer.fenced and parts.committer.failed and parts.committer.producer is fenced_writer
    assert not parts.committer.begin()
    parts.committer.renew_fenced()  # the worker registered again
    assert not parts.committer.fenced and not parts.committer.in_transaction
    assert parts.committer.begin() and [n for n, _ in parts.calls].count("init_transactions") == 2


def test_a_commit_that_timed_out_is_not_aborted_and_its_partitions_commit_nothing_until_released(
    transactional: SimpleNamespace,
) -> None:
    """The coordinator may still commit a transaction whose commit timed out: it is not taken for
    aborted. The producer fails; nothing of the partition is committed at the source, by this producer
    or the next, until the partition is released; the next producer registers before it is used."""
    parts = transactional
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    unsure = parts.committer.producer
    unsure.refuse_commit = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
    assert parts.committer.commit([KEY])
    assert ("abort_transaction", None) not in parts.calls and parts.committer.failed
    (failure,) = parts.route_stops
    assert "unknown" in str(failure) and not failure.fenced
    parts.committer.renew_if_failed()
    assert parts.committer.producer is not unsure and not parts.committer.failed
    parts.committer.settle()  # what a partition's start does before it reads the destination back
    assert parts.calls[-1] == ("init_transactions", None)
    assert parts.committer.commit([KEY]) and not any(name == "commit" for name, _ in parts.calls)
    parts.committer.forget(KEY)  # released: a new start commits again
    parts.ledger.forget(KEY)
    _copy(parts, [0])
    assert parts.committer.commit([KEY]) and ("commit", [(TOPIC, 0, 1)]) in parts.calls


def test_a_registration_the_coordinator_does_not_answer_defers_the_start_and_its_retries_only_look_again(
    transactional: SimpleNamespace,
) -> None:
    """The destination's transaction coordinator does not answer (its broker restarts): the first
    registration waits its whole call timeout, and the start is deferred naming the coordinator. The
    registration goes on inside the producer, so each retry only looks whether it finished, holding the
    copy loop (every route of the worker) briefly; once the coordinator answers, the next retry
    registers. A new producer's registration waits its whole timeout again."""
    parts = transactional
    producer = parts.committer.producer
    producer.coordinator_away = True
    for _ in range(3):
        with pytest.raises(PartitionDeferred, match="transaction coordinator") as deferred:
            parts.committer.settle()
        assert deferred.value.retry_after_s == RETRY_BACKOFF_S
    assert producer.init_timeouts == [TRANSACTION_CALL_TIMEOUT_S, REGISTRATION_CHECK_S, REGISTRATION_CHECK_S]
    assert not parts.committer.failed and parts.route_stops == []
    producer.coordinator_away = False
    parts.committer.settle()
    assert parts.calls[-1] == ("init_transactions", None) and parts.committer.begin()
    parts.committer.settle()  # registered: nothing more to wait for
    assert len(producer.init_timeouts) == 4
    parts.committer.producer.refuse_commit = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
    parts.committer.commit([KEY])  # its outcome unknown: a new producer registers before the route restarts
    parts.committer.renew_if_failed()
    parts.committer.settle()
    assert parts.committer.producer is not producer
    assert parts.committer.producer.init_timeouts == [TRANSACTION_CALL_TIMEOUT_S]


def test_an_exactly_once_commit_leaves_its_segments_to_the_transactions_commit_with_no_wait_of_their_own(
    transactional: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit_transaction sends the segments past linger.ms and fails when one failed: a wait of their own
    before it only held the copy loop for a linger and a round trip more."""
    parts = transactional
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    producer = parts.committer.producer
    unacknowledged_at_commit: list[int] = []
    commit_transaction = producer.commit_transaction

    def commit(timeout: float) -> None:
        unacknowledged_at_commit.append(len(producer.map_pending))
        commit_transaction(timeout)

    monkeypatch.setattr(producer, "commit_transaction", commit)
    assert parts.committer.commit([KEY])
    assert unacknowledged_at_commit == [1] and producer.map_pending == []  # sent and acknowledged by the commit
    assert ("commit", [(TOPIC, 0, 3)]) in parts.calls and parts.route_stops == []


def test_a_segment_the_producer_refuses_aborts_the_transaction_and_nothing_is_committed_at_the_source(
    transactional: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = transactional
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    producer = parts.committer.producer
    produce = producer.produce

    def queue_full_for_the_map(topic: str, *args: Any, **kwargs: Any) -> None:
        if topic == MAP_TOPIC:
            raise BufferError("Local: Queue full")
        produce(topic, *args, **kwargs)

    monkeypatch.setattr(producer, "produce", queue_full_for_the_map)
    assert parts.committer.commit([KEY])  # nothing may be committed: True, the route restarts instead
    assert ("abort_transaction", None) in parts.calls and ("commit_transaction", None) not in parts.calls
    assert not any(name == "commit" for name, _ in parts.calls)
    (failure,) = parts.route_stops
    assert "segments were not written" in str(failure)
    assert parts.ledger.maps[KEY].take_changed()  # written again by the next transaction


def test_an_exactly_once_commit_every_interval_does_not_wait_for_the_source_but_a_release_does(
    transactional: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = transactional
    waited: list[tuple[list[tuple[str, int, int]], bool]] = []
    monkeypatch.setattr(
        parts.consumer,
        "commit",
        lambda offsets, asynchronous: waited.append(
            (sorted((tp.topic, tp.partition, tp.offset) for tp in offsets), not asynchronous)
        ),
    )
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    assert parts.committer.commit(wait=False)
    assert waited == [([(TOPIC, 0, 3)], False)]
    assert parts.committer.commit(wait=False) and len(waited) == 1  # nothing new: nothing sent again
    # The source refused it: counted, and sent again by the next commit.
    refused = TopicPartition(TOPIC, 0, 3)
    parts.committer.commit_answered(KafkaError(KafkaError.REQUEST_TIMED_OUT), [refused])
    assert parts.committer.commit(wait=False) and waited[-1] == ([(TOPIC, 0, 3)], False)
    # A release waits for the source's answer, whatever was sent before without waiting.
    assert parts.committer.commit_within([KEY], 2.0) and waited[-1] == ([(TOPIC, 0, 3)], True)
    assert parts.committer.commit_within([KEY], 2.0) and len(waited) == 3  # committed: not again


def test_an_answer_refusing_one_partition_sends_only_that_one_again(transactional: SimpleNamespace) -> None:
    parts = transactional
    parts.ledger.resume((TOPIC, 1), OffsetMap())
    assert parts.committer.begin()
    _sent(parts, [0, 1, 2])
    assert parts.committer.commit(wait=False)
    # As the consumer's on_commit gets them: each partition with its own error, if any.
    accepted = SimpleNamespace(topic=TOPIC, partition=1, offset=0, error=None)
    refused = SimpleNamespace(
        topic=TOPIC, partition=0, offset=3, error=KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE)
    )
    parts.committer.commit_answered(None, [accepted, refused])
    parts.committer.commit_answered(None, [accepted])  # accepted: nothing to do
    parts.calls.clear()
    assert parts.committer.commit(wait=False) and parts.calls[-1] == ("commit", [(TOPIC, 0, 3)])


def _committer_with(
    monkeypatch: pytest.MonkeyPatch, destination: dict[str, Any], settings: dict[str, Any], **kw: Any
) -> tuple[Committer, dict[str, Any]]:
    made: dict[str, Any] = {}

    def make_producer(cluster: Any, **given: Any) -> FakeProducer:
        made.update(given)
        return FakeProducer([])

    monkeypatch.setattr(kafka_clients, "producer", make_producer)
    clock = FakeClock(0.0)
    consumer = FakeConsumer([])
    committer = Committer(
        route_name="src.dst",
        destination=destination,
        settings=settings,
        consumer=consumer,
        ledger=_ledger(),
        stopper=RecordingStopper([], consumer),
        destination_name=lambda t: t,
        metrics=WorkerMetrics(),
        clock=clock,
        sleep=clock.sleep,
        **kw,
    )
    return committer, made


@pytest.mark.parametrize(
    ("destination", "settings", "gapless"),
    [
        ({}, {}, False),
        ({}, {"enable.gapless.guarantee": True}, True),
        ({"enable.gapless.guarantee": "true"}, {"message.timeout.ms": 0}, True),
        ({}, {"enable.gapless.guarantee": True, "message.timeout.ms": 30_000}, False),
        ({"delivery.timeout.ms": "120000"}, {"enable.gapless.guarantee": True}, False),
        ({}, {"enable.gapless.guarantee": "false"}, False),
        ({"enable.idempotence": "false"}, {"enable.gapless.guarantee": True}, False),
    ],
)
def test_an_at_least_once_producer_is_gapless_when_its_operator_asks_and_sets_no_delivery_timeout(
    monkeypatch: pytest.MonkeyPatch, destination: dict[str, Any], settings: dict[str, Any], gapless: bool
) -> None:
    """Asked for (in the cluster's properties or the worker's producer settings) and with no delivery
    timeout, the producer runs gap-less and the records between a run's ends need no report; a timeout of
    the operator's own, or idempotence turned off, keeps librdkafka's behaviour and the reports between."""
    committer, made = _committer_with(monkeypatch, destination, settings)
    assert committer.reports_between is not gapless
    if gapless:
        assert made["enable.gapless.guarantee"] is True and made["message.timeout.ms"] == 0
    else:
        assert made.get("message.timeout.ms") != 0 or "enable.gapless.guarantee" not in made


def test_an_exactly_once_producer_reports_nothing_between_and_keeps_its_bounded_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    committer, made = _committer_with(monkeypatch, {}, {}, transactional_id="ferry.src.dst.w1")
    assert not committer.reports_between
    assert "enable.gapless.guarantee" not in made and 0 < made["message.timeout.ms"] <= 60_000
