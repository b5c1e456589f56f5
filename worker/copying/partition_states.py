"""Which partitions a route copier holds and in which state, with their load counters and lags.

States of a partition on one copier (the worker reports them in its status)::

    (not held) --start--> ONLINE --release--> (not held; reported OFFLINE)
    (not held) --not_started (refused at acquire)--> ERROR (held, never assigned)
    ONLINE --stop (the destination rejects a record for good)--> ERROR (paused; nothing committed past it)
    ONLINE --stop (a temporary failure)--> ERROR (paused), and after its backoff :meth:`PartitionStates.due_retries`
        offers it: the worker releases it (committing up to the failed record) and acquires it again
    ERROR --release--> (not held)
    ONLINE --pause--> PAUSED (flushed, committed, consumer paused) --resume--> ONLINE (continues at
        the next offset: nothing skipped, nothing twice);  PAUSED --release--> (not held)

The consumer's assignment follows these states: started partitions are assigned (and resumed: a
pause may outlive an unassign), stopped and paused ones are paused, released ones unassigned. Where a
partition starts is the starter's (:mod:`worker.copying.starter`).

Driven by the copier's one thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Set
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.model import PartitionStatus
from ferry.common.vocabulary import PartitionState
from ferry.worker.copying.names import TopicPartitionKey, partition_fields
from ferry.worker.errors import RETRY_BACKOFF_S, PartitionDeferred, PartitionStopped
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.position.data_loss import Losses

log = logging.getLogger(__name__)


class PartitionStates:
    """The partitions one route copier holds: ONLINE, PAUSED or ERROR (see the module docstring).

    ``changed`` is set when a partition goes to ERROR or loses records, and cleared by the worker
    once it has reported the statuses."""

    def __init__(self, *, route_name: str, consumer: Any, metrics: WorkerMetrics, clock: Callable[[], float]) -> None:
        self._route_name = route_name
        self._log = logs.with_fields(log, route=route_name)
        self._consumer = consumer
        self._metrics = metrics
        self._clock = clock
        self._assigned: set[TopicPartitionKey] = set()  # assigned to the consumer (stopped ones included)
        self._stopped: dict[TopicPartitionKey, str] = {}  # ERROR: the reason
        self._retry_at: dict[TopicPartitionKey, float] = {}  # ERROR for a temporary reason: when to retry
        self._paused: set[TopicPartitionKey] = set()  # an operator's pause
        self._losses = Losses()
        self.changed = False
        # Per partition since the worker last took them (records, value bytes), added per run of a
        # partition's records by the copy loop, never per record; and the lag measure_lags last saw.
        self._copied: dict[TopicPartitionKey, list[int]] = {}
        self._lags: dict[TopicPartitionKey, int] = {}
        # How many times partitions were assigned to the consumer: the native copy core forwards their
        # queues again when it changed.
        self.assignment_changes = 0

    # -- what the worker reads --------------------------------------------------------------

    def statuses(self) -> dict[TopicPartitionKey, PartitionStatus]:
        """Every partition held: ONLINE (with what it lost, if anything), PAUSED, or ERROR with its reason."""
        result = {key: PartitionStatus(PartitionState.ONLINE, self._losses.reason(key)) for key in self._assigned}
        for key in self._paused:
            if key in self._assigned:
                result[key] = PartitionStatus(PartitionState.PAUSED)
        for key, reason in self._stopped.items():
            result[key] = PartitionStatus(PartitionState.ERROR, reason)
        return result

    def held(self) -> set[TopicPartitionKey]:
        return self._assigned | set(self._stopped)

    @property
    def assigned(self) -> Set[TopicPartitionKey]:
        """The partitions assigned to the consumer: ONLINE, PAUSED, and those stopped in ERROR since."""
        return self._assigned

    @property
    def paused(self) -> Set[TopicPartitionKey]:
        return self._paused

    @property
    def stopped(self) -> Mapping[TopicPartitionKey, str]:
        """The partitions in ERROR and why: the copy loop reads it once per batch and skips their records."""
        return self._stopped

    def running(self) -> list[TopicPartitionKey]:
        """The partitions assigned and not stopped, in order."""
        return sorted(self._assigned - set(self._stopped))

    def due_retries(self) -> list[TopicPartitionKey]:
        """Partitions stopped for a temporary reason whose backoff is over."""
        if not self._retry_at:
            return []
        now = self._clock()
        return [key for key, at in self._retry_at.items() if at <= now]

    # -- transitions ------------------------------------------------------------------------

    def start(self, positions: list[TopicPartition]) -> None:
        """(not held) -> ONLINE: assigns the partitions at their starting offsets."""
        if not positions:
            return
        self._consumer.incremental_assign(positions)
        self.assignment_changes += 1
        # A partition stopped in ERROR earlier was paused; the pause may outlive the unassign.
        self._consumer.resume(positions)
        self._assigned.update((tp.topic, tp.partition) for tp in positions)

    def reassign(self, key: TopicPartitionKey, offset: int) -> None:
        """ONLINE -> ONLINE at ``offset``: assigns the partition anew there (librdkafka stopped fetching
        it: its position left the source log, and a seek is refused in that state)."""
        self._consumer.incremental_unassign([TopicPartition(key[0], key[1])])
        self._consumer.incremental_assign([TopicPartition(key[0], key[1], offset)])
        self.assignment_changes += 1

    def not_started(self, key: TopicPartitionKey, reason: str) -> None:
        """(not held) -> ERROR: the partition cannot start for good (refused at acquire)."""
        self._stopped[key] = reason
        self._metrics.errors.labels(self._route_name, "partition").inc()
        self._log.error(
            "route %s: %s/%s stopped: %s", self._route_name, key[0], key[1], reason, extra=partition_fields(key)
        )

    def stop(self, key: TopicPartitionKey, failure: PartitionStopped | PartitionDeferred) -> None:
        """ONLINE -> ERROR: pauses the partition (the watermark never passes its failed record).

        A :class:`PartitionDeferred` is temporary: :meth:`due_retries` offers the partition for a
        restart from its committed offset after its ``retry_after_s`` (default ``RETRY_BACKOFF_S``).
        A partition already in ERROR keeps its first reason.
        """
        if key in self._stopped:
            return
        reason = str(failure)
        if isinstance(failure, PartitionDeferred):
            delay = RETRY_BACKOFF_S if failure.retry_after_s is None else failure.retry_after_s
            reason += f" (temporary: restarting from the committed offset in {delay:.0f}s)"
            self._retry_at[key] = self._clock() + delay
        self._stopped[key] = reason
        self.changed = True
        self._metrics.errors.labels(self._route_name, "partition").inc()
        self._log.error(
            "route %s: %s/%s stopped: %s", self._route_name, key[0], key[1], reason, extra=partition_fields(key)
        )
        if key in self._assigned:
            try:
                self._consumer.pause([TopicPartition(key[0], key[1])])
            except KafkaException as exc:  # the copy loop skips the partition's records anyway
                self._log.warning(
                    "route %s: pausing %s/%s: %s", self._route_name, key[0], key[1], exc, extra=partition_fields(key)
                )

    def pause(self, keys: Set[TopicPartitionKey]) -> None:
        """ONLINE -> PAUSED (the caller flushed and committed them first): no longer consumed."""
        self._consumer.pause([TopicPartition(t, p) for t, p in sorted(keys)])
        self._paused |= keys
        self._log.info("route %s: paused %d partitions", self._route_name, len(keys))

    def resume(self, keys: Set[TopicPartitionKey]) -> None:
        """PAUSED -> ONLINE: consumed again where they stopped."""
        self._consumer.resume([TopicPartition(t, p) for t, p in sorted(keys)])
        self._paused -= keys
        self._log.info("route %s: resumed %d partitions", self._route_name, len(keys))

    def release(self, keys: Collection[TopicPartitionKey]) -> None:
        """Any state -> (not held): unassigns what the consumer has of ``keys``, forgets all of them."""
        assigned = [TopicPartition(t, p) for t, p in keys if (t, p) in self._assigned]
        if assigned:
            self._consumer.incremental_unassign(assigned)
        for key in keys:
            self._assigned.discard(key)
            self._paused.discard(key)
            self._stopped.pop(key, None)
            self._retry_at.pop(key, None)
            self._copied.pop(key, None)
            self._lags.pop(key, None)
            self._losses.forget(key)

    # -- what the status says besides the state ---------------------------------------------

    def note(self, key: TopicPartitionKey, text: str) -> None:
        """Something the operator must know about an ONLINE partition, said in its status until it is released."""
        self._losses.note(key, text)

    def lost(self, key: TopicPartitionKey, lost: tuple[int, int]) -> None:
        """Source records ``[first, end)`` of ``key`` were deleted before they were copied: said in its status."""
        self._losses.add(key, lost)
        self.changed = True

    # -- load counters ----------------------------------------------------------------------

    def count_copied(self, key: TopicPartitionKey, records: int, size: int) -> None:
        """Adds a run of ``key``'s records (how many, their value bytes) to its load counters."""
        counts = self._copied.get(key)
        if counts is None:
            self._copied[key] = [records, size]
        else:
            counts[0] += records
            counts[1] += size

    def take_copied(self) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(records, value bytes) copied per partition since the last call, and starts counting again."""
        copied, self._copied = self._copied, {}
        return {key: (records, size) for key, (records, size) in copied.items()}

    def measure_lags(self) -> None:
        """Measures the lag of each assigned partition from the consumer's cached log-end offsets
        (for the load reports; the lag metric is the leader's)."""
        try:
            positions = self._consumer.position([TopicPartition(t, p) for t, p in self._assigned])
        except KafkaException:
            return
        for tp in positions:
            if tp.offset < 0:
                continue
            _, high = self._consumer.get_watermark_offsets(tp, cached=True)
            if high >= 0:
                self._lags[(tp.topic, tp.partition)] = max(0, high - tp.offset)

    def lags(self) -> dict[TopicPartitionKey, int]:
        """The lag of each assigned partition as :meth:`measure_lags` last saw it (absent: not measured yet)."""
        return {key: lag for key, lag in self._lags.items() if key in self._assigned}
