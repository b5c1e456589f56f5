"""The controller's reads and fenced writes of Ferry's ZooKeeper state.

Paths come from :class:`common.zk_layout.ZkLayout`; payloads from :mod:`common.model`.
Every leader write goes through :meth:`Store.commit`: a kazoo transaction that first checks the
leader's own election node, so a controller that lost its session cannot overwrite anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from common.model import ExternalView, IdealState, TopicKey, WorkerAssignment, WorkerInfo, WorkerStatus, decode
from common.zk_layout import ZkLayout
from controller.errors import ControllerError, NotLeader

# Ops per transaction; ZooKeeper refuses a request larger than jute.maxbuffer (1 MB by default).
MAX_OPS_PER_TRANSACTION = 200


@dataclass
class Snapshot:
    """Everything the leader decides from, read at one moment (node versions kept for the writes)."""

    live: dict[str, WorkerInfo] = field(default_factory=dict)
    statuses: dict[str, WorkerStatus] = field(default_factory=dict)
    ideal: dict[TopicKey, IdealState] = field(default_factory=dict)
    ideal_versions: dict[TopicKey, int] = field(default_factory=dict)
    external: dict[TopicKey, ExternalView] = field(default_factory=dict)
    assignments: dict[str, WorkerAssignment] = field(default_factory=dict)
    generation: int = 0
    generation_exists: bool = False


@dataclass(frozen=True)
class Op:
    """One write: ``create`` (data), ``set`` (data, version; -1 any) or ``delete``."""

    kind: str
    path: str
    data: bytes = b""
    version: int = -1


class Store:
    def __init__(self, zk: KazooClient, layout: ZkLayout) -> None:
        self.zk = zk
        self.layout = layout

    def ensure_layout(self) -> None:
        for path in self.layout.persistent_paths():
            self.zk.ensure_path(path)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def _data(self, path: str) -> tuple[bytes, int] | None:
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    def live_workers(self) -> dict[str, WorkerInfo]:
        live = {}
        for worker in self._children(self.layout.live_workers):
            got = self._data(self.layout.live_worker(worker))
            info = WorkerInfo.from_bytes(got[0]) if got else None
            if got is not None:
                live[worker] = info or WorkerInfo(worker, "?", 0)
        return live

    def statuses(self) -> dict[str, WorkerStatus]:
        result = {}
        for worker in self._children(self.layout.worker_states):
            got = self._data(self.layout.worker_state(worker))
            if got is not None:
                result[worker] = WorkerStatus.from_bytes(got[0])
        return result

    def ideal_states(self) -> tuple[dict[TopicKey, IdealState], dict[TopicKey, int]]:
        ideal, versions = {}, {}
        for route in self._children(self.layout.topics):
            for topic in self._children(self.layout.route_topics(route)):
                got = self._data(self.layout.topic(route, topic))
                if got is not None:
                    key = TopicKey(route, topic)
                    ideal[key] = IdealState.from_bytes(got[0])
                    versions[key] = got[1]
        return ideal, versions

    def ideal_state(self, route: str, topic: str) -> IdealState | None:
        got = self._data(self.layout.topic(route, topic))
        return IdealState.from_bytes(got[0]) if got else None

    def external_views(self) -> dict[TopicKey, ExternalView]:
        views = {}
        for route in self._children(self.layout.external):
            for topic in self._children(self.layout.route_external(route)):
                got = self._data(self.layout.external_topic(route, topic))
                if got is not None:
                    views[TopicKey(route, topic)] = ExternalView.from_bytes(got[0])
        return views

    def snapshot(self) -> Snapshot:
        ideal, versions = self.ideal_states()
        assignments = {}
        for worker in self._children(self.layout.assignments):
            got = self._data(self.layout.assignment(worker))
            if got is not None:
                assignments[worker] = WorkerAssignment.from_bytes(got[0])
        generation = self._data(self.layout.generation)
        return Snapshot(
            live=self.live_workers(), statuses=self.statuses(), ideal=ideal, ideal_versions=versions,
            external=self.external_views(), assignments=assignments,
            generation=int(decode(generation[0]) or 0) if generation else 0, generation_exists=generation is not None,
        )

    def leader(self) -> dict[str, str] | None:
        got = self._data(self.layout.leader)
        leader: dict[str, str] | None = decode(got[0]) if got else None
        return leader

    def commit(self, fence: str, ops: Sequence[Op]) -> None:
        """Applies ``ops`` in transactions that each first check the leader's election node ``fence``.

        Raises :class:`NotLeader` when the fence is gone (this controller lost the lead) and
        :class:`ControllerError` when a node changed under us (the caller reconciles again).
        """
        for start in range(0, len(ops), MAX_OPS_PER_TRANSACTION):
            chunk = ops[start:start + MAX_OPS_PER_TRANSACTION]
            transaction = self.zk.transaction()
            transaction.check(fence, 0)
            for op in chunk:
                if op.kind == "create":
                    transaction.create(op.path, op.data)
                elif op.kind == "set":
                    transaction.set_data(op.path, op.data, op.version)
                elif op.kind == "delete":
                    transaction.delete(op.path, op.version)
                else:  # pragma: no cover - programming error
                    raise ValueError(f"unknown op {op.kind}")
            results = transaction.commit()
            if results and isinstance(results[0], Exception):
                raise NotLeader(f"the fence {fence} is gone: this controller no longer leads")
            failures = [(op, r) for op, r in zip(chunk, results[1:], strict=False) if isinstance(r, Exception)
                        and type(r).__name__ != "RolledBackError"]
            if failures:
                op, error = failures[0]
                raise ControllerError(f"ZooKeeper refused {op.kind} {op.path}: {type(error).__name__}")
