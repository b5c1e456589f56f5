"""The leader's writes of topic nodes: the one write sequence, under the reconciler's locks.

A :class:`TopicWriter` is handed out by the reconciler (:meth:`Reconciler.writing`,
:meth:`Reconciler.writing_beside_bulk`), which owns the lock protocol: ``lock`` (the model's) before
``adding`` (bulk whitelisting's), never the reverse. With ``lock`` held the model takes each write
at once (``through_model``); with only ``adding`` held, the topics wait for the next holder of
``lock`` (:meth:`Reconciler.whitelisted`). Either way one :meth:`TopicWriter.write` commits the
fenced transaction, then tells the model, then publishes the ideal states for the readers.

States: a writer is open while its ``with`` block runs; ``wrote`` says whether it committed
anything (the reconciler then reconciles, when asked to).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ferry.common.model import IdealState, TopicKey
from ferry.controller.lead.store import Op

if TYPE_CHECKING:
    from ferry.controller.lead.reconciler import Reconciler

TopicWrite = tuple[TopicKey, "IdealState | None", int]
"""What a write did to a topic: its key, its new ideal state (None: deleted), the node's new version."""


class TopicWriter:
    """Topic writes under the reconciler's locks (see the module docstring)."""

    def __init__(self, reconciler: Reconciler, through_model: bool) -> None:
        self._reconciler = reconciler
        self._through_model = through_model
        self.wrote = False

    def known(self, key: TopicKey) -> IdealState | None:
        """The topic's ideal state as the leader knows it now; None when it is not mirrored."""
        if self._through_model:
            return self._reconciler.ideal_state(key.route, key.topic)
        return self._reconciler.known_topic(key)

    def version(self, key: TopicKey) -> int:
        """The topic node's version (for a conditional set); -1 when there is none."""
        return self._reconciler.ideal_version(key)

    def removed(self, route: str) -> set[str]:
        """The topics of ``route`` removed through ``DELETE`` (their markers)."""
        reconciler = self._reconciler
        return set(reconciler.store.children(f"{reconciler.layout.removed}/{route}"))

    def ensure_route(self, route: str) -> None:
        """The route's folder of topic nodes exists (once per lead)."""
        self._reconciler.ensure_path(self._reconciler.layout.route_topics(route))

    def write(self, ops: list[Op], writes: Iterable[TopicWrite]) -> None:
        """Commits ``ops`` (fenced), then tells the model what they did to the topics and publishes it."""
        if not ops:
            return
        reconciler = self._reconciler
        reconciler.commit(ops)
        self.wrote = True
        if self._through_model:
            for key, state, version in writes:
                reconciler.put_topic(key, state, version)
            reconciler.publish_ideal()
        else:
            reconciler.whitelisted([state for _, state, _ in writes if state is not None])
