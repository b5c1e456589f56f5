"""The worker's exceptions: one base, :class:`WorkerError`, under Ferry's :class:`FerryError`, and
which Kafka errors stop a partition for good (:func:`delivery_failure`).

A partition that cannot be copied fails with one of three types, which decide what happens to it
(``worker/copier.py``):

- :class:`PartitionStopped` (permanent): it stays in ERROR, reason reported, until unassigned.
- :class:`PartitionDeferred` (temporary): not started, or stopped in ERROR, and offered again
  after ``retry_after_s``, from its committed offset.
- :class:`ProducerFailed`: the route's producer is unusable (librdkafka's fatal error, or an
  aborted transaction). It carries what the failure means for the record that met it (one of the
  two above) and whether the leader fenced the writer; every other partition of the route stops
  the temporary way, and the producer is built anew when they are released.
"""

from __future__ import annotations

from confluent_kafka import KafkaError

from ferry.common.errors import FerryError, PermanentError, TransientError
from ferry.common.kafka.errors import KafkaFailure


class WorkerError(FerryError):
    """Base of every error the worker raises on purpose."""


class RegistrationError(WorkerError):
    """The worker could not register in ZooKeeper (another live worker holds its id)."""


class PartitionStopped(WorkerError, PermanentError):
    """The partition cannot be copied until someone changes something (a topic, an ACL, a config)."""


class PartitionDeferred(WorkerError, TransientError):
    """The partition cannot be copied now, for a temporary reason; try again after ``retry_after_s``."""


class ProducerFailed(WorkerError):
    """The destination producer failed for good (librdkafka's fatal error): it must be built anew.

    ``record``: what the failure means for the record that met it.
    """

    def __init__(self, record: PartitionStopped | PartitionDeferred, fenced: bool = False) -> None:
        super().__init__(str(record))
        self.record = record
        self.fenced = fenced


# A transactional writer whose id another producer registered since (the leader fenced it).
FENCED_ERRORS = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


# Errors that mean the record (or the partition) will never be accepted as it is.
PERMANENT_CONSUMER_ERRORS = {
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}
# The destination will never take these records as they are: the partition stops in ERROR until
# it is unassigned. Any other delivery failure (a timeout while the destination was down, ...)
# restarts the partition from its committed offset after RETRY_BACKOFF_S.
PERMANENT_DELIVERY_ERRORS = {
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.INVALID_MSG,
    KafkaError.INVALID_TIMESTAMP,
    KafkaError.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.POLICY_VIOLATION,
    KafkaError.TOPIC_EXCEPTION,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError._INVALID_ARG,
}
# How long a partition waits before its next try: after a temporary error, or when its start was deferred.
RETRY_BACKOFF_S = 5.0


def delivery_failure(error: KafkaFailure, what: str) -> PartitionStopped | PartitionDeferred | ProducerFailed:
    """What a record the destination refused means: its partition stops for good when the record
    will never be accepted as it is, else restarts later; a fatal error also fails the producer."""
    reason = f"{what}: {error}"
    record: PartitionStopped | PartitionDeferred = (
        PartitionStopped(reason)
        if error.code in PERMANENT_DELIVERY_ERRORS
        else PartitionDeferred(reason, retry_after_s=RETRY_BACKOFF_S)
    )
    fenced = error.code in FENCED_ERRORS
    return ProducerFailed(record, fenced=fenced) if error.fatal or fenced else record
