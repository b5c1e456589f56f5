"""What a failover reads from Kafka: source log ends, the route's committed offsets, the offset map
and the checkpoints on the destination (both there when the source is gone), and group commits."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import provenance
from ferry.common.core.offset_map import CHECKPOINT_TOPIC, MAP_TOPIC, Segment, merge, parse_segment
from ferry.common.kafka import clients as kafka_clients
from ferry.controller.errors import Unavailable
from ferry.controller.failover.states import partition_key

TIMEOUT_S = 10.0
READ_DEADLINE_S = 30.0


class LastCheckpoint(NamedTuple):
    """A group's last checkpoint on one destination partition (a ``__ferry_checkpoints`` record)."""

    destination_offset: int
    method: str | None  # how the leader translated it (exact, timestamp, ahead, ...)
    source_offset: int | None  # the group's committed offset on the source then


class FailoverKafka:
    """One failover's Kafka clients (assign()-only consumers, an admin per cluster)."""

    def __init__(self, config: FerryConfig, client_id: str) -> None:
        self._config = config
        self._client_id = client_id
        self._consumers: dict[str, Any] = {}
        self._admins: dict[str, Any] = {}
        self._topics: dict[str, list[str]] = {}  # route -> its source topics

    def _consumer(self, cluster: str) -> Any:
        if cluster not in self._consumers:
            self._consumers[cluster] = kafka_clients.consumer(
                self._config.clusters[cluster],
                f"ferry.failover.{self._client_id}",
                **{"auto.offset.reset": "earliest", "socket.timeout.ms": 5000},
            )
        return self._consumers[cluster]

    def _admin(self, cluster: str) -> Any:
        if cluster not in self._admins:
            self._admins[cluster] = kafka_clients.admin(self._config.clusters[cluster])
        return self._admins[cluster]

    def close(self) -> None:
        for consumer in self._consumers.values():
            consumer.close()

    def log_ends(self, cluster: str, partitions: Mapping[str, int]) -> dict[str, int]:
        """``topic -> partition count`` in, ``topic/partition -> log-end offset`` out; Unavailable when unreachable."""
        consumer = self._consumer(cluster)
        ends = {}
        try:
            for topic, count in sorted(partitions.items()):
                for p in range(count):
                    ends[partition_key(topic, p)] = int(
                        consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=TIMEOUT_S)[1]
                    )
        except KafkaException as exc:
            raise Unavailable(f"cluster {cluster!r}: reading log ends: {exc.args[0]}") from None
        return ends

    def committed(self, cluster: str, group: str) -> dict[str, int]:
        """The group's committed offsets, ``topic/partition -> offset``."""
        try:
            answer = (
                self._admin(cluster)
                .list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)[group]
                .result(TIMEOUT_S)
            )
        except (KafkaException, TimeoutError) as exc:
            raise Unavailable(f"cluster {cluster!r}: offsets of group {group!r}: {exc}") from None
        return {
            partition_key(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0
        }

    def commit(self, cluster: str, group: str, offsets: Mapping[str, int]) -> None:
        """Commits ``topic/partition -> offset`` for an idle group (the broker refuses an active one)."""
        tps = []
        for key, offset in sorted(offsets.items()):
            topic, _, partition = key.rpartition("/")
            tps.append(TopicPartition(topic, int(partition), offset))
        if not tps:
            return
        try:
            self._admin(cluster).alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, tps)], request_timeout=TIMEOUT_S
            )[group].result(TIMEOUT_S)
        except (KafkaException, TimeoutError) as exc:
            raise Unavailable(f"cluster {cluster!r}: committing group {group!r}: {exc}") from None

    def _read_to_end(self, cluster: str, topic: str) -> list[Any]:
        consumer = kafka_clients.consumer(
            self._config.clusters[cluster],
            f"ferry.failover.{self._client_id}.read",
            **{"auto.offset.reset": "earliest"},
        )
        try:
            metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
            if metadata is None or metadata.error is not None:
                return []
            tps = [TopicPartition(topic, p) for p in metadata.partitions]
            ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)[1] for tp in tps}
            consumer.assign([TopicPartition(topic, p, -2) for p in metadata.partitions])
            out: list[Any] = []
            deadline = time.monotonic() + READ_DEADLINE_S
            while time.monotonic() < deadline:
                positions = {tp.partition: tp.offset for tp in consumer.position(tps)}
                if all(positions.get(p, -1) >= end or end == 0 for p, end in ends.items()):
                    return out
                batch = consumer.consume(kafka_clients.batch_to_end(ends, positions, 10_000), 0.5)
                out += [m for m in batch if m.error() is None and m.key() is not None]
            raise Unavailable(f"cluster {cluster!r}: {topic} could not be read to its end in {READ_DEADLINE_S:.0f} s")
        except KafkaException as exc:
            raise Unavailable(f"cluster {cluster!r}: reading {topic}: {exc.args[0]}") from None
        finally:
            consumer.close()

    def segments(self, cluster: str, route_name: str) -> dict[tuple[str, int], list[Segment]]:
        """The offset map of route ``route_name``, read from ``cluster`` (its destination): per destination
        (topic, partition), its merged segments."""
        found: dict[tuple[str, int], dict[int, Segment]] = {}
        for message in self._read_to_end(cluster, MAP_TOPIC):
            try:
                (name, topic, partition), dst_start, segment = parse_segment(message.key(), message.value())
            except ValueError:
                continue
            if name != route_name:
                continue
            known = found.setdefault((topic, partition), {})
            if segment is None:
                known.pop(dst_start, None)
            elif dst_start not in known or segment.length > known[dst_start].length:
                known[dst_start] = segment
        return {key: merge(segments.values()) for key, segments in found.items()}

    def copied(self, route: RouteConfig) -> tuple[dict[str, int], dict[str, int]]:
        """From the offset map on the destination: per source ``topic/partition``, one past the highest
        source offset copied, and when (ms) the map last grew there."""
        reverse = {route.destination_topic(t): t for t in self._topics.get(route.name, [])}
        copied: dict[str, int] = {}
        at: dict[str, int] = {}
        for message in self._read_to_end(route.destination, MAP_TOPIC):
            try:
                (name, dest_topic, partition), _, segment = parse_segment(message.key(), message.value())
            except ValueError:
                continue
            if name != route.name or segment is None:
                continue
            key = partition_key(reverse.get(dest_topic, dest_topic), partition)
            if segment.src_end >= copied.get(key, 0):
                copied[key] = segment.src_end
                at[key] = max(at.get(key, 0), int(message.timestamp()[1]))
        return copied, at

    def set_topics(self, route: RouteConfig, topics: list[str]) -> None:
        """The route's source topic names (to name the map's destination topics back)."""
        self._topics[route.name] = list(topics)

    def copied_by_headers(self, route: RouteConfig, partitions: Mapping[str, int]) -> dict[str, int]:
        """Per source ``topic/partition``, one past the source offset of the last record on the destination
        partition that this route copied (its provenance header): exact even where the map, persisted at
        the commit rate, is behind what reached the destination. Absent for a partition whose newest copy
        came from an exactly-once route: its header says no offset, and the map, committed with the
        copies, is exact there."""
        consumer = self._consumer(route.destination)
        out: dict[str, int] = {}
        for topic, count in sorted(partitions.items()):
            for p in range(count):
                tp = TopicPartition(route.destination_topic(topic), p)
                try:
                    low, end = consumer.get_watermark_offsets(tp, timeout=TIMEOUT_S)
                except KafkaException as exc:
                    raise Unavailable(f"cluster {route.destination!r}: {exc.args[0]}") from None
                found = self._last_copy(consumer, tp, low, end, route.source)
                if found is not None:
                    out[partition_key(topic, p)] = found + 1
        return out

    @staticmethod
    def _last_copy(consumer: Any, tp: TopicPartition, low: int, end: int, source: str) -> int | None:
        """The source offset of the newest record in ``tp`` copied from ``source`` (looked for in the last
        windows of the partition), or None."""
        window = 500
        top = end
        while top > low:
            start = max(low, top - window)
            consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
            best = None
            deadline = time.monotonic() + TIMEOUT_S
            position = start
            while position < top and time.monotonic() < deadline:
                for message in consumer.consume(max(1, top - position), 0.5):  # no more than is left: it would wait
                    if message.error() is not None or message.offset() >= top:
                        continue
                    try:
                        parsed = provenance.read(message.headers(), tp.topic)
                    except provenance.ProvenanceError:
                        continue
                    if parsed is not None and parsed.source == source:
                        if parsed.source_offset is None:
                            # An exactly-once copy: the offset map, committed in the same transactions as the
                            # copies, is exact here, and nothing of the route's is past what it describes.
                            consumer.unassign()
                            return None
                        best = parsed.source_offset
                # The consumer's position, not the last record's offset: on an exactly-once destination
                # transaction markers (one ends every partition written last by a transaction) and
                # aborted copies take offsets that a read_committed consumer never returns.
                position = max(position, consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset)
            consumer.unassign()
            if best is not None:
                return best
            top = start
            window *= 4
        return None

    def last_checkpoints(self, route: RouteConfig) -> dict[str, dict[str, LastCheckpoint]]:
        """From ``__ferry_checkpoints`` on the destination: group -> destination ``topic/partition`` -> its
        last checkpoint."""
        out: dict[str, dict[str, LastCheckpoint]] = {}
        for message in self._read_to_end(route.destination, CHECKPOINT_TOPIC):
            if message.value() is None:
                continue
            try:
                row = json.loads(message.value())
            except ValueError:
                continue
            if row.get("route") != route.name or row.get("destinationOffset") is None:
                continue
            source_offset = row.get("sourceOffset")
            out.setdefault(row["group"], {})[partition_key(row["destinationTopic"], int(row["partition"]))] = (
                LastCheckpoint(
                    int(row["destinationOffset"]),
                    row.get("method"),
                    None if source_offset is None else int(source_offset),
                )
            )
        return out
