"""Reads a destination partition back from its end to find what a route already wrote there.

The look-back of the resume rule (:mod:`common.core.resume`): windows of destination offsets, newest
first, until it passes below the route's committed source offset (without one: until the log
start, so that everything a previous owner copied before its first commit is mapped), reaches the
log start, or has read ``limit`` records. A record is the route's own when its provenance path ends with the
route's source cluster (the destination may hold other writers' records: active-active) and the header
is bound to the partition's topic (one an application forwarded from another topic is not a copy).

The reader is ``read_committed`` (an aborted copy is not on the destination), so it reads up to the
partition's last stable offset (LSO), not its end: records past an open transaction, committed or
not, are invisible until that transaction ends. A look-back that began below them would take
their copies for missing. So it first compares the LSO with the log end (the high watermark, read
``read_uncommitted``); while an open transaction (another writer's, or a previous owner's not yet
aborted) holds the LSO below the end the partition reached, it waits for it, at most
:data:`OPEN_TRANSACTION_WAIT_S`, and then raises :class:`OpenTransaction` (the partition's start is
deferred and tried again) rather than start below it.

A window of offsets ends when the reader's position reached its end, not when it holds as many
records as offsets: on a transactional destination each commit's marker takes an offset (and an
aborted record one too) that the reader never sees, so the reader takes what the fetcher has
queued without waiting, and waits only for the next fetch when nothing is queued.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, TopicPartition

from ferry.common.core.provenance import ProvenanceError, read
from ferry.common.core.resume import lookback_done, lookback_windows
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.errors import WorkerError

log = logging.getLogger(__name__)

FIRST_WINDOW = 1_000  # records; each next window is twice as large, up to LARGEST_WINDOW
LARGEST_WINDOW = 64_000
_READ_TIMEOUT_S = 30.0
# A wait for the next fetch when nothing is queued: it ends at the first record that comes.
_FETCH_WAIT_S = 0.5
# How long a look-back waits for an open transaction on the destination partition to end, and how
# often it asks for the last stable offset meanwhile. The handoff's own cases end within it: a
# previous owner's last commit (its markers follow the commit's answer by moments) and a fenced
# owner's abort (the leader's fencing returns once it is complete).
OPEN_TRANSACTION_WAIT_S = 5.0
_OPEN_TRANSACTION_POLL_S = 0.1
_LEADER_WAIT_S = 10.0
_NO_LEADER_YET = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    # A partition added a moment ago: this long-lived client's cached metadata predates it.
    KafkaError._UNKNOWN_PARTITION,
}


class LookBackTimeout(WorkerError):
    """The destination partition could not be read back in time (a temporary condition)."""


class OpenTransaction(LookBackTimeout):
    """An open transaction held the destination partition's last stable offset below its end for
    :data:`OPEN_TRANSACTION_WAIT_S`: the partition's start waits (a temporary condition)."""


@dataclass
class LookBack:
    """What the look-back found: (source offset, destination offset) of the route's own records,
    newest first; whether it stopped at its bound before passing the committed offset."""

    own: list[tuple[int, int]] = field(default_factory=list)
    read: int = 0
    bounded: bool = False
    # The newest own record's source offset, timestamp and key: what the source must still hold there
    # when it is the topic these records came from (worker/position/data_loss.py: a re-created source topic).
    newest: tuple[int, int | None, bytes | None] | None = None

    @property
    def present(self) -> set[int]:
        return {source for source, _ in self.own}


