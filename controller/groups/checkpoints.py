"""Consumer-group checkpoints: source committed offsets translated to the destination.

Every ``checkpoint_interval_s`` the leader, for each route with ``groups`` patterns:

1. lists the source's consumer groups whose id matches (never Ferry's own ``ferry.*`` groups) and
   reads their committed offsets;
2. translates each (topic, partition) with the exact offset map the workers write to the
   compacted ``__ferry_offset_map`` topic on the destination (:mod:`common.core.offset_map`), or, for
   offsets no map covers, with Axual's timestamp method (the committed record's timestamp minus
   ``checkpoint_margin_s``, looked up with ``offsets_for_times`` on the destination);
3. writes each translation to the compacted ``__ferry_checkpoints`` topic on the destination, for
   tools (MirrorMaker 2's checkpoints in spirit), and, with ``sync_group_offsets``, commits it on
   the destination under the same group id, only while that group has no active member there and
   only forward (MirrorMaker 2's ``sync.group.offsets``).

A translation says which method produced it: ``exact``, ``timestamp``, ``mirrormaker2``, ``ahead``
(the group read past the mirror's head: it is placed at the end of what was copied, so after a
failover it re-reads at most what it read while the mirror lagged, and never skips a record), or
``pending`` (no position yet: nothing of the partition is mapped and the timestamp method found none).

A pass refreshes each destination's offset map once and asks each source partition's log end once,
whatever the number of groups reading it.

Why the map lives in a compacted topic on the destination: it describes destination offsets, so it
belongs with the destination's data and is there when the source is gone (a failover is exactly
when it is read); a worker appends to it through the producer it already has, at the commit
rate, which ZooKeeper (small, strongly consistent, not for growing data) should not carry; and
compaction keeps one value per segment, so its size follows the number of segments, not records.

Results are data (:class:`GroupOffsetTranslation`, :class:`SyncResult`, :class:`GroupCheckpoints`); the JSON of
``GET /groups`` and ``ferry groups --json`` is shaped in :mod:`controller.api.rest_json`. The one JSON
built here is the ``__ferry_checkpoints`` record (:func:`checkpoint_record`), a wire format read by
tools, kept apart from the REST shape although they carry the same keys today.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core.offset_map import (
    AHEAD,
    CHECKPOINT_TOPIC,
    EXACT,
    MAP_TOPIC,
    TIMESTAMP,
    Segment,
    copy_end,
    segment_key,
    timestamp_lookup_ms,
    translate,
)
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.kafka.offset_map_reader import TIMEOUT_S, OffsetMapReader, OffsetMapUnavailable
from ferry.common.kafka.pool import ClientPool
from ferry.common.kafka.topics import InternalTopic
from ferry.controller.errors import NotFound, Unavailable
from ferry.controller.groups.mm2_checkpoints import MIRRORMAKER2, Mm2Checkpoints

log = logging.getLogger(__name__)

PENDING = "pending"
_ACTIVE_STATES = {"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"}


@dataclass(frozen=True, kw_only=True)
class GroupOffsetTranslation:
    """One group's position on one partition, on both clusters."""

    route: str
    group: str
    topic: str  # on the source
    partition: int
    source_offset: int  # committed on the source
    source_end: int | None  # log-end offset at the source
    destination_topic: str
    destination_offset: int | None  # None: pending
    method: str  # exact | timestamp | mirrormaker2 | pending

    @property
    def lag(self) -> int | None:
        """Records the group still has to read at the source."""
        return None if self.source_end is None else max(0, self.source_end - self.source_offset)


class SyncResult(NamedTuple):
    """What a sync did for ``group`` on one route: ``synced`` offsets committed, or why none (``skipped``)."""

    group: str
    synced: int
    skipped: str | None = None


class GroupCheckpoints(NamedTuple):
    """The leader's latest translations per group, and (route, group) -> seconds since its last checkpoint."""

    by_group: dict[str, list[GroupOffsetTranslation]]
    ages: dict[tuple[str, str], float]


