"""The controller's reads and fenced writes of Ferry's ZooKeeper state.

Paths come from :class:`common.zk_layout.ZkLayout`; payloads from :mod:`common.model`.
Every leader write goes through :meth:`Store.commit`: a kazoo transaction that first checks the
leader's own election node, so a controller that lost its session cannot overwrite anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from common.model import ExternalView, IdealState, TopicKey, WorkerAssignment, WorkerInfo, WorkerStatus, decode
from common.zk_state import StateReader
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


class Store(StateReader):
    """The leader's view: :class:`common.zk_state.StateReader` plus snapshots and fenced writes."""

    def ensure_layout(self) -> None:
        for path in self.layout.persistent_paths():
            self.zk.ensure_path(path)

    def snapshot(self) -> Snapshot:
        ideal, versions = self.ideal_states()
        assignments = {}
        for worker in self.children(self.layout.assignments):
            got = self.data(self.layout.assignment(worker))
            if got is not None:
                assignments[worker] = WorkerAssignment.from_bytes(got[0])
        generation = self.data(self.layout.generation)
        return Snapshot(
            live=self.live_workers(), statuses=self.statuses(), ideal=ideal, ideal_versions=versions,
            external=self.external_views(), assignments=assignments,
            generation=int(decode(generation[0]) or 0) if generation else 0, generation_exists=generation is not None,
        )

    def leader(self) -> dict[str, str] | None:
        got = self.data(self.layout.leader)
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
