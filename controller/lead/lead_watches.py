"""The lead's ZooKeeper watches: they only record what they saw and wake the reconciler.

kazoo's one event thread records the newest live set and each worker's newest status bytes
(:class:`LeadWatches`); the reconcile job takes them (:meth:`LeadWatches.take`). A watch of an
earlier lead (another epoch) stops itself at its next event.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.recipe.watchers import ChildrenWatch

from ferry.common.zk.layout import ZkLayout
from ferry.common.zk.watches import follow_pipelined
from ferry.controller.lead.leadership import Leadership


class LeadWatches:
    """What the watches saw since the last reconcile (a lock of its own guards it); ``reads`` counts
    the data they brought (each a read at the server).

    ``on_change`` wakes the reconciler; ``on_membership`` gets the workers that joined and left
    when the live set changed after the first event of a lead.
    """

    def __init__(
        self,
        *,
        zk: KazooClient,
        layout: ZkLayout,
        leadership: Leadership,
        on_change: Callable[[], None],
        on_membership: Callable[[list[str], list[str]], None],
    ) -> None:
        self._lock = threading.Lock()
        self.reads = 0
        self._zk = zk
        self._layout = layout
        self._leadership = leadership
        self._on_change = on_change
        self._on_membership = on_membership
        self._seen_live: set[str] | None = None
        self._seen_statuses: dict[str, bytes | None] = {}
        self._live_seen: set[str] | None = None  # the live set as of the last children event
        self._state_watched: set[str] = set()  # workers followed in this epoch (kazoo's thread only)

    def reset(self) -> None:
        """Forgets a former lead's events (before LEADING)."""
        self._live_seen = None
        self.forget()
        self._state_watched = set()

    def start(self, epoch: int) -> None:
        """This lead's watches on the live workers and their status nodes."""
        ChildrenWatch(self._zk, self._layout.live_workers, lambda children: self._on_live(epoch, children))
        ChildrenWatch(self._zk, self._layout.worker_states, lambda children: self._on_states(epoch, children))

    def forget(self) -> None:
        """Drops what was recorded (a leader state read from ZooKeeper has it already)."""
        with self._lock:
            self._seen_live, self._seen_statuses = None, {}

    def take(self) -> tuple[set[str] | None, dict[str, bytes | None]]:
        """The newest live set (None: no change seen) and status bytes (None: node gone) since the last take."""
        with self._lock:
            live, statuses = self._seen_live, self._seen_statuses
            self._seen_live, self._seen_statuses = None, {}
        return live, statuses

    def _on_live(self, epoch: int, children: list[str]) -> bool:
        if epoch != self._leadership.epoch:
            return False  # stops this watch: it belongs to an earlier lead
        live = set(children)
        if self._live_seen is not None and live != self._live_seen:
            joined, left = sorted(live - self._live_seen), sorted(self._live_seen - live)
            self._on_membership(joined, left)
        self._live_seen = live
        with self._lock:
            self._seen_live = live
            self.reads += 1
        self._on_change()
        return True

    def _on_states(self, epoch: int, children: list[str]) -> bool:
        """One follower per worker status node per lead: a worker already followed in this
        epoch gets no second one (each would fire on every later change of that node)."""
        if epoch != self._leadership.epoch:
            return False
        with self._lock:
            self.reads += 1
        for worker in children:
            if worker not in self._state_watched:
                self._state_watched.add(worker)
                self._follow_status(epoch, worker)
        self._on_change()
        return True

    def _follow_status(self, epoch: int, worker: str) -> None:
        """Follows one worker's status node for this lead, pipelined (:func:`common.zk.watches.follow_pipelined`)."""

        def record(data: bytes | None) -> None:
            with self._lock:
                self._seen_statuses[worker] = data  # None: the node is gone
                self.reads += 1
            self._on_change()

        follow_pipelined(self._zk, self._layout.worker_state(worker), lambda: epoch == self._leadership.epoch, record)
