"""The leader's writes of topic nodes: one sequence for every command, whichever lock it holds.

The vocabulary of the leader's writes, used throughout :mod:`controller.lead`:

- an *op* (:class:`controller.lead.store.Op`): one ZooKeeper create, set or delete; ops are committed
  in transactions fenced by the leader's election node (:meth:`controller.lead.leadership.Leadership.commit`,
  :meth:`controller.lead.store.Store.commit`); a commit that finds a node changed under it raises a
  *write conflict* (:class:`controller.lead.store.WriteConflict`: read again, retry);
- the *changes* of a plan (:class:`controller.lead.leader_state.Changes`): what the leader state wants
  written; :func:`controller.lead.write_order.ordered_ops` turns them into ops in a safe order;
- a *topic change* (:class:`TopicChange`): what a committed topic write did to one topic;
- a *topic writer* (:class:`TopicWriter`): a command's topic writes; :meth:`TopicWriter.commit` commits
  its ops and records their topic changes;
- a *topic ledger* (:class:`TopicLedger`): what a topic writer reads the known topics from, commits
  through and records in.

The reconciler hands out topic writers over the ledger that fits the lock the command holds: with
the reconciler's lock (:meth:`controller.lead.reconciler.Reconciler.topic_writer`), the reconciler
itself, and each commit goes into the leader state at once; with only the bulk lock
(:meth:`controller.lead.reconciler.Reconciler.bulk_topic_writer`), a
:class:`controller.lead.bulk_topics.BulkLedger`, and the topics wait as pending topics for the next
holder of the reconciler's lock. Either way one :meth:`TopicWriter.commit` commits the fenced
transaction, then records what it did.

States of a writer: open while its ``with`` block runs; ``committed`` once a commit wrote something
(the reconciler then reconciles, when asked to).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from ferry.common.model import IdealState, TopicKey
from ferry.controller.lead.store import Op


class TopicChange(NamedTuple):
    """What a committed write did to a topic."""

    key: TopicKey
    state: IdealState | None  # its new ideal state; None: deleted
    version: int  # its node's version after the write


class TopicLedger(Protocol):
    """What a :class:`TopicWriter` reads and records through: the leader's topics as one lock sees them."""

    def known_topic(self, key: TopicKey) -> IdealState | None:
        """The topic's ideal state as the leader knows it now; None when it is not mirrored."""

    def topic_version(self, key: TopicKey) -> int:
        """The topic node's version (for a conditional set); -1 when there is none."""

    def removed_topics_of(self, route: str) -> set[str]:
        """The topics of ``route`` removed through ``DELETE`` (their markers)."""

    def ensure_route(self, route: str) -> None:
        """The route's folder of topic nodes exists."""

    def commit(self, ops: Sequence[Op]) -> None:
        """Commits ``ops`` in transactions fenced by the lead's election node."""

    def record_topics(self, changes: Sequence[TopicChange]) -> None:
        """What a commit just did to the topics, for the leader's reads and its next plan."""


class TopicWriter:
    """A command's topic writes through a :class:`TopicLedger` (see the module docstring)."""

    def __init__(self, ledger: TopicLedger) -> None:
        self._ledger = ledger
        self.committed = False

    def known(self, key: TopicKey) -> IdealState | None:
        """The topic's ideal state as the leader knows it now; None when it is not mirrored."""
        return self._ledger.known_topic(key)

    def version(self, key: TopicKey) -> int:
        """The topic node's version (for a conditional set); -1 when there is none."""
        return self._ledger.topic_version(key)

    def removed(self, route: str) -> set[str]:
        """The topics of ``route`` removed through ``DELETE`` (their markers)."""
        return self._ledger.removed_topics_of(route)

    def ensure_route(self, route: str) -> None:
        """The route's folder of topic nodes exists (once per lead)."""
        self._ledger.ensure_route(route)

    def commit(self, ops: list[Op], changes: Iterable[TopicChange]) -> None:
        """Commits ``ops`` (fenced), then records ``changes``, what they did to the topics."""
        if not ops:
            return
        self._ledger.commit(ops)
        self.committed = True
        self._ledger.record_topics(list(changes))
