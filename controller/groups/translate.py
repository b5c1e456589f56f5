"""Offset translation for any consumer: one position on one partition, source -> destination or back.

Spark jobs and stream processors that keep their own offsets (not in a consumer group) fail over
with this: ``GET /translate`` and ``ferry offsets translate`` answer with the destination position
that continues from a source position (or, ``reverse``, the source position that continues from a
destination position). A position is what a consumer would commit: the offset of the next record
to read.

The answer comes from the exact offset map the workers write (:mod:`common.core.offset_map`, read
the way the checkpoint job reads it: :class:`controller.groups.checkpoints.Checkpointer`); where no
map segment covers the position, from the record timestamps (the record before the position, minus
``checkpoint_margin_s``, looked up with ``offsets_for_times`` on the other cluster), marked
``exact: false, method: timestamp``; a position past what the route has copied is ``pending``.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaException

from ferry.common.core.offset_map import EXACT, TIMESTAMP, Segment, translate
from ferry.common.errors import ConfigError
from ferry.common.kafka.errors import kafka_error
from ferry.controller.errors import BadRequest, NotFound, Unavailable
from ferry.controller.groups.checkpoints import PENDING, TIMEOUT_S, Checkpointer

FORWARD = "forward"
REVERSE = "reverse"


@dataclass(frozen=True)
class OffsetTranslation:
    """One position translated: ``offset`` on the ``direction``'s side, ``translated`` on the other."""

    route: str
    topic: str  # on the source
    destination_topic: str
    partition: int
    direction: str  # forward: source -> destination; reverse: destination -> source
    offset: int
    translated: int | None  # None: pending (past what the route has copied)
    method: str  # exact | timestamp | pending

    @property
    def exact(self) -> bool:
        return self.method == EXACT


def reversed_segments(segments: list[Segment]) -> list[Segment]:
    """The map seen from the destination: the sides of each run between transaction markers swapped, in
    (source) order, so that :func:`common.core.offset_map.translate` answers destination -> source
    positions (pure). A marker is a destination offset no source offset was copied to: a gap."""
    return sorted(
        (Segment(r.dst_start, r.src_start, r.length) for s in segments for r in s.runs()),
        key=lambda s: (s.dst_start, -s.length),
    )


class OffsetTranslator(Checkpointer):
    """The checkpoint code's clients and map reader, asked about one position at a time."""

    def translate_offset(
        self, route_name: str | None, topic: str, partition: int, offset: int, reverse: bool = False
    ) -> OffsetTranslation:
        """``offset`` (a position) on ``topic``/``partition`` (the source topic's name) translated.

        Raises NotFound for an unknown route or a topic/partition the route does not mirror,
        BadRequest for a negative offset or partition, Unavailable when a cluster cannot be read.
        """
        try:
            route = self._config.route(route_name)
        except ConfigError as exc:
            raise NotFound(str(exc)) from None
        if partition < 0 or offset < 0:
            raise BadRequest(f"partition and offset must be >= 0, not {partition} and {offset}")
        dest_topic = route.destination_topic(topic)
        self._check_partition(route.source, topic, partition)
        reader = self.fresh_map(route.destination)
        segments = reader.segments(route.name, dest_topic, partition)
        if not segments:
            self._check_partition(route.destination, dest_topic, partition)
        direction = REVERSE if reverse else FORWARD
        table = reversed_segments(segments) if reverse else segments
        answer = translate(table, offset)

        def made(translated: int | None, method: str) -> OffsetTranslation:
            return OffsetTranslation(route.name, topic, dest_topic, partition, direction, offset, translated, method)

        if answer is not None:
            return made(answer, EXACT)
        if table and offset > max(s.src_end for s in table):
            return made(None, PENDING)
        if reverse:
            by_time = self.by_timestamp_between(route.destination, dest_topic, route.source, topic, partition, offset)
        else:
            by_time = self.by_timestamp_between(route.source, topic, route.destination, dest_topic, partition, offset)
        return made(by_time, TIMESTAMP) if by_time is not None else made(None, PENDING)

    def _check_partition(self, cluster: str, topic: str, partition: int) -> None:
        try:
            metadata = self._consumer(cluster).list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise Unavailable(f"cluster {cluster!r}: {kafka_error(exc)}") from None
        if metadata is None or metadata.error is not None:
            raise NotFound(f"topic {topic!r} does not exist on cluster {cluster!r}")
        if partition not in metadata.partitions:
            raise NotFound(
                f"topic {topic!r} has no partition {partition} on cluster {cluster!r} "
                f"({len(metadata.partitions)} partitions)"
            )
