"""Plain data shared by controller and worker: what Ferry stores in ZooKeeper.

Pure: dataclasses with JSON round-trips, no I/O, no clock. Node paths live in
:mod:`common.zk_layout`; this module only says what the nodes hold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

# Kafka's own rule (org.apache.kafka.common.internals.Topic): 1-249 of [a-zA-Z0-9._-], not "." or "..".
_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def topic_name_problem(name: object) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None when it is."""
    if not isinstance(name, str) or not name:
        return "a topic name must be a non-empty string"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > 249:
        return f"topic name is {len(name)} characters long; Kafka allows at most 249"
    if not _TOPIC_CHARS.fullmatch(name):  # match() would let a trailing newline through ($)
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None


class PartitionKey(NamedTuple):
    """One unit of work: a partition of a topic on a route (``<source>.<destination>``)."""

    route: str
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.route}/{self.topic}/{self.partition}"

    @classmethod
    def parse(cls, text: str) -> PartitionKey:
        route, topic, partition = text.split("/")
        return cls(route, topic, int(partition))


class TopicKey(NamedTuple):
    route: str
    topic: str

    def __str__(self) -> str:
        return f"{self.route}/{self.topic}"


class PartitionState:
    """States a worker reports for a partition (uReplicator's OnlineOffline model, plus ERROR)."""

    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    ERROR = "ERROR"


def encode(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data)


@dataclass(frozen=True)
class IdealState:
    """``topics/<route>/<topic>``: which worker copies each partition. Written by the leader only."""

    route: str
    topic: str
    partitions: int
    assignment: dict[int, str] = field(default_factory=dict)  # partition -> worker id

    def to_bytes(self) -> bytes:
        return encode({
            "route": self.route, "topic": self.topic, "partitions": self.partitions,
            "assignment": {str(p): w for p, w in sorted(self.assignment.items())},
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> IdealState:
        raw = decode(data)
        return cls(
            route=raw["route"], topic=raw["topic"], partitions=int(raw["partitions"]),
            assignment={int(p): w for p, w in raw.get("assignment", {}).items()},
        )


@dataclass(frozen=True)
class WorkerAssignment:
    """``assignments/<worker>``: the whole set a worker must copy, stamped with a generation.

    The leader rewrites it whole on every reconciliation that changes it; the worker applies the
    newest generation it sees and reports that generation back in its :class:`WorkerStatus`.
    """

    generation: int
    partitions: frozenset[PartitionKey] = frozenset()

    def to_bytes(self) -> bytes:
        return encode({"generation": self.generation, "partitions": sorted(str(p) for p in self.partitions)})

    @classmethod
    def from_bytes(cls, data: bytes | None) -> WorkerAssignment:
        raw = decode(data)
        if not raw:
            return cls(generation=0)
        return cls(
            generation=int(raw["generation"]),
            partitions=frozenset(PartitionKey.parse(p) for p in raw.get("partitions", [])),
        )


class PartitionStatus(NamedTuple):
    """A partition's state as its worker reports it (a tuple: the leader compares millions of them)."""

    state: str  # a PartitionState value
    reason: str | None = None  # why, when state is ERROR

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True)
class WorkerStatus:
    """``workers/state/<worker>`` (ephemeral): what a worker really does, written by the worker.

    ``generation`` is the assignment generation it has applied; ``leaving`` is set by a worker
    that drains on SIGTERM, so the leader moves its partitions at once instead of after the
    failover delay.
    """

    generation: int
    partitions: dict[PartitionKey, PartitionStatus] = field(default_factory=dict)
    leaving: bool = False

    def to_bytes(self) -> bytes:
        return encode({
            "generation": self.generation, "leaving": self.leaving,
            "partitions": {str(k): v.to_json() for k, v in sorted(self.partitions.items())},
        })

    @classmethod
    def from_bytes(cls, data: bytes | None, keys: dict[str, PartitionKey] | None = None) -> WorkerStatus:
        """``keys``: a cache of parsed partition keys the caller keeps (the leader parses the same
        keys again at every report of every worker)."""
        raw = decode(data)
        if not raw:
            return cls(generation=0)
        parse = PartitionKey.parse if keys is None else partial(_cached_key, keys)
        return cls(
            generation=int(raw.get("generation", 0)),
            leaving=bool(raw.get("leaving", False)),
            partitions={parse(k): PartitionStatus(v["state"], v.get("reason")) for k, v in raw.get("partitions", {}).items()},
        )


def _cached_key(keys: dict[str, PartitionKey], text: str) -> PartitionKey:
    key = keys.get(text)
    if key is None:
        key = keys[text] = PartitionKey.parse(text)
    return key


@dataclass(frozen=True)
class WorkerInfo:
    """``workers/live/<worker>`` (ephemeral): a live worker and where its metrics are served."""

    worker_id: str
    host: str
    pid: int
    metrics_url: str | None = None

    def to_bytes(self) -> bytes:
        return encode({"id": self.worker_id, "host": self.host, "pid": self.pid, "metrics_url": self.metrics_url})

    @classmethod
    def from_bytes(cls, data: bytes | None) -> WorkerInfo | None:
        raw = decode(data)
        if not raw:
            return None
        return cls(worker_id=raw["id"], host=raw["host"], pid=int(raw["pid"]), metrics_url=raw.get("metrics_url"))


@dataclass(frozen=True)
class ExternalView:
    """``external/<route>/<topic>``: per partition, the worker that reports it and in which state."""

    route: str
    topic: str
    partitions: dict[int, dict[str, str]] = field(default_factory=dict)  # p -> {worker, state[, reason]}

    def to_bytes(self) -> bytes:
        return encode({
            "route": self.route, "topic": self.topic,
            "partitions": {str(p): v for p, v in sorted(self.partitions.items())},
        })

    @classmethod
    def from_bytes(cls, data: bytes) -> ExternalView:
        raw = decode(data)
        return cls(
            route=raw["route"], topic=raw["topic"],
            partitions={int(p): v for p, v in raw.get("partitions", {}).items()},
        )
