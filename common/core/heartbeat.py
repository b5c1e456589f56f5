"""Heartbeats, as MirrorMaker 2 has them: what they hold and what the controller makes of them.

Pure: no I/O, no clock (times are passed in).

With ``heartbeats.interval_s`` set, the leading controller writes one record every interval into
the topic :data:`TOPIC` on every cluster that is the source of a route; every route mirrors that
topic like any other (its name is added to each route's ``include``), so heartbeats travel every
route, hop by hop, and carry the provenance header like any copy. The heartbeat topic is created
with ``message.timestamp.type=LogAppendTime`` (and configs follow the source, so every copy of it
too): a heartbeat's timestamp on a cluster is when it arrived there, and its value holds when it
was written at its origin. The controller reads the heartbeat topics (the copies' names follow
the routes' naming) on every cluster and keeps, per (origin, cluster): the latest end-to-end
latency, the number of hops, and when the last heartbeat arrived.
A route's latency is that of heartbeats that took one hop, over it (origin = its source).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

TOPIC = "ferry.heartbeats"


def encode(origin: str, sent_ms: int) -> bytes:
    return json.dumps({"origin": origin, "sentMs": sent_ms}, separators=(",", ":")).encode()


def decode(value: bytes | None) -> tuple[str, int] | None:
    """(origin, sent at, ms) of a heartbeat's value; None when it is not one of Ferry's."""
    try:
        raw = json.loads(value or b"")
        return str(raw["origin"]), int(raw["sentMs"])
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Arrival:
    """The latest heartbeat from ``origin`` seen on ``cluster``."""

    origin: str
    cluster: str
    hops: int
    latency_s: float  # arrival on cluster (its LogAppendTime) - sent at the origin
    arrived_ms: int


@dataclass(frozen=True)
class Latency:
    """The latest heartbeat from ``origin`` on ``cluster``: its latency and how long ago it arrived."""

    origin: str
    cluster: str
    hops: int
    latency_s: float
    since_last_s: float


@dataclass(frozen=True)
class HeartbeatView:
    """End to end per (origin, cluster), and per route (None: no one-hop heartbeat over it yet)."""

    end_to_end: list[Latency]
    routes: dict[str, Latency | None]


class HeartbeatBook:
    """Per (origin, cluster), the latest heartbeat that arrived. Not thread-safe: one job writes it."""

    def __init__(self) -> None:
        self._latest: dict[tuple[str, str], Arrival] = {}

    def record(self, cluster: str, origin: str, path: tuple[str, ...], sent_ms: int, arrived_ms: int) -> None:
        """A heartbeat from ``origin`` read on ``cluster``; ``path``: its provenance path (empty at home)."""
        if origin == cluster or not path:
            return  # the origin's own record, not a copy
        key = (origin, cluster)
        previous = self._latest.get(key)
        if previous is not None and previous.arrived_ms > arrived_ms:
            return
        self._latest[key] = Arrival(origin, cluster, len(path), max(0.0, (arrived_ms - sent_ms) / 1000), arrived_ms)

    def view(self, now_ms: int, routes: list[tuple[str, str, str]]) -> HeartbeatView:
        """``routes``: (name, source, destination). What REST ``/heartbeats`` and the metrics show."""

        def latency(a: Arrival) -> Latency:
            return Latency(a.origin, a.cluster, a.hops, a.latency_s, max(0, now_ms - a.arrived_ms) / 1000)

        per_route: dict[str, Latency | None] = {}
        for name, source, destination in routes:
            arrival = self._latest.get((source, destination))
            per_route[name] = latency(arrival) if arrival is not None and arrival.hops == 1 else None
        return HeartbeatView([latency(a) for _, a in sorted(self._latest.items())], per_route)

    def arrivals(self) -> list[Arrival]:
        return [a for _, a in sorted(self._latest.items())]
