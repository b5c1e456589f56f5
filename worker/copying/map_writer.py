"""Writes a route's exact offset maps (:mod:`common.core.offset_map`) to the destination.

Each held partition has an :class:`OffsetMap` (the delivery ledger, :mod:`worker.copying.ledger`,
records what the destination acknowledged into it); before each commit, the changed segments are
produced to the compacted ``__ferry_offset_map`` topic on the destination, keyed by route, destination
topic, partition and segment start, and the commit waits for them (:meth:`OffsetMapWriter.write_and_wait`;
in a transaction, :meth:`OffsetMapWriter.write`, whose commit waits for them). A segment
that could not be written (a full producer queue, a failed delivery) is written again at the next
commit, and that commit waits: no committed source offset is ever described by no segment.

States of the writer between two commits::

    IDLE    --write--> WRITING (segments in flight)
    WRITING --every segment acknowledged--> IDLE          (the commit goes ahead)
    WRITING --a segment refused or not acknowledged in time--> IDLE, segments touched again
                                                          (the commit waits for the next round)

Driven by the copier's one thread, through its committer (:mod:`worker.copying.committer`); delivery
callbacks run inside ``poll`` on that thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ferry.common import logs
from ferry.common.core.offset_map import MAP_TOPIC, OffsetMap, segment_key, segment_value
from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# How long a commit waits for its offset-map segments (polls of 10 ms: 5 s at most).
MAP_WAIT_POLLS = 500


class OffsetMapWriter:
    """The writes of one route's offset maps; ``maps`` are the delivery ledger's, which extends them."""

    def __init__(
        self,
        *,
        route_name: str,
        destination_name: Callable[[str], str],
        maps: Mapping[TopicPartitionKey, OffsetMap],
        metrics: WorkerMetrics,
    ) -> None:
        self.route_name = route_name
        self._log = logs.with_fields(log, route=route_name)
        self._destination_name = destination_name
        self._metrics = metrics
        self._maps = maps
        self._in_flight = 0  # offset-map segments produced and not yet acknowledged or failed
        self._failed = False  # a segment failed since the last commit: it is written again first

    def write_and_wait(self, producer: Any, keys: Collection[TopicPartitionKey] | None) -> bool:
        """Writes the changed segments of ``keys`` (all when None) and waits for the destination's
        acknowledgements; False when some segment is not written (the commit must wait)."""
        self._write(producer, keys)
        for _ in range(MAP_WAIT_POLLS):
            if not self._in_flight:
                break
            try:
                producer.poll(0.01)
            except (KafkaException, SystemError):  # the producer failed for good (fenced): not written
                self._failed = True
                break
        if self._in_flight or self._failed:
            self._failed = False
            return False
        return True

    def write(self, producer: Any) -> bool:
        """Hands every changed segment to ``producer`` without waiting for the destination; False when
        some could not be handed over (they are written again next time).

        For a transaction: its commit (``commit_transaction``) sends them at once, past ``linger.ms``,
        and fails when one of them failed, so no separate wait is needed, and none holds the copy loop
        for a linger and a round trip of its own before the commit's."""
        self._failed = False  # a segment of an earlier, aborted transaction is touched already
        self._write(producer, None)
        failed, self._failed = self._failed, False
        return not failed

    def _write(self, producer: Any, keys: Collection[TopicPartitionKey] | None) -> None:
        for key, offsets in self._maps.items():
            if keys is not None and key not in keys:
                continue
            changed = offsets.take_changed()
            for index, segment in enumerate(changed):
                topic, partition = key
                try:
                    self._in_flight += 1
                    producer.produce(
                        MAP_TOPIC,
                        segment_value(segment),
                        segment_key(self.route_name, self._destination_name(topic), partition, segment.dst_start),
                        on_delivery=lambda error, _message, key=key, start=segment.dst_start: self._on_delivery(
                            error, key, start
                        ),
                    )
                except (BufferError, KafkaException) as exc:
                    self._in_flight -= 1
                    self._failed = True
                    for unwritten in changed[index:]:  # all of them, not only this one: a closed
                        offsets.touch(unwritten.dst_start)  # segment never changes again by itself
                    self._log.warning(
                        "route %s: offset map of %s/%s not written now (will retry): %s",
                        self.route_name,
                        topic,
                        partition,
                        exc,
                        extra={"topic": topic, "partition": partition},
                    )
                    return

    def _on_delivery(self, error: KafkaError | None, key: TopicPartitionKey, dst_start: int) -> None:
        self._in_flight -= 1
        if error is None:
            return
        self._failed = True
        offsets = self._maps.get(key)
        if offsets is not None:
            offsets.touch(dst_start)  # written again at the next commit
        self._metrics.errors.labels(self.route_name, "offset_map").inc()