class DestinationReader:
    """One assign()-only consumer on the destination, reused for every look-back of a route."""

    def __init__(
        self,
        *,
        destination: Mapping[str, Any],
        group_id: str,
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        admin: Any = None,
        on_open_transaction: Callable[[], None] = lambda: None,
    ) -> None:
        """``admin``: the destination's AdminClient, which reads the log end (the high watermark); None
        builds one. ``on_open_transaction``: called once per look-back that had to wait for an open
        transaction (the worker counts them)."""
        # The group id is never committed to (auto commit off, no commit calls); librdkafka wants one.
        # read_committed: an aborted transaction's copies (a fenced or failed writer's) are not on the
        # destination for read_committed consumers, so they must not count as copied.
        # fetch.wait.max.ms: the reader reads what is there and never waits for new records. A fetch at
        # the log end (where the newest window ends) is otherwise held by the broker for 500 ms, and the
        # next window's first fetch waits behind it (librdkafka sends one fetch per broker at a time).
        self._consumer = kafka_clients.consumer(
            destination,
            f"{group_id}.lookback",
            **{
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            },
        )
        self._admin = admin if admin is not None else kafka_clients.admin(destination)
        self._on_open_transaction = on_open_transaction
        self._clock = clock
        self._sleep = sleep

    def look_back(
        self,
        topic: str,
        partition: int,
        source_cluster: str,
        committed: int | None,
        limit: int,
        *,
        open_transaction_wait_s: float = OPEN_TRANSACTION_WAIT_S,
    ) -> LookBack:
        """Raises KafkaException or LookBackTimeout when the destination cannot be read, OpenTransaction
        when an open transaction holds back what it may read for ``open_transaction_wait_s`` (the caller
        defers)."""
        low, stable = self._watermarks(topic, partition)
        high = self._stable_end(topic, partition, stable, open_transaction_wait_s)
        result = LookBack()
        oldest: int | None = None
        for start, end in lookback_windows(low, high, FIRST_WINDOW, LARGEST_WINDOW):
            for source, destination in reversed(self._read(topic, partition, start, end, source_cluster, result)):
                result.own.append((source, destination))
                oldest = source if oldest is None else min(oldest, source)
            if lookback_done(committed, oldest, start <= low, result.read, limit):
                passed = oldest is not None and committed is not None and oldest < committed
                result.bounded = not passed and start > low
                break
        return result

    def _stable_end(self, topic: str, partition: int, stable: int, wait_s: float) -> int:
        """The last stable offset to read back to: ``stable`` (the LSO now) when it is the log end, else
        the LSO once it reached the log end as it is now (waits at most ``wait_s``; raises
        :class:`OpenTransaction` after that)."""
        log_end = self._log_end(topic, partition)
        if stable < log_end:  # read again after the end: records that came meanwhile hold no transaction open
            _, stable = self._watermarks(topic, partition)
        if stable >= log_end:
            return stable
        self._on_open_transaction()
        deadline = self._clock() + wait_s
        while self._clock() < deadline:
            self._sleep(_OPEN_TRANSACTION_POLL_S)
            _, stable = self._watermarks(topic, partition)
            if stable >= log_end:
                return stable
        raise OpenTransaction(
            f"an open transaction on the destination holds {topic}/{partition} at its last stable offset "
            f"{stable}, below its end {log_end} (records past it are invisible to read_committed readers "
            "until it ends); its start waits for it"
        )

    def _log_end(self, topic: str, partition: int) -> int:
        """The partition's high watermark (read_uncommitted: open transactions included)."""
        try:
            ends = kafka_clients.log_offsets(self._admin, [(topic, partition)], latest=True, timeout_s=_READ_TIMEOUT_S)
        except TimeoutError as exc:
            raise LookBackTimeout(f"reading the end of {topic}/{partition} on the destination: {exc}") from None
        if (topic, partition) not in ends:
            raise LookBackTimeout(f"the destination did not answer with the end of {topic}/{partition}")
        return ends[(topic, partition)]

    def end_offset(self, topic: str, partition: int) -> int:
        """The destination partition's log-end offset now (KafkaException when it cannot be read)."""
        return self._watermarks(topic, partition)[1]

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, log end); a topic created a moment ago has no leader yet for a while (bounded wait)."""
        deadline = self._clock() + _LEADER_WAIT_S
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=_READ_TIMEOUT_S
                )
                return int(low), int(high)
            except KafkaException as exc:
                if kafka_error(exc).code not in _NO_LEADER_YET or self._clock() > deadline:
                    raise
            self._sleep(0.2)
            # Ask for the topic's metadata again: librdkafka would otherwise keep its cached partition
            # count until the next periodic refresh (minutes), and the partition would stay unknown.
            self._consumer.list_topics(topic, timeout=_READ_TIMEOUT_S)

    def _read(
        self, topic: str, partition: int, start: int, end: int, source_cluster: str, result: LookBack
    ) -> list[tuple[int, int]]:
        tp = TopicPartition(topic, partition, start)
        self._consumer.assign([tp])
        own: list[tuple[int, int]] = []
        try:
            self._read_window(topic, partition, start, end, source_cluster, result, own)
            return own
        finally:
            self._consumer.unassign()

    def _read_window(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        source_cluster: str,
        result: LookBack,
        own: list[tuple[int, int]],
    ) -> None:
        last: int | None = None  # the newest offset read in this window
        newest: Any = None  # this window's newest own record
        deadline = self._clock() + _READ_TIMEOUT_S
        where = [TopicPartition(topic, partition)]
        while self._clock() < deadline:
            # What the fetcher has queued, without waiting: consume() waits out its timeout while it has
            # fewer records than asked for, and a window may hold fewer records than offsets (markers).
            wanted = max(1, min(1000, end - (last + 1 if last is not None else start)))
            messages: list[Any] = self._consumer.consume(wanted, 0)
            if not messages and self._consumer.position(where)[0].offset < end:
                messages = self._consumer.consume(1, _FETCH_WAIT_S)  # the next fetch: ends at its first record
            done = False
            for message in messages:
                if message.error() is not None:
                    continue
                offset = message.offset()
                last = offset
                if offset >= end:
                    done = True
                    break
                result.read += 1
                try:
                    provenance = read(message.headers(), topic)
                except ProvenanceError:
                    continue  # not a copy Ferry can read: not this route's
                # A version 3 header says no source offset (no Ferry release writes it yet): not resumable from.
                if (
                    provenance is not None
                    and provenance.source == source_cluster
                    and provenance.source_offset is not None
                ):
                    own.append((provenance.source_offset, offset))
                    newest = (provenance.source_offset, message)
                if offset >= end - 1:
                    done = True
            if not done:  # the position passes what the reader never sees: markers, aborted copies
                done = self._consumer.position(where)[0].offset >= end
            if done:
                if newest is not None and result.newest is None:
                    timestamp_type, timestamp = newest[1].timestamp()
                    # A destination topic with LogAppendTime stamps its own time: then only the key can tell.
                    result.newest = (
                        newest[0],
                        timestamp if timestamp_type == TIMESTAMP_CREATE_TIME else None,
                        newest[1].key(),
                    )
                return
        raise LookBackTimeout(f"reading back {topic}/{partition} [{start}, {end}) on the destination timed out")

    def serve_logs(self) -> None:
        """Hands the consumer's queued librdkafka messages to the log (it has no assignment between look-backs)."""
        kafka_clients.serve_logs(self._consumer)

    def close(self) -> None:
        self._consumer.close()
