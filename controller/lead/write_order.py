"""The ops of a plan's changes (:class:`controller.lead.leader_state.Changes`), in an order where
every prefix a worker may see is safe (the leader's write vocabulary: :mod:`controller.lead.topic_writes`).

Pure: no I/O; the reconciler commits the ops (:meth:`controller.lead.store.Store.commit`).
"""

from __future__ import annotations

from ferry.common.model import WorkerAssignment, encode
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.lead.leader_state import Changes, LeaderState
from ferry.controller.lead.store import MAX_BYTES_PER_TRANSACTION, MAX_OPS_PER_TRANSACTION, Op, chunks


def ordered_ops(
    layout: ZkLayout,
    leader_state: LeaderState,
    changes: Changes,
    generation: int,
    max_bytes: int = MAX_BYTES_PER_TRANSACTION,
    max_ops: int = MAX_OPS_PER_TRANSACTION,
) -> list[Op]:
    """The ops of ``changes`` (against ``leader_state``'s mirrors), in an order where every prefix is safe.

    ZooKeeper applies each transaction atomically, but a batch bigger than one transaction
    (:func:`controller.lead.store.chunks`) takes several, and a worker may see any prefix of them. So
    such a batch goes: the generation node first (a successor never reuses a generation), then the
    ideal states (the decision is durable before anyone acts on it), then every assignment that
    loses partitions, written without the ones it gains, then the assignments as planned (gains,
    new nodes, deletions of empty ones), then the external views (which no worker reads). A
    partition thus leaves its old worker's assignment before it appears in its new one's: no
    prefix names it in two assignments. A batch that fits in one transaction is written as it is.
    """
    ideal_ops = [
        Op(OpKind.SET, layout.topic(key.route, key.topic), state.to_bytes(), leader_state.ideal_versions[key])
        for key, state in sorted(changes.ideal.items())
    ]
    assignment_ops, shrink_ops, grow_ops = [], [], []
    for worker, partitions in sorted(changes.assignments.items()):
        old = leader_state.assignments.get(worker)
        path = layout.assignment(worker)
        final = Op(
            OpKind.CREATE if old is None else OpKind.SET, path, WorkerAssignment(generation, partitions).to_bytes()
        )
        assignment_ops.append(final)
        kept = partitions if old is None else old.partitions & partitions
        if old is not None and kept != old.partitions:  # loses partitions: that comes first
            shrink_ops.append(
                final if kept == partitions else Op(OpKind.SET, path, WorkerAssignment(generation, kept).to_bytes())
            )
        if old is None or kept != partitions:
            grow_ops.append(final)
    for worker in sorted(changes.delete_assignments):
        delete = Op(OpKind.DELETE, layout.assignment(worker))  # a departed worker with nothing left
        assignment_ops.append(delete)
        grow_ops.append(delete)
    generation_ops = []
    if changes.assignments:
        generation_ops.append(
            Op(OpKind.SET if leader_state.generation_exists else OpKind.CREATE, layout.generation, encode(generation))
        )
    view_ops = [
        Op(
            OpKind.SET if key in leader_state.external or key in leader_state.unread_views else OpKind.CREATE,
            layout.external_topic(key.route, key.topic),
            view.to_bytes(),
        )
        for key, view in sorted(changes.views.items())
    ]
    view_ops += [Op(OpKind.DELETE, layout.external_topic(key.route, key.topic)) for key in sorted(changes.delete_views)]
    plain = generation_ops + ideal_ops + assignment_ops + view_ops
    if len(chunks(plain, max_bytes, max_ops)) <= 1:
        return plain  # one transaction: atomic, no intermediate state to order
    return generation_ops + ideal_ops + shrink_ops + grow_ops + view_ops
