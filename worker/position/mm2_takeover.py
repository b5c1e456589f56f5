"""Taking over a MirrorMaker 2 mirror: where a route's partition starts when MirrorMaker 2 copied it before.

A route with ``mirrormaker2`` (``ferry import-mm2 --takeover`` writes it) that has neither committed
nor copied anything of a partition starts where MirrorMaker 2 stopped instead of at
``auto_offset_reset``: one past the last source offset MirrorMaker 2 flushed to Connect's offsets
topic, else one past its latest offset sync (:func:`common.mm2.records.takeover_start`). What
MirrorMaker 2 copied after that flush is copied again; that count is logged per partition and
exported as ``ferry_worker_mm2_recopied_records{route,topic,partition}``.

MirrorMaker 2 must be stopped first: its topics are read once per copier (Connect's offsets topic
and the offset syncs, both compacted and small) and kept, so a partition acquired again later
starts from the same record (by then the route has committed, which wins anyway).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaException

from ferry.common.config import MirrorMaker2Config, RouteConfig
from ferry.common.errors import UnreachableError
from ferry.common.kafka.compacted import read_topic
from ferry.common.mm2 import records
from ferry.worker.errors import WorkerError
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)


class Mm2Unavailable(WorkerError):
    """MirrorMaker 2's topics could not be read now (a temporary reason: the partitions wait and retry)."""


class Mm2Takeover:
    """MirrorMaker 2's progress on one route, read once, and the start of each partition it mirrored."""

    def __init__(
        self,
        *,
        route: RouteConfig,
        source: Mapping[str, Any],
        destination: Mapping[str, Any],
        metrics: WorkerMetrics,
        client_id: str,
    ) -> None:
        assert route.mirrormaker2 is not None
        self._route = route
        self._names: MirrorMaker2Config = route.mirrormaker2.names(route.source, route.destination)
        self._source = source
        self._destination = destination
        self._metrics = metrics
        self._client_id = f"{client_id}-{route.name}-mm2"
        self._last_copied: dict[tuple[str, int], int] | None = None
        self._syncs: dict[tuple[str, int], records.OffsetSync] = {}

    def _read(self) -> None:
        try:
            self._read_topics()
        except UnreachableError as exc:
            raise Mm2Unavailable(f"reading MirrorMaker 2's progress: {exc}") from None

    def _read_topics(self) -> None:
        names = self._names
        last: dict[tuple[str, int], int] = {}
        for key, value in read_topic(self._destination, str(names.offsets_topic), self._client_id):
            offset_key = records.source_offset_key(key or b"")
            if (
                offset_key is None
                or offset_key.connector != names.connector
                or offset_key.cluster != names.source_alias
            ):
                continue
            offset = records.source_offset_value(value)
            if offset is None:
                last.pop((offset_key.topic, offset_key.partition), None)
            else:
                last[(offset_key.topic, offset_key.partition)] = offset
        syncs_cluster = self._source if names.offset_syncs_on == "source" else self._destination
        found = read_topic(syncs_cluster, str(names.offset_syncs_topic), self._client_id)
        syncs = {(sync.topic, sync.partition): sync for sync in records.decoded(found, records.offset_sync)}
        self._last_copied, self._syncs = last, syncs
        if not last and not syncs:
            log.warning(
                "route %s: nothing of MirrorMaker 2's found in %s (destination) nor %s (%s): its partitions start "
                "as new ones; check the route's mirrormaker2 names (aliases %s -> %s, connector %s)",
                self._route.name,
                names.offsets_topic,
                names.offset_syncs_topic,
                names.offset_syncs_on,
                names.source_alias,
                names.target_alias,
                names.connector,
            )
            return
        log.info(
            "route %s: MirrorMaker 2's progress read: %d partitions in %s, %d offset syncs in %s",
            self._route.name,
            len(last),
            names.offsets_topic,
            len(syncs),
            names.offset_syncs_topic,
        )

    def start(
        self, topic: str, partition: int, destination_topic: str, end_offset: Callable[[str, int], int]
    ) -> int | None:
        """Where ``topic``/``partition`` starts (None: MirrorMaker 2 never copied it; the reset policy
        decides); logs and exports how many records MirrorMaker 2 wrote that are copied again.
        Raises :class:`Mm2Unavailable` when MirrorMaker 2's topics cannot be read now."""
        if self._last_copied is None:
            self._read()
        assert self._last_copied is not None
        key = (topic, partition)
        if key not in self._last_copied and key not in self._syncs:
            log.info(
                "route %s: %s/%s: MirrorMaker 2 left no record of it; starting as a new partition",
                self._route.name,
                topic,
                partition,
                extra={"topic": topic, "partition": partition},
            )
            return None
        try:
            end = end_offset(destination_topic, partition)
        except KafkaException as exc:
            raise Mm2Unavailable(f"destination end of {topic}/{partition}: {exc}") from None
        plan = records.takeover_start(self._last_copied.get(key), self._syncs.get(key), end)
        if plan.recopied is not None:
            self._metrics.mm2_recopied.labels(self._route.name, topic, str(partition)).set(plan.recopied)
        log.info(
            "route %s: %s/%s takes over from MirrorMaker 2 at source offset %s (from its %s); records "
            "MirrorMaker 2 copied after its last flush, copied again: %s",
            self._route.name,
            topic,
            partition,
            plan.start,
            plan.basis,
            "unknown (no offset sync)" if plan.recopied is None else plan.recopied,
            extra={"topic": topic, "partition": partition},
        )
        return plan.start
