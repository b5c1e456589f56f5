"""Plain data shared by controller and worker: what Ferry stores in ZooKeeper.

Pure: no I/O, no clock. Node paths live in :mod:`common.zk.layout`; this module only says what
the nodes hold.

Two layers per node, on purpose:

- the *payload* (``IdealStatePayload``, ...): a pydantic model of the JSON in the node, field by
  field, as Ferry has always written it. ``from_bytes`` validates with it (a node that is not
  what Ferry writes fails with a ``ValueError`` naming the field), ``to_bytes`` serializes with it.
  The bytes are stable (sorted keys, no spaces; ``tests/unit/test_vocabulary_and_payloads.py``
  keeps payloads as earlier releases wrote them), and fields a newer Ferry adds are ignored, so old
  and new Ferry processes read each other's nodes. A change that an older Ferry would misread
  raises :data:`LAYOUT_VERSION`, which the root's ``layout`` node records (:class:`LayoutMarker`).
- the *value* (``IdealState``, ...): a frozen dataclass the pure core computes with. The leader
  builds and compares millions of them per reconcile, so they are not validated on construction
  (a pydantic dataclass costs about 1,000 times more to build: measured, 0.7 ms against 0.5 us for
  an assignment of 1,000 partitions).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, cast

from pydantic import BaseModel, ConfigDict
from typing_extensions import NotRequired, TypedDict

from ferry.common.vocabulary import HELD_STATES as HELD_STATES
from ferry.common.vocabulary import PartitionState as PartitionState
from ferry.common.vocabulary import RouteName, WorkerId
from ferry.common.vocabulary import topic_name_problem as topic_name_problem


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


def encode(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(data)


def count_states(states: Iterable[str | None]) -> Counter[str]:
    """How many of ``states`` are in each :class:`PartitionState`; None (nothing reported) counts
    as OFFLINE. Every state is a key, 0 when none is (a gauge set from it drops to 0)."""
    counts: Counter[str] = Counter(dict.fromkeys(PartitionState, 0))
    for state in states:
        counts[state or PartitionState.OFFLINE] += 1  # a StrEnum member and its value are the same key
    return counts


# -- payloads: the JSON of each node ---------------------------------------------------------------


class _Payload(BaseModel):
    """A node's JSON. Fields a newer Ferry may add are ignored; the keys are written sorted."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    def to_bytes(self) -> bytes:
        # Built with model_construct (the values are Ferry's own): a state given as its plain
        # string instead of the enum member is the same word, so no serializer warning.
        return encode(self.model_dump(mode="json", warnings=False))


class IdealStatePayload(_Payload):
    """``topics/<route>/<topic>``."""

    route: RouteName
    topic: str
    partitions: int
    assignment: dict[int, WorkerId] = {}  # partition -> worker; keys are strings in JSON


class WorkerAssignmentPayload(_Payload):
    """``assignments/<worker>``: partitions as ``route/topic/partition``, sorted."""

    generation: int
    partitions: list[str] = []


class StatusEntry(TypedDict):
    """One partition of a :class:`WorkerStatusPayload`."""

    state: PartitionState
    reason: NotRequired[str | None]  # written only when there is one


class LoadEntry(TypedDict):
    """What a worker measured for one partition over its last load window."""

    bytes_per_s: int
    records_per_s: int
    lag: int  # log-end offset minus the consumer's position, at the end of the window


class WorkerStatusPayload(_Payload):
    """``workers/state/<worker>``: partitions keyed ``route/topic/partition``.

    ``load`` and ``busy`` are written only once the worker measured a load window (a status
    without them reads as before)."""

    generation: int = 0
    leaving: bool = False
    partitions: dict[str, StatusEntry] = {}
    load: dict[str, LoadEntry] = {}
    busy: float | None = None  # the share of the window the copy loop spent copying, 0-1

    def to_bytes(self) -> bytes:
        payload = self.model_dump(mode="json", warnings=False)
        for optional in ("load", "busy"):
            if not payload[optional]:
                del payload[optional]
        return encode(payload)