def checkpoint_record(t: GroupOffsetTranslation, at_ms: int) -> bytes:
    """The value of ``t``'s record in ``__ferry_checkpoints`` (JSON; ``at``: when it was written, ms)."""
    return json.dumps(
        {
            "route": t.route,
            "group": t.group,
            "topic": t.topic,
            "partition": t.partition,
            "sourceOffset": t.source_offset,
            "sourceLogEnd": t.source_end,
            "lag": t.lag,
            "destinationTopic": t.destination_topic,
            "destinationOffset": t.destination_offset,
            "method": t.method,
            "at": at_ms,
        }
    ).encode()


def _why(error: BaseException | None) -> str:
    """What a failed admin call says: librdkafka's text, or that its future got no answer in time
    (``result(timeout)`` raises a bare ``TimeoutError``)."""
    if error is None or isinstance(error, TimeoutError):
        return f"no answer within {TIMEOUT_S:.0f} s"
    return str(kafka_error(error))


def should_sync(translated: int | None, current: int | None, group_active: bool) -> bool:
    """MirrorMaker 2's rule: commit only to an idle group, and only forward."""
    if translated is None or group_active:
        return False
    return current is None or translated > current


class Checkpointer:
    """The checkpoint job and the one-shot operations behind ``ferry groups`` and ``/groups``.

    One per controller (the leader runs :meth:`run`); not thread-safe except :meth:`latest`.
    """

    def __init__(self, config: FerryConfig, client_id: str, clock: Callable[[], float] = time.time) -> None:
        self._config = config
        self._client_id = client_id
        self._clock = clock
        self._admins: ClientPool[str] = ClientPool(lambda cluster: kafka_clients.admin(config.clusters[cluster]))
        # assign()-only reads; never commits
        self._consumers: ClientPool[str] = ClientPool(
            lambda cluster: kafka_clients.consumer(config.clusters[cluster], f"ferry.checkpoints.{client_id}")
        )
        self._maps: dict[str, OffsetMapReader] = {}
        self._mm2 = Mm2Checkpoints(config, client_id)  # routes taking over from MirrorMaker 2
        self._lock = threading.Lock()
        self._latest: dict[str, list[GroupOffsetTranslation]] = {}  # group -> its last translations
        self._checkpointed_at: dict[tuple[str, str], float] = {}  # (route, group) -> last success
        self._checkpoint_topic = InternalTopic(
            name=CHECKPOINT_TOPIC,
            timeout_s=TIMEOUT_S,
            replication_factor=config.internal_topics.replication_factor_on,
            config={"cleanup.policy": "compact"},
        )
        self._producers: ClientPool[str] = ClientPool(lambda cluster: kafka_clients.producer(config.clusters[cluster]))

    # -- clients ----------------------------------------------------------------------------

    def _admin(self, cluster: str) -> Any:
        return self._admins[cluster]

    def _consumer(self, cluster: str) -> Any:
        if (
            cluster in self._consumers
        ):  # unassigned between uses (_by_timestamp assigns and unassigns): its log waits for a poll
            kafka_clients.serve_logs(self._consumers[cluster])
        return self._consumers[cluster]

    def _map(self, cluster: str) -> OffsetMapReader:
        if cluster not in self._maps:
            self._maps[cluster] = OffsetMapReader(
                cluster=self._config.clusters[cluster], client_id=f"ferry-{self._client_id}-{cluster}"
            )
        return self._maps[cluster]

    def fresh_map(self, cluster: str) -> OffsetMapReader:
        """The cluster's offset map, read to its end now (a reader that could not read is dropped)."""
        reader = self._map(cluster)
        try:
            reader.refresh()
        except OffsetMapUnavailable as exc:
            self._drop_map(cluster)
            raise Unavailable(str(exc)) from None
        return reader

    def _drop_map(self, cluster: str) -> None:
        """Forgets the cluster's map reader (it could not read): the next use reads the topic anew."""
        reader = self._maps.pop(cluster, None)
        if reader is not None:
            try:
                reader.close()
            except (KafkaException, RuntimeError) as exc:
                log.warning("closing the offset map reader of %s: %s", cluster, exc)

    def close(self) -> None:
        for reader in self._maps.values():
            reader.close()
        for consumer in self._consumers:
            consumer.close()

    # -- reading ----------------------------------------------------------------------------

    def groups(self, route: RouteConfig) -> list[str]:
        """Source groups the route's ``groups``/``groups_exclude`` patterns select."""
        if not route.groups:
            return []
        try:
            listed = self._admin(route.source).list_consumer_groups(request_timeout=TIMEOUT_S).result(TIMEOUT_S)
        except (KafkaException, TimeoutError) as exc:
            raise Unavailable(f"cluster {route.source!r}: listing consumer groups: {_why(exc)}") from None
        if listed.errors:  # no broker answered (or not all): an empty list would look like "no groups"
            raise Unavailable(f"cluster {route.source!r}: listing consumer groups: {kafka_error(listed.errors[0])}")
        return sorted(g.group_id for g in listed.valid if route.wants_group(g.group_id))

    def _committed(self, cluster: str, group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        try:
            answer = (
                self._admin(cluster)
                .list_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group]
                .result(TIMEOUT_S)
            )
        except (KafkaException, TimeoutError) as exc:
            raise Unavailable(f"cluster {cluster!r}: offsets of group {group!r}: {_why(exc)}") from None
        return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or [] if tp.offset >= 0}

    def translate_group(
        self,
        route: RouteConfig,
        group: str,
        reader: OffsetMapReader | None = None,
        source_ends: dict[tuple[str, int], int | None] | None = None,
        committed: dict[tuple[str, int], int] | None = None,
    ) -> list[GroupOffsetTranslation]:
        """The group's committed offsets on the route's source, translated to its destination, now.

        A checkpoint pass hands in the destination's map ``reader`` it refreshed once, the
        ``source_ends`` it asked so far (filled here) and the group's ``committed`` offsets it read
        before that refresh; without them the offsets are read now, then the map to its end.
        """
        if committed is None:
            committed = self._committed(route.source, group)
        if not committed:
            return []
        if reader is None:
            reader = self.fresh_map(route.destination)
        ends = {} if source_ends is None else source_ends
        result = []
        unknown = [key for key in committed if key not in ends]
        if unknown:
            ends.update(self._source_ends(route.source, unknown))
        for (topic, partition), offset in sorted(committed.items()):
            dest_topic = route.destination_topic(topic)
            segments = reader.segments(route.name, dest_topic, partition)
            if not segments and not self._exists(route.destination, dest_topic):
                continue  # a topic this route does not mirror
            destination_offset, method = self._destination_offset(
                route, group, topic, dest_topic, partition, offset, segments
            )
            result.append(
                GroupOffsetTranslation(
                    route=route.name,
                    group=group,
                    topic=topic,
                    partition=partition,
                    source_offset=offset,
                    source_end=ends[(topic, partition)],
                    destination_topic=dest_topic,
                    destination_offset=destination_offset,
                    method=method,
                )
            )
        return result

    def _destination_offset(
        self,
        route: RouteConfig,
        group: str,
        topic: str,
        dest_topic: str,
        partition: int,
        offset: int,
        segments: list[Segment],
    ) -> tuple[int | None, str]:
        """Where ``group`` goes on from its committed source ``offset`` on the destination, and the method that
        found it: the route's map, the copy's end when the group is ahead of it, MirrorMaker 2's checkpoint where
        Ferry's map has nothing yet, else the timestamp (None: pending)."""
        exact = translate(segments, offset)
        if exact is not None:
            return exact, EXACT
        if segments and offset > max(s.src_end for s in segments):
            return copy_end(segments), AHEAD
        seeded = self._mm2.translate(route, group, dest_topic, partition, offset)
        if seeded is not None:
            return seeded, MIRRORMAKER2
        by_time = self._by_timestamp(route, topic, dest_topic, partition, offset)
        return by_time, TIMESTAMP if by_time is not None else PENDING

    def _source_ends(self, cluster: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """The log ends of ``partitions`` in one request; None for those the cluster does not answer for."""
        try:
            answered = kafka_clients.log_offsets(self._admin(cluster), partitions, True, TIMEOUT_S)
        except (KafkaException, TimeoutError):
            answered = {}
        return {key: answered.get(key) for key in partitions}

    def _exists(self, cluster: str, topic: str) -> bool:
        try:
            metadata = self._consumer(cluster).list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise Unavailable(f"cluster {cluster!r}: {kafka_error(exc)}") from None
        return metadata is not None and metadata.error is None

    def _by_timestamp(self, route: RouteConfig, topic: str, dest_topic: str, partition: int, offset: int) -> int | None:
        """Axual's method: the destination offset of the committed record's timestamp minus the margin."""
        return self.by_timestamp_between(route.source, topic, route.destination, dest_topic, partition, offset)

    def by_timestamp_between(
        self, from_cluster: str, from_topic: str, to_cluster: str, to_topic: str, partition: int, offset: int
    ) -> int | None:
        """The timestamp method, either way: the record before position ``offset`` on ``from_cluster``, its
        timestamp minus the margin, looked up on ``to_cluster`` (its log end when every record there is older).
        None when that record is gone (retention) or a cluster does not answer."""
        if offset == 0:
            return 0
        consumer = self._consumer(from_cluster)
        consumer.assign([TopicPartition(from_topic, partition, offset - 1)])
        try:
            deadline = time.monotonic() + TIMEOUT_S
            record = None
            while record is None and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    record = message
        finally:
            consumer.unassign()
        if record is None:
            return None  # the record is gone (retention) or unreachable
        _, timestamp = record.timestamp()
        at = timestamp_lookup_ms(timestamp, self._config.controller.checkpoint_margin_s)
        other = self._consumer(to_cluster)
        try:
            found = other.offsets_for_times([TopicPartition(to_topic, partition, at)], timeout=TIMEOUT_S)[0]
            if found.offset >= 0:
                return int(found.offset)
            _, end = other.get_watermark_offsets(TopicPartition(to_topic, partition), timeout=TIMEOUT_S)
            return int(end)
        except KafkaException:
            return None

    # -- writing ----------------------------------------------------------------------------

    def _ensure_checkpoint_topic(self, cluster: str) -> None:
        try:
            self._checkpoint_topic.ensure(cluster, lambda: self._admin(cluster))
        except KafkaException as exc:
            raise Unavailable(f"cluster {cluster!r}: creating {CHECKPOINT_TOPIC}: {_why(exc)}") from None

    def emit(self, route: RouteConfig, translations: list[GroupOffsetTranslation]) -> None:
        """Writes the translations to the checkpoint topic on the destination (key: group|route|topic|partition)."""
        if not translations:
            return
        self._ensure_checkpoint_topic(route.destination)
        producer = self._producers[route.destination]
        now_ms = int(self._clock() * 1000)
        for t in translations:
            producer.produce(
                CHECKPOINT_TOPIC,
                key=f"{t.group}|{t.route}|{t.topic}|{t.partition}".encode(),
                value=checkpoint_record(t, now_ms),
            )
        if producer.flush(TIMEOUT_S):
            raise Unavailable(f"cluster {route.destination!r}: checkpoints not acknowledged in {TIMEOUT_S:.0f}s")

    def sync(self, route: RouteConfig, group: str, translations: list[GroupOffsetTranslation]) -> SyncResult:
        """Commits the translated offsets on the destination if the group is idle there; says what it did."""
        admin = self._admin(route.destination)
        try:
            description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
            active = (
                bool(description.members)
                or str(getattr(description.state, "name", description.state)) in _ACTIVE_STATES
            )
        except (KafkaException, TimeoutError) as exc:
            if kafka_error(exc).code != KafkaError.GROUP_ID_NOT_FOUND:
                raise Unavailable(f"cluster {route.destination!r}: describing group {group!r}: {_why(exc)}") from None
            active = False
        if active:
            return SyncResult(group, 0, "the group has active members on the destination")
        current = self._committed(route.destination, group)
        offsets = [
            TopicPartition(t.destination_topic, t.partition, t.destination_offset)
            for t in translations
            if t.destination_offset is not None
            and should_sync(t.destination_offset, current.get((t.destination_topic, t.partition)), False)
        ]
        if offsets:
            try:
                admin.alter_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group, offsets)], request_timeout=TIMEOUT_S
                )[group].result(TIMEOUT_S)
            except KafkaException as exc:  # e.g. a member joined meanwhile: the broker refuses
                return SyncResult(group, 0, f"the destination refused: {kafka_error(exc)}")
            except TimeoutError:
                raise Unavailable(f"cluster {route.destination!r}: committing group {group!r}: {_why(None)}") from None
        return SyncResult(group, len(offsets))

    def trim_map(self, route: RouteConfig) -> int:
        """Tombstones the map segments retention removed from the destination; returns how many."""
        reader = self._map(route.destination)
        try:  # one request for every partition the route's map describes
            starts = kafka_clients.log_offsets(
                self._admin(route.destination), reader.partitions(route.name), False, TIMEOUT_S
            )
        except (KafkaException, TimeoutError):
            return 0  # unknown: keep everything
        gone = reader.below(route.name, lambda topic, partition: starts.get((topic, partition), -1))
        if not gone:
            return 0
        producer = self._producers[route.destination]
        for (route_name, topic, partition), dst_start in gone:
            producer.produce(MAP_TOPIC, key=segment_key(route_name, topic, partition, dst_start), value=None)
        if producer.flush(TIMEOUT_S):
            raise Unavailable(f"cluster {route.destination!r}: offset map tombstones not acknowledged")
        for key, dst_start in gone:
            reader.forget(key, dst_start)
        return len(gone)

    # -- the job ----------------------------------------------------------------------------

    def run(self) -> None:
        """One checkpoint pass: every route's groups, then the map segments retention removed."""
        for route in self._config.routes:
            try:
                groups = self.groups(route)  # none without group patterns
            except Unavailable as exc:
                log.warning("route %s: listing its groups failed (next run retries): %s", route.name, exc)
                continue
            # The groups' offsets first, then the map: the map is at least as new as the offsets it
            # translates, so a group ahead of the mirror is placed after every copy committed by then.
            committed: dict[str, dict[tuple[str, int], int]] = {}
            for group in groups:
                try:
                    committed[group] = self._committed(route.source, group)
                except Unavailable as exc:
                    log.warning(
                        "checkpoint of group %s on route %s failed (next run retries): %s", group, route.name, exc
                    )
            reader: OffsetMapReader | None = None
            if committed:
                try:
                    reader = self.fresh_map(route.destination)  # once per pass, whatever the number of groups
                except Unavailable as exc:
                    log.warning("route %s: reading its offset map failed (next run retries): %s", route.name, exc)
                    committed = {}
            source_ends: dict[tuple[str, int], int | None] = {}
            for group, offsets in committed.items():
                try:
                    translations = self.translate_group(route, group, reader, source_ends, offsets)
                    self.emit(route, translations)
                    if self._config.controller.sync_group_offsets:
                        self.sync(route, group, translations)
                except Unavailable as exc:
                    log.warning(
                        "checkpoint of group %s on route %s failed (next run retries): %s", group, route.name, exc
                    )
                    continue
                with self._lock:
                    others = [t for t in self._latest.get(group, []) if t.route != route.name]
                    self._latest[group] = others + translations
                    self._checkpointed_at[(route.name, group)] = self._clock()
            try:
                if reader is None:  # read already in this pass when the route has groups
                    self._map(route.destination).refresh()
                trimmed = self.trim_map(route)
                if trimmed:
                    log.info(
                        "route %s: %d offset map segments below the destination's log start removed",
                        route.name,
                        trimmed,
                    )
            except (Unavailable, OffsetMapUnavailable, KafkaException) as exc:
                self._drop_map(route.destination)
                log.warning("route %s: trimming the offset map failed (next run retries): %s", route.name, exc)

    def latest(self, group: str | None = None) -> dict[str, list[GroupOffsetTranslation]]:
        with self._lock:
            if group is None:
                return {g: list(ts) for g, ts in sorted(self._latest.items())}
            if group not in self._latest:
                raise NotFound(f"group {group!r} has no checkpoint (not matched by any route's groups, or not run yet)")
            return {group: list(self._latest[group])}

    def ages(self) -> dict[tuple[str, str], float]:
        """(route, group) -> seconds since its last successful checkpoint."""
        now = self._clock()
        with self._lock:
            return {key: now - at for key, at in self._checkpointed_at.items()}
