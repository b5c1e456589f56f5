"""One error model: the FerryError tree, temporary errors with their delay, Kafka errors unwrapped once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.common.errors import ConfigError, FerryError, PermanentError, TransientError
from ferry.common.kafka.errors import kafka_error
from ferry.controller.errors import BadRequest, ControllerError, NotLeader, Unavailable
from ferry.worker.errors import (
    RETRY_BACKOFF_S,
    PartitionDeferred,
    PartitionStopped,
    ProducerFailed,
    WorkerError,
    delivery_failure,
)

pytestmark = pytest.mark.unit


def test_a_kafka_exception_is_unwrapped_once() -> None:
    failure = kafka_error(KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "Topic 'x' already exists.")))
    assert (failure.code, failure.name, str(failure)) == (
        KafkaError.TOPIC_ALREADY_EXISTS,
        "TOPIC_ALREADY_EXISTS",
        "Topic 'x' already exists.",
    )
    assert not failure.fatal


def test_a_kafka_error_itself_and_its_flags() -> None:
    fatal = kafka_error(KafkaError(KafkaError._FATAL, "gone", fatal=True))
    assert fatal.fatal and fatal.code == KafkaError._FATAL
    retriable = kafka_error(KafkaError(KafkaError.REQUEST_TIMED_OUT, retriable=True))
    assert retriable.retriable and not retriable.fatal


@pytest.mark.parametrize("raised", [KafkaException("no broker"), KafkaException(), TimeoutError("slow")])
def test_an_exception_without_a_kafka_error_keeps_its_text(raised: BaseException) -> None:
    failure = kafka_error(raised)
    assert failure.code == KafkaError._FAIL and failure.name == "_FAIL" and str(failure)


def test_the_tree() -> None:
    assert issubclass(ConfigError, PermanentError) and issubclass(PermanentError, FerryError)
    assert issubclass(Unavailable, TransientError) and issubclass(NotLeader, ControllerError)
    assert issubclass(BadRequest, PermanentError) and BadRequest.status == 400
    for cls in (PartitionStopped, PartitionDeferred, ProducerFailed):
        assert issubclass(cls, WorkerError)
    assert Unavailable("no leader").retry_after_s is None
    assert TransientError("later", retry_after_s=2.5).retry_after_s == 2.5


def test_what_a_refused_record_means() -> None:
    too_large = delivery_failure(kafka_error(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too big")), "offset 7")
    assert isinstance(too_large, PartitionStopped) and str(too_large) == "offset 7: too big"
    timeout = delivery_failure(kafka_error(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out")), "offset 8")
    assert isinstance(timeout, PartitionDeferred) and timeout.retry_after_s == RETRY_BACKOFF_S
    fatal = delivery_failure(kafka_error(KafkaError(KafkaError._FATAL, "fenced", fatal=True)), "offset 9")
    assert isinstance(fatal, ProducerFailed) and isinstance(fatal.record, PartitionDeferred)
    fatal_and_refused = delivery_failure(
        kafka_error(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "denied", fatal=True)), "offset 10"
    )
    assert isinstance(fatal_and_refused, ProducerFailed) and isinstance(fatal_and_refused.record, PartitionStopped)
