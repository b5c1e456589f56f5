"""How a route copier names what it copies: a source partition's key, and each source topic's
destination topic (the route's naming, :mod:`common.core.naming`), both ways."""

from __future__ import annotations

from typing import Any

from ferry.common.config import RouteConfig

# A source partition as a copier holds it: (source topic, partition).
TopicPartitionKey = tuple[str, int]


class TopicNames:
    """A route's destination topic for each source topic, worked out once per topic, and back."""

    def __init__(self, route: RouteConfig) -> None:
        self._route = route
        self._destinations: dict[str, str] = {}
        self._sources: dict[str, str] = {}  # the reverse, for delivery reports

    def destination(self, topic: str) -> str:
        """The destination topic of source ``topic``."""
        name = self._destinations.get(topic)
        if name is None:
            name = self._destinations[topic] = self._route.destination_topic(topic)
            self._sources[name] = topic
        return name

    def source(self, destination_topic: str) -> str:
        """The source topic of a destination topic this copier named (else the name itself)."""
        return self._sources.get(destination_topic, destination_topic)


def partition_fields(key: TopicPartitionKey) -> dict[str, Any]:
    """A partition's log fields (each part's logger carries the route)."""
    return {"topic": key[0], "partition": key[1]}