class WorkerInfoPayload(_Payload):
    """``workers/live/<worker>``."""

    id: WorkerId
    host: str
    pid: int
    metrics_url: str | None = None  # written as null when there is none


class LayoutMarkerPayload(_Payload):
    """``layout``."""

    version: int
    ferry: str


class ViewEntry(TypedDict):
    """One partition of an external view: the worker that reports it, its state, and why (ERROR)."""

    worker: str
    state: PartitionState
    reason: NotRequired[str]  # only when the worker gave one


class ExternalViewPayload(_Payload):
    """``external/<route>/<topic>``."""

    route: RouteName
    topic: str
    partitions: dict[int, ViewEntry] = {}


# -- values: what the code computes with -----------------------------------------------------------


@dataclass(frozen=True)
class IdealState:
    """``topics/<route>/<topic>``: which worker copies each partition. Written by the leader only."""

    route: str
    topic: str
    partitions: int
    assignment: dict[int, str] = field(default_factory=dict)  # partition -> worker id

    def to_bytes(self) -> bytes:
        return IdealStatePayload.model_construct(
            route=RouteName(self.route),
            topic=self.topic,
            partitions=self.partitions,
            assignment=cast("dict[int, WorkerId]", self.assignment),
        ).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> IdealState:
        raw = IdealStatePayload.model_validate_json(data)
        return cls(route=raw.route, topic=raw.topic, partitions=raw.partitions, assignment=dict(raw.assignment))


@dataclass(frozen=True)
class WorkerAssignment:
    """``assignments/<worker>``: the whole set a worker must copy, stamped with a generation.

    The leader rewrites it whole on every reconciliation that changes it; the worker applies the
    newest generation it sees and reports that generation back in its :class:`WorkerStatus`.
    """

    generation: int
    partitions: frozenset[PartitionKey] = frozenset()

    def to_bytes(self) -> bytes:
        return WorkerAssignmentPayload.model_construct(
            generation=self.generation,
            partitions=sorted(str(p) for p in self.partitions),
        ).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | None) -> WorkerAssignment:
        if not data:
            return cls(generation=0)
        raw = WorkerAssignmentPayload.model_validate_json(data)
        return cls(generation=raw.generation, partitions=frozenset(PartitionKey.parse(p) for p in raw.partitions))


class PartitionStatus(NamedTuple):
    """A partition's state as its worker reports it (a tuple: the leader compares millions of them)."""

    state: PartitionState  # its plain string is equal to it (no conversion on the leader's hot path)
    reason: str | None = None  # why, when state is ERROR (or OFFLINE for a temporary reason)

    def to_json(self) -> StatusEntry:
        entry = StatusEntry(state=self.state)
        if self.reason:
            entry["reason"] = self.reason
        return entry


class PartitionLoad(NamedTuple):
    """A partition's measured load as its worker reports it (whole numbers per second)."""

    bytes_per_s: int
    records_per_s: int
    lag: int


