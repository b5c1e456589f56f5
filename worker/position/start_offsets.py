"""Where an ``assign()``-only consumer starts: always at an explicit offset (librdkafka#5586).

librdkafka, asked to ``assign()`` a partition without an offset (``OFFSET_INVALID``: "the
committed one"), sends OffsetFetch to the group coordinator before it fetches. When that request
fails as a whole with NOT_COORDINATOR (a coordinator that moved, or is still loading on a fresh
cluster), librdkafka refreshes the coordinator but never sends the OffsetFetch again: the
partition stays assigned and is never fetched, with no error to the application
(confluentinc/librdkafka#5586, open in librdkafka 2.16). ``consumer.committed()`` takes another
path: the same error comes back to the caller.

So a worker never lets librdkafka look a committed offset up. It reads the committed offsets
itself (:func:`committed_offsets`: retried on the coordinator's temporary errors, with backoff,
up to a deadline, then the error surfaces and the worker defers the partitions), and assigns
every partition at an explicit offset: the resume rule's start, or, when the route has neither
committed nor copied anything, :func:`reset_offset` (logical BEGINNING/END: a ListOffsets
request to the partition's leader, no coordinator involved).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, KafkaException, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from ferry.common.config import start_position
from ferry.common.kafka.errors import kafka_error
from ferry.common.model import decode
from ferry.worker.errors import PartitionDeferred

log = logging.getLogger(__name__)

# The group coordinator's temporary answers: it moved, is loading, or is not there yet.
RETRIABLE = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._WAIT_COORD,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)
FIRST_BACKOFF_S = 0.2
LARGEST_BACKOFF_S = 2.0

# librdkafka's auto.offset.reset values (and their aliases) as explicit logical offsets.
_RESET = {
    "earliest": OFFSET_BEGINNING,
    "smallest": OFFSET_BEGINNING,
    "beginning": OFFSET_BEGINNING,
    "latest": OFFSET_END,
    "largest": OFFSET_END,
    "end": OFFSET_END,
}


class CommittedReader(Protocol):
    """What :func:`committed_offsets` needs of a consumer (confluent_kafka.Consumer has it)."""

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]: ...


def reset_offset(auto_offset_reset: str) -> int:
    """The explicit logical offset for a partition with no committed offset under ``auto_offset_reset``."""
    try:
        return _RESET[auto_offset_reset.strip().lower()]
    except KeyError:
        raise ValueError(
            f"auto.offset.reset {auto_offset_reset!r} has no start offset (one of {', '.join(sorted(_RESET))})"
        ) from None


def route_start(
    consumer: Any, topic: str, partitions: Sequence[int], start: str | int | None, reset: int, timeout_s: float
) -> dict[int, int]:
    """Where each of ``partitions`` (nothing of the route committed or on the destination) starts: the
    route's ``start`` (earliest, latest, or epoch ms: the first record at or after it, the log end when
    none is), else ``reset`` (worker.auto_offset_reset). Raises KafkaException when the source does not answer."""
    if start is None or not partitions:
        return {p: reset for p in partitions}
    if start == "earliest" or start == "latest":
        return {p: _RESET[start] for p in partitions}
    found = consumer.offsets_for_times([TopicPartition(topic, p, int(start)) for p in partitions], timeout=timeout_s)
    failed = [tp.error for tp in found if tp.error is not None]
    if failed:
        raise KafkaException(failed[0])
    # -1: every record is older than the time: start at the log end
    return {tp.partition: tp.offset if tp.offset >= 0 else OFFSET_END for tp in found}


def topic_start(zk: KazooClient, path: str) -> str | int | None:
    """A topic's own start, from its node at ``path`` (written by ``POST /topics`` with ``start``);
    None: the route's start applies. Raises :class:`PartitionDeferred` when ZooKeeper does not answer."""
    try:
        data, _ = zk.get(path)
    except NoNodeError:
        return None
    except KazooException as exc:
        raise PartitionDeferred(f"reading the topic's start from ZooKeeper: {type(exc).__name__}") from None
    try:
        return start_position(decode(data)["start"])  # the config's rule for a route's start
    except (ValueError, KeyError, TypeError) as exc:
        log.error("ignoring an unreadable %s: %s", path, exc)
        return None


def _retriable(exc: KafkaException) -> bool:
    return kafka_error(exc).code in RETRIABLE


def committed_offsets(
    consumer: CommittedReader,
    partitions: Sequence[TopicPartition],
    deadline_s: float,
    attempt_timeout_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> dict[int, int | None]:
    """Partition -> committed offset (None: nothing committed) of ``partitions`` (one topic).

    A temporary coordinator error (:data:`RETRIABLE`, for the request or for a partition) is
    retried with a doubling backoff until ``deadline_s`` seconds have passed; then, or at once for
    any other error, the :class:`KafkaException` is raised.
    """
    give_up = clock() + deadline_s
    backoff = FIRST_BACKOFF_S
    attempt = 0
    while True:
        attempt += 1
        timeout = max(0.1, min(attempt_timeout_s, give_up - clock()))
        try:
            found = consumer.committed(list(partitions), timeout=timeout)
            failed = [tp.error for tp in found if tp.error is not None]
            if failed:
                raise KafkaException(failed[0])
            return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in found}
        except KafkaException as exc:
            if not _retriable(exc) or clock() + backoff > give_up:
                raise
            log.info(
                "committed offsets of %s (attempt %d): %s; retrying in %.1fs",
                sorted({tp.topic for tp in partitions}),
                attempt,
                kafka_error(exc),
                backoff,
            )
            sleep(backoff)
            backoff = min(LARGEST_BACKOFF_S, backoff * 2)
