"""Stops a route copier's partitions, one or all, and keeps whether the route's destination writer failed.

Whoever meets a failure first stops what it means here: the delivery ledger (a record the destination
refused, a run another writer interleaved with), the sender (a record the producer refused, a
destination that acknowledged nothing for too long), the committer (an aborted transaction, a fenced
writer). A failure of one record stops its partition (:class:`PartitionStates`: ERROR); a failure of
the destination producer (:class:`ProducerFailed`) stops every running partition of the route, and
the writer counts as FAILED until the committer builds a new one.

States of the route's writer::

    WORKING --a ProducerFailed (stop or stop_route)--> FAILED (fenced when the leader fenced it)
    FAILED, not fenced --renewed (a new producer, once the stopped partitions are released)--> WORKING
    FAILED, fenced --renewed after the fencing (the worker registered again)--> WORKING

Driven by the copier's one thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.errors import RETRY_BACKOFF_S, PartitionDeferred, PartitionStopped, ProducerFailed


class PartitionStopper:
    """Stops partitions of one route and records its writer's failure (see the module docstring)."""

    def __init__(self, states: PartitionStates) -> None:
        self._states = states
        self._writer_failed = False
        self._fenced = False

    @property
    def writer_failed(self) -> bool:
        """The route's destination producer failed for good (FAILED): it delivers nothing more."""
        return self._writer_failed

    @property
    def fenced(self) -> bool:
        """The leader fenced the route's writer: the worker must register again before it writes anything more."""
        return self._fenced

    def stop(self, key: TopicPartitionKey, failure: PartitionStopped | PartitionDeferred | ProducerFailed) -> None:
        """Stops ``key`` (ERROR). A :class:`ProducerFailed` leaves the producer unusable: every other running
        partition of the route stops too, for a temporary reason, until the producer is built anew."""
        if isinstance(failure, ProducerFailed):
            if self._fail_writer(failure.fenced):
                others = PartitionDeferred(
                    f"the destination producer failed for good: {failure}", retry_after_s=RETRY_BACKOFF_S
                )
                for other in self._states.running():
                    if other != key:
                        self._states.stop(other, others)
            failure = failure.record
        self._states.stop(key, failure)

    def stop_route(self, failure: ProducerFailed) -> None:
        """The writer failed (an aborted transaction, a fenced writer, a fatal error): every running partition
        stops for the reason ``failure`` carries, unless the writer had failed already."""
        if self._fail_writer(failure.fenced):
            for key in self._states.running():
                self._states.stop(key, failure.record)

    def _fail_writer(self, fenced: bool) -> bool:
        """WORKING -> FAILED; True when it was WORKING (its partitions are to stop now)."""
        self._fenced = self._fenced or fenced
        if self._writer_failed:
            return False
        self._writer_failed = True
        return True

    def renewed(self) -> None:
        """FAILED -> WORKING: the committer built a new producer (after the fencing: the worker registered again)."""
        self._writer_failed = False
        self._fenced = False
