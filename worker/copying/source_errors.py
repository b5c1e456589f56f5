"""What a consumed message carrying an error means for a route copier's partition.

A position that left the source log (records deleted before they were copied, a re-created topic)
goes to the starter (:meth:`PartitionStarter.left_the_log`); an error that means the partition will
never be readable as it is stops it for good; anything else is counted and logged, at most once per
kind of error every :data:`WARN_EVERY_S` seconds, and the consumer goes on retrying by itself.

Driven by the copier's one thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from ferry.common import logs
from ferry.worker.copying.starter import PartitionStarter
from ferry.worker.copying.stopping import PartitionStopper
from ferry.worker.errors import PERMANENT_CONSUMER_ERRORS, PartitionStopped
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# librdkafka's answer when a position leaves the source log under auto.offset.reset=error.
_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
WARN_EVERY_S = 30.0


class SourceErrors:
    """Handles the errors a route's source consumer hands out among its messages."""

    def __init__(
        self,
        *,
        route_name: str,
        starter: PartitionStarter,
        stopper: PartitionStopper,
        metrics: WorkerMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._route_name = route_name
        self._log = logs.with_fields(log, route=route_name)
        self._starter = starter
        self._stopper = stopper
        self._metrics = metrics
        self._clock = clock
        self._warned_at: dict[int, float] = {}  # a consumer error's kind -> when it was last logged

    def handle(self, message: Any) -> None:
        """Acts on ``message``, a consumed message whose ``error()`` is set."""
        error: KafkaError = message.error()
        topic, partition = message.topic(), message.partition()
        if error.code() in _OUT_OF_RANGE and topic and partition is not None and partition >= 0:
            self._starter.left_the_log((topic, partition), message.offset())
            return
        if error.code() in PERMANENT_CONSUMER_ERRORS and topic and partition is not None and partition >= 0:
            self._stopper.stop((topic, partition), PartitionStopped(f"the source reports: {error.str()}"))
            return
        self._metrics.errors.labels(self._route_name, "consumer").inc()
        now = self._clock()
        if now - self._warned_at.get(error.code(), -1e9) > WARN_EVERY_S:  # one line per kind
            self._warned_at[error.code()] = now
            self._log.warning("route %s: source consumer: %s", self._route_name, error.str())