@dataclass(frozen=True)
class WorkerStatus:
    """``workers/state/<worker>`` (ephemeral): what a worker really does, written by the worker.

    ``generation`` is the assignment generation it has applied; ``leaving`` is set by a worker
    that drains on SIGTERM, so the leader moves its partitions at once instead of after the
    failover delay. ``load`` and ``busy`` are its last load window (``worker.load_report_interval_s``):
    per partition what it copied and its lag, and the share of the window its copy loop was busy.
    """

    generation: int
    partitions: dict[PartitionKey, PartitionStatus] = field(default_factory=dict)
    leaving: bool = False
    load: dict[PartitionKey, PartitionLoad] = field(default_factory=dict)
    busy: float | None = None

    def to_bytes(self) -> bytes:
        return WorkerStatusPayload.model_construct(
            generation=self.generation,
            leaving=self.leaving,
            partitions={str(k): v.to_json() for k, v in self.partitions.items()},
            load={
                str(k): LoadEntry(bytes_per_s=v.bytes_per_s, records_per_s=v.records_per_s, lag=v.lag)
                for k, v in self.load.items()
            },
            busy=self.busy,
        ).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | None, keys: dict[str, PartitionKey] | None = None) -> WorkerStatus:
        """``keys``: a cache of parsed partition keys the caller keeps (the leader parses the same
        keys again at every report of every worker)."""
        if not data:
            return cls(generation=0)
        raw = WorkerStatusPayload.model_validate_json(data)
        parse = PartitionKey.parse if keys is None else partial(_cached_key, keys)
        return cls(
            generation=raw.generation,
            leaving=raw.leaving,
            partitions={parse(k): PartitionStatus(v["state"], v.get("reason")) for k, v in raw.partitions.items()},
            load={parse(k): PartitionLoad(v["bytes_per_s"], v["records_per_s"], v["lag"]) for k, v in raw.load.items()},
            busy=raw.busy,
        )

    def state_counts(self) -> Counter[str]:
        """How many of its partitions this worker reports in each state (:func:`count_states`)."""
        return count_states(status.state for status in self.partitions.values())


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
        return WorkerInfoPayload.model_construct(
            id=WorkerId(self.worker_id),
            host=self.host,
            pid=self.pid,
            metrics_url=self.metrics_url,
        ).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | None) -> WorkerInfo | None:
        if not data:
            return None
        raw = WorkerInfoPayload.model_validate_json(data)
        return cls(worker_id=raw.id, host=raw.host, pid=raw.pid, metrics_url=raw.metrics_url)


@dataclass(frozen=True)
class ExternalView:
    """``external/<route>/<topic>``: per partition, the worker that reports it and in which state."""

    route: str
    topic: str
    partitions: Mapping[int, ViewEntry] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return ExternalViewPayload.model_construct(
            route=RouteName(self.route),
            topic=self.topic,
            partitions=dict(self.partitions),
        ).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> ExternalView:
        raw = ExternalViewPayload.model_validate_json(data)
        return cls(route=raw.route, topic=raw.topic, partitions=dict(raw.partitions))

    def state_counts(self, partitions: int) -> Counter[str]:
        """How many of partitions ``0 .. partitions - 1`` are in each state; one nobody reports is OFFLINE."""
        entries = self.partitions
        return count_states(entry["state"] if (entry := entries.get(p)) else None for p in range(partitions))


LAYOUT_VERSION = 1
"""The version of the nodes' layout this Ferry reads and writes. It rises only with a change that an
older Ferry would misread; a process refuses a root whose marker names a newer one."""


@dataclass(frozen=True)
class LayoutMarker:
    """``layout``: the layout version of the nodes under Ferry's root, and the Ferry release that wrote
    it. Written by the leading controller when it is missing or older than its own."""

    version: int
    ferry: str

    def to_bytes(self) -> bytes:
        return LayoutMarkerPayload.model_construct(version=self.version, ferry=self.ferry).to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes | None) -> LayoutMarker | None:
        if not data:
            return None
        raw = LayoutMarkerPayload.model_validate_json(data)
        return cls(version=raw.version, ferry=raw.ferry)


def newer_layout_problem(marker: LayoutMarker | None, root: str, ferry: str) -> str | None:
    """Why this Ferry (release ``ferry``, layout :data:`LAYOUT_VERSION`) must not work under ``root``,
    whose marker is ``marker``: it names a newer layout. None when it may (no marker: a new root, or one
    written before markers existed; the same or an older version)."""
    if marker is None or marker.version <= LAYOUT_VERSION:
        return None
    return (
        f"ZooKeeper root {root} holds Ferry's state in layout version {marker.version} (written by Ferry "
        f"{marker.ferry}); this Ferry {ferry} knows layout {LAYOUT_VERSION} at most: run Ferry {marker.ferry} "
        "or newer (see docs/upgrading.md)"
    )
