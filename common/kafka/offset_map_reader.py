"""The exact offset map as read from a destination: follows the compacted ``__ferry_offset_map`` topic on
one destination cluster and keeps every partition's segments (:mod:`common.core.offset_map` parses them),
for the controller's checkpoint job (:mod:`controller.groups.checkpoints`) to translate with and to trim
below retention.

The reader is ``read_committed``: on an exactly-once route a worker writes its map segments in the
same destination transactions as the copies they describe, so the map it reads describes exactly
the copies a ``read_committed`` consumer of the destination sees. Such a reader reads up to each
partition's last stable offset (LSO), so a refresh reads to the LSO, not the log end: records of a
transaction still open sit past it and are not returned until the transaction ends.

A refresh ends when the consumer's position reached those ends, not when it holds as many records
as offsets: each committed transaction's marker takes an offset (and an aborted record one too)
that the reader is never given. So it takes what the fetcher has queued without waiting, and waits
for the next fetch only when nothing is queued.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ferry.common.core.offset_map import MAP_TOPIC, Segment, merge, parse_segment
from ferry.common.errors import UnreachableError
from ferry.common.kafka import clients as kafka_clients

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
REFRESH_DEADLINE_S = 30.0  # to read the map topic to its end, once per translation
# A wait for the next fetch when nothing is queued: it ends at the first record that comes (a fetch of
# markers only ends none: the position is checked again after it).
_FETCH_WAIT_S = 0.1


class OffsetMapUnavailable(UnreachableError):
    """The map topic could not be read to its end now (a temporary condition)."""


class OffsetMapReader:
    """Follows the compacted map topic on one destination cluster; keeps every partition's segments."""

    def __init__(
        self,
        *,
        cluster: Mapping[str, Any],
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
        group_id: str | None = None,
    ) -> None:
        """``group_id``: the consumer's (never joined or committed to; ACLs name it), by default
        ``<client_id>.offset-map``."""
        # fetch.wait.max.ms: the reader reads what is there and never waits for new records. A fetch at
        # the log end (where every refresh ends) is otherwise held by the broker for 500 ms, and the
        # next refresh's first fetch waits behind it (librdkafka sends one fetch per broker at a time).
        self._consumer = kafka_clients.consumer(
            cluster,
            group_id or f"{client_id}.offset-map",
            **{
                "client.id": client_id,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            },
        )
        self._clock = clock
        self._admin = kafka_clients.admin(cluster, **{"client.id": client_id})
        self._assigned = False
        self._segments: dict[tuple[str, str, int], dict[int, Segment]] = {}

    def refresh(self) -> None:
        """Reads what was committed since the last call, up to the topic's last stable offsets now.

        Raises :class:`OffsetMapUnavailable` when the topic cannot be read to its end now (the caller drops this
        reader: a new one starts with fresh metadata).
        """
        try:
            self._refresh()
        except KafkaException as exc:
            raise OffsetMapUnavailable(f"reading {MAP_TOPIC}: {exc.args[0]}") from None

    def _refresh(self) -> None:
        metadata = self._admin.list_topics(MAP_TOPIC, timeout=TIMEOUT_S).topics.get(MAP_TOPIC)
        if metadata is None or metadata.error is not None:
            return  # no worker wrote a map yet
        tps = [TopicPartition(MAP_TOPIC, p) for p in metadata.partitions]
        if not self._assigned:
            self._consumer.assign([TopicPartition(MAP_TOPIC, p, -2) for p in metadata.partitions])  # beginning
            self._assigned = True
        try:
            answered = kafka_clients.log_offsets(
                self._admin, ((MAP_TOPIC, p) for p in metadata.partitions), True, TIMEOUT_S, stable=True
            )
        except TimeoutError as exc:
            raise OffsetMapUnavailable(f"reading {MAP_TOPIC}: {exc}") from None
        if len(answered) < len(tps):
            missing = len(tps) - len(answered)
            raise OffsetMapUnavailable(f"reading {MAP_TOPIC}: no log end for {missing} of its partitions")
        ends = {partition: end for (_, partition), end in answered.items()}
        deadline = self._clock() + REFRESH_DEADLINE_S
        while self._clock() < deadline:
            positions = self._positions(tps)
            if _reached(positions, ends):
                return
            # What the fetcher has queued, without waiting: consume() waits out its timeout while it has
            # fewer records than asked for, and the map holds fewer records than offsets (markers).
            messages: list[Any] = self._consumer.consume(kafka_clients.batch_to_end(ends, positions, 10_000), 0)
            if not messages:  # nothing queued, or markers only: the position says which
                positions = self._positions(tps)
                if _reached(positions, ends):
                    return
                messages = self._consumer.consume(1, _FETCH_WAIT_S)  # the next fetch: ends at its first record
                if not messages and self._positions(tps) == positions:
                    # Nothing came in a whole wait. A map topic created a moment ago (a new destination):
                    # librdkafka may have cached it without a leader and would wait for its periodic
                    # refresh (minutes) to fetch.
                    self._consumer.list_topics(MAP_TOPIC, timeout=TIMEOUT_S)
            for message in messages:
                raw_key = message.key()
                if message.error() is not None or not isinstance(raw_key, bytes):
                    continue
                try:
                    key, dst_start, segment = parse_segment(raw_key, message.value())
                except ValueError as exc:
                    log.warning("offset map: skipping an unreadable record: %s", exc)
                    continue
                if segment is None:
                    self._segments.get(key, {}).pop(dst_start, None)
                else:
                    known = self._segments.setdefault(key, {}).get(dst_start)
                    if known is None or segment.length > known.length:
                        self._segments[key][dst_start] = segment
        raise OffsetMapUnavailable(f"the offset map topic could not be read to its end in {REFRESH_DEADLINE_S:.0f} s")

    def _positions(self, tps: list[TopicPartition]) -> dict[int, int]:
        return {tp.partition: tp.offset for tp in self._consumer.position(tps)}

    def segments(self, route: str, topic: str, partition: int) -> list[Segment]:
        return merge(self._segments.get((route, topic, partition), {}).values())

    def partitions(self, route: str) -> list[tuple[str, int]]:
        """The destination (topic, partition)s the route's map describes."""
        return sorted((topic, partition) for name, topic, partition in self._segments if name == route)

    def below(self, route: str, log_starts: Callable[[str, int], int]) -> list[tuple[tuple[str, str, int], int]]:
        """(key, dst_start) of the route's segments wholly below their partition's log start (retention)."""
        gone = []
        for key, segments in self._segments.items():
            if key[0] != route:
                continue
            start = log_starts(key[1], key[2])
            gone += [(key, dst) for dst, segment in segments.items() if segment.dst_end <= start]
        return gone

    def forget(self, key: tuple[str, str, int], dst_start: int) -> None:
        self._segments.get(key, {}).pop(dst_start, None)

    def close(self) -> None:
        self._consumer.close()


def _reached(positions: Mapping[int, int], ends: Mapping[int, int]) -> bool:
    """Whether every partition's position is at its end (an empty partition's at once)."""
    return all(positions.get(p, -1) >= end or end == 0 for p, end in ends.items())
