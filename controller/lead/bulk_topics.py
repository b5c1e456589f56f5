"""What bulk whitelisting shares with the reconciler: the bulk lock, the pending topics, and the ideal
states published to the leader's readers.

A bulk ``POST /topics`` does not wait behind a reconcile: it holds only the bulk lock
(:meth:`BulkTopics.holding`) and writes through a :class:`BulkLedger`. The topics it created are
*pending* until the next holder of the reconciler's lock takes them into the leader state
(:meth:`BulkTopics.take_pending`). Readers get a read-only copy of the leader state's ideal states
plus the pending topics (:meth:`BulkTopics.published`), replaced, never changed in place, at each
change. Lock order: the reconciler's lock before the bulk lock, never the reverse.

States: unpublished (``published()`` is None: no leader state yet, or it was dropped) -> published
(:meth:`BulkTopics.publish` with the leader state's ideal states) -> published again at each change,
pending topics added (:meth:`BulkTopics.add_pending`) and taken (:meth:`BulkTopics.take_pending`) in
between -> unpublished (:meth:`BulkTopics.publish` with None).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType

from ferry.common.model import IdealState, TopicKey
from ferry.controller.errors import Unavailable
from ferry.controller.lead.store import Op
from ferry.controller.lead.topic_writes import TopicChange, TopicLedger


class BulkTopics:
    """See the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._pending: dict[TopicKey, IdealState] = {}
        self._published: Mapping[TopicKey, IdealState] | None = None

    @contextmanager
    def holding(self) -> Iterator[None]:
        """The bulk lock, held while the block runs (taken after the reconciler's lock, never before)."""
        with self._lock:
            yield

    def forget_pending(self) -> None:
        """Drops the pending topics of a former lead."""
        with self._lock:
            self._pending = {}

    def publish(self, ideal: Mapping[TopicKey, IdealState] | None) -> None:
        """A fresh read-only copy of ``ideal`` (the leader state's; None: there is none) and the pending topics."""
        with self._lock:  # so no bulk request's topics go missing from it meanwhile
            self._published = None if ideal is None else MappingProxyType({**ideal, **self._pending})

    def published(self) -> Mapping[TopicKey, IdealState] | None:
        """The ideal states as last published, pending topics included; None when unpublished."""
        return self._published

    def known(self, key: TopicKey) -> IdealState | None:
        """With the bulk lock held: the topic's ideal state as the leader knows it, None when it is not mirrored."""
        published = self._published
        if published is None:
            raise Unavailable("the leader is reading its state again; try again")
        if key in self._pending:
            return self._pending[key]
        return published.get(key)

    def add_pending(self, states: list[IdealState]) -> None:
        """Topics just created in ZooKeeper with the bulk lock held: pending until the next holder of
        the reconciler's lock takes them; reads of the ideal states show them already."""
        added = {TopicKey(state.route, state.topic): state for state in states}
        with self._lock:
            # A new dict, never changed in place: a reader may be reading the old one.
            self._pending = {**self._pending, **added}
            published = self._published
            if published is not None:
                self._published = MappingProxyType({**published, **added})

    def take_pending(self) -> dict[TopicKey, IdealState]:
        """The pending topics, no longer pending (the caller holds the reconciler's lock)."""
        if not self._pending:
            return {}
        with self._lock:
            taken, self._pending = self._pending, {}
        return taken


class BulkLedger:
    """The :class:`controller.lead.topic_writes.TopicLedger` of bulk whitelisting, with only the bulk lock
    held: it reads and records through ``topics``' pending topics, and writes through ``ledger``."""

    def __init__(self, ledger: TopicLedger, topics: BulkTopics) -> None:
        self._ledger = ledger
        self._topics = topics

    def known_topic(self, key: TopicKey) -> IdealState | None:
        return self._topics.known(key)

    def topic_version(self, key: TopicKey) -> int:
        return self._ledger.topic_version(key)

    def removed_topics_of(self, route: str) -> set[str]:
        return self._ledger.removed_topics_of(route)

    def ensure_route(self, route: str) -> None:
        self._ledger.ensure_route(route)

    def commit(self, ops: Sequence[Op]) -> None:
        self._ledger.commit(ops)

    def record_topics(self, changes: Sequence[TopicChange]) -> None:
        self._topics.add_pending([change.state for change in changes if change.state is not None])
