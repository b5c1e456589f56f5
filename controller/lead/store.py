"""The controller's reads and fenced writes of Ferry's ZooKeeper state.

Paths come from :class:`common.zk.layout.ZkLayout`; payloads from :mod:`common.model`.
Every leader write goes through :meth:`Store.commit`: a kazoo transaction that first checks the
leader's own election node, so a controller that lost its session cannot overwrite anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from ferry.common.errors import TransientError
from ferry.common.model import (
    LAYOUT_VERSION,
    ExternalView,
    IdealState,
    LayoutMarker,
    TopicKey,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
    decode,
)
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.common.zk.state import StateReader
from ferry.controller.errors import ControllerError, NotLeader

# ZooKeeper refuses a request larger than jute.maxbuffer (1 MiB by default): a transaction is
# cut at 512 KiB of paths and payloads (half the limit, a margin for the framing) or 200 ops.
MAX_OPS_PER_TRANSACTION = 200
MAX_BYTES_PER_TRANSACTION = 512 * 1024
# What one op costs in a multi request beyond its path and data: header, version, ACL of a create.
OP_OVERHEAD_BYTES = 64


class WriteConflict(ControllerError, TransientError):
    """A node changed under a fenced write: a version check failed, a node to create exists or one to
    change is gone. Whoever wrote read a stale state: it reads again and retries (503)."""

    status = 503


# What ZooKeeper answers an op whose node changed under the writer (:class:`WriteConflict`).
_CONFLICTS = (BadVersionError, NodeExistsError, NoNodeError)


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
    # External views that exist but were not read (``snapshot(read_views=False)``): the leader
    # rewrites each from the statuses at its first reconcile instead of reading 20,000 nodes.
    unread_views: set[TopicKey] = field(default_factory=set)


@dataclass(frozen=True, init=False)
class Op:
    """One write: ``create`` (data), ``set`` (data, version; -1 any) or ``delete``.

    ``kind`` may be given as its plain word (``Op("set", ...)``); an unknown one is refused here,
    not when the transaction is built.
    """

    kind: OpKind
    path: str
    data: bytes = b""
    version: int = -1

    def __init__(self, kind: OpKind | str, path: str, data: bytes = b"", version: int = -1) -> None:
        object.__setattr__(self, "kind", OpKind(kind))
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "data", data)
        object.__setattr__(self, "version", version)


def op_size(op: Op) -> int:
    """An upper estimate of the bytes ``op`` adds to a ZooKeeper multi request."""
    return len(op.path.encode()) + len(op.data) + OP_OVERHEAD_BYTES


def chunks(
    ops: Sequence[Op], max_bytes: int = MAX_BYTES_PER_TRANSACTION, max_ops: int = MAX_OPS_PER_TRANSACTION
) -> list[list[Op]]:
    """Cuts ``ops``, in order, into transactions of at most ``max_ops`` ops and ``max_bytes`` bytes.

    Pure. An op that alone exceeds ``max_bytes`` raises :class:`ControllerError` before anything is
    written: ZooKeeper would refuse it at every retry, after the earlier chunks had committed.
    """
    result: list[list[Op]] = []
    current: list[Op] = []
    size = 0
    for op in ops:
        cost = op_size(op)
        if cost > max_bytes:
            raise ControllerError(
                f"the write of {op.path} takes {cost} bytes, more than the {max_bytes} bytes a transaction may hold"
            )
        if current and (size + cost > max_bytes or len(current) >= max_ops):
            result.append(current)
            current, size = [], 0
        current.append(op)
        size += cost
    if current:
        result.append(current)
    return result


class Store(StateReader):
    """The leader's view: :class:`common.zk.state.StateReader` plus snapshots and fenced writes.

    Counts what it wrote (``writes`` ops, ``transactions``) and the biggest transaction and node
    (``max_transaction_bytes``, ``max_node_bytes``) for the controller's metrics.
    """

    def __init__(self, zk: KazooClient, layout: ZkLayout) -> None:
        super().__init__(zk, layout)
        self.writes = 0
        self.transactions = 0
        self.max_transaction_bytes = 0
        self.max_node_bytes = 0

    def ensure_layout(self, ferry: str) -> None:
        """Makes sure this Ferry (release ``ferry``) may work under the root, then creates Ferry's folders
        and the layout marker when there is none (:meth:`check_layout`: a newer layout raises
        :class:`common.errors.NewerLayoutError` before anything is written)."""
        marker = self.check_layout(ferry)
        for path in self.layout.persistent_paths():
            self.zk.ensure_path(path)
        if marker is not None:
            return
        try:
            self.zk.create(self.layout.layout_marker, LayoutMarker(LAYOUT_VERSION, ferry).to_bytes())
        except NodeExistsError:  # another controller wrote it first: it must be one this Ferry may read
            self.check_layout(ferry)

    def snapshot(self, read_views: bool = True) -> Snapshot:
        """Everything, read pipelined; with ``read_views`` false only the names of the external views."""
        ideal, versions = self.ideal_states()
        unread: set[TopicKey] = set()
        if not read_views:
            for route in self.children(self.layout.external):
                unread.update(TopicKey(route, t) for t in self.children(self.layout.route_external(route)))
        assignments = {
            worker: WorkerAssignment.from_bytes(data)
            for worker, (data, _) in self._folder(self.layout.assignments).items()
        }
        generation = self.data(self.layout.generation)
        return Snapshot(
            live=self.live_workers(),
            statuses=self.statuses(),
            ideal=ideal,
            ideal_versions=versions,
            external=self.external_views() if read_views else {},
            unread_views=unread,
            assignments=assignments,
            generation=int(decode(generation[0]) or 0) if generation else 0,
            generation_exists=generation is not None,
        )

    def leader(self) -> dict[str, str] | None:
        got = self.data(self.layout.leader)
        leader: dict[str, str] | None = decode(got[0]) if got else None
        return leader

    def commit(self, fence: str, ops: Sequence[Op], absent: Sequence[str] = ()) -> None:
        """Applies ``ops`` in transactions that each first check the leader's election node ``fence``,
        and that each of the ``absent`` paths does not exist (a create and a delete of it: workers
        fenced for these ops must not have registered again meanwhile).

        Transactions are bounded in ops and bytes (:func:`chunks`); each is atomic, the whole list
        is not, so callers order ``ops`` so that every prefix is a safe state.

        Raises :class:`NotLeader` when the fence is gone (this controller lost the lead),
        :class:`WriteConflict` when a node changed under us (the caller reads again and retries) and
        :class:`ControllerError` when ZooKeeper refused an op for another reason.
        """
        for chunk in chunks(ops):
            self.transactions += 1
            self.writes += len(chunk)
            self.max_transaction_bytes = max(self.max_transaction_bytes, sum(op_size(op) for op in chunk))
            self.max_node_bytes = max(self.max_node_bytes, max(len(op.data) for op in chunk))
            transaction = self.zk.transaction()
            transaction.check(fence, 0)
            for path in absent:
                transaction.create(path, b"")
                transaction.delete(path)
            for op in chunk:
                if op.kind is OpKind.CREATE:
                    transaction.create(op.path, op.data)
                elif op.kind is OpKind.SET:
                    transaction.set_data(op.path, op.data, op.version)
                else:
                    transaction.delete(op.path, op.version)
            results = transaction.commit()
            # kazoo answers every op of a failed transaction with an exception: the one that failed
            # with its own, those before it with RolledBackError, those after it with
            # RuntimeInconsistency. The fence's check failed on its own only when the fence is gone.
            if results and isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
                raise NotLeader(f"the fence {fence} is gone: this controller no longer leads")
            guards = results[1 : 1 + 2 * len(absent)]
            for path, result in zip(absent, guards[::2], strict=False):
                if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                    raise WriteConflict(f"{path} exists again: the fenced worker registered again")
            failures = [
                (op, r)
                for op, r in zip(chunk, results[1 + 2 * len(absent) :], strict=False)
                if isinstance(r, Exception) and not isinstance(r, RolledBackError)
            ]
            if failures:
                op, error = failures[0]
                refused = WriteConflict if isinstance(error, _CONFLICTS) else ControllerError
                raise refused(f"ZooKeeper refused {op.kind} {op.path}: {type(error).__name__}")
