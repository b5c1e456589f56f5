"""The exact offset map as the leader reads it: follows the compacted ``__ferry_offset_map`` topic on one
destination cluster and keeps every partition's segments (:mod:`common.core.offset_map` parses them),
for :mod:`controller.groups.checkpoints` to translate with and to trim below retention.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from ferry.common.core.offset_map import MAP_TOPIC, Segment, merge, parse_segment
from ferry.common.kafka import clients as kafka_clients
from ferry.controller.errors import Unavailable

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
REFRESH_DEADLINE_S = 30.0  # to read the map topic to its end, once per translation


class OffsetMapReader:
    """Follows the compacted map topic on one destination cluster; keeps every partition's segments."""

    def __init__(self, cluster: Mapping[str, Any], client_id: str) -> None:
        self._consumer = kafka_clients.consumer(
            cluster, f"{client_id}.offset-map", **{"client.id": client_id, "auto.offset.reset": "earliest"}
        )
        self._admin = kafka_clients.admin(cluster, **{"client.id": client_id})
        self._assigned = False
        self._segments: dict[tuple[str, str, int], dict[int, Segment]] = {}

    def refresh(self) -> None:
        """Reads what was written since the last call, up to the topic's current end.

        Raises Unavailable when the topic cannot be read to its end now (the caller drops this
        reader: a new one starts with fresh metadata).
        """
        try:
            self._refresh()
        except KafkaException as exc:
            raise Unavailable(f"reading {MAP_TOPIC}: {exc.args[0]}") from None

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
                self._admin, ((MAP_TOPIC, p) for p in metadata.partitions), True, TIMEOUT_S
            )
        except TimeoutError as exc:
            raise Unavailable(f"reading {MAP_TOPIC}: {exc}") from None
        if len(answered) < len(tps):
            raise Unavailable(f"reading {MAP_TOPIC}: no log end for {len(tps) - len(answered)} of its partitions")
        ends = {partition: end for (_, partition), end in answered.items()}
        deadline = time.monotonic() + REFRESH_DEADLINE_S
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in self._consumer.position(tps)}
            if all(positions.get(p, -1) >= end or end == 0 for p, end in ends.items()):
                return
            messages: list[Any] = self._consumer.consume(kafka_clients.batch_to_end(ends, positions, 10_000), 0.5)
            if not messages:
                # A map topic created a moment ago (a new destination): librdkafka may have cached
                # it without a leader and would wait for its periodic refresh (minutes) to fetch.
                self._consumer.list_topics(MAP_TOPIC, timeout=TIMEOUT_S)
            for message in messages:
                if message.error() is not None or message.key() is None:
                    continue
                try:
                    key, dst_start, segment = parse_segment(message.key(), message.value())
                except ValueError as exc:
                    log.warning("offset map: skipping an unreadable record: %s", exc)
                    continue
                if segment is None:
                    self._segments.get(key, {}).pop(dst_start, None)
                else:
                    known = self._segments.setdefault(key, {}).get(dst_start)
                    if known is None or segment.length > known.length:
                        self._segments[key][dst_start] = segment
        raise Unavailable(f"the offset map topic could not be read to its end in {REFRESH_DEADLINE_S:.0f} s")

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
