"""MirrorMaker 2's last checkpoints, read once per route that takes its mirror over, to translate a
consumer group's offset that Ferry's own offset map does not cover yet (the group committed it on
the source while MirrorMaker 2 was mirroring).
"""

from __future__ import annotations

import logging

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.errors import UnreachableError
from ferry.common.kafka.compacted import read_topic
from ferry.common.mm2 import records
from ferry.controller.errors import Unavailable

log = logging.getLogger(__name__)

MIRRORMAKER2 = "mirrormaker2"  # a GroupOffsetTranslation's method: from MirrorMaker 2's checkpoint

CheckpointKey = tuple[str, str, int]  # group, destination topic, partition


class Mm2Checkpoints:
    """Route -> MirrorMaker 2's last checkpoint per (group, destination topic, partition), read on first use."""

    def __init__(self, config: FerryConfig, client_id: str) -> None:
        self._config = config
        self._client_id = client_id
        self._by_route: dict[str, dict[CheckpointKey, records.Checkpoint]] = {}

    def translate(
        self, route: RouteConfig, group: str, destination_topic: str, partition: int, committed: int
    ) -> int | None:
        """The destination offset MirrorMaker 2 checkpointed for the group (:func:`common.mm2.records.seeded_offset`);
        None without one or on a route that does not take over from MirrorMaker 2."""
        if route.mirrormaker2 is None:
            return None
        if route.name not in self._by_route:
            self._by_route[route.name] = self._read(route)
        return records.seeded_offset(self._by_route[route.name].get((group, destination_topic, partition)), committed)

    def _read(self, route: RouteConfig) -> dict[CheckpointKey, records.Checkpoint]:
        assert route.mirrormaker2 is not None
        topic = str(route.mirrormaker2.names(route.source, route.destination).checkpoints_topic)
        try:
            found = read_topic(self._config.clusters[route.destination], topic, f"{self._client_id}-mm2-checkpoints")
        except UnreachableError as exc:
            raise Unavailable(f"cluster {route.destination!r}: MirrorMaker 2's checkpoints: {exc}") from None
        result = {
            (point.group, point.topic, point.partition): point for point in records.decoded(found, records.checkpoint)
        }
        log.info("route %s: %d MirrorMaker 2 checkpoints read from %s", route.name, len(result), topic)
        return result
