"""Leadership: the campaign for the lead, the fence, the ephemeral leader node and the epoch.

States::

    STANDBY -> LEADING   won the kazoo Election: publishes ``controller/leader`` (its REST URL),
                         then the hooks start the lead's watches and jobs
    LEADING -> STANDBY   lost the lead (session expired, the election node was deleted, or a fenced
                         write found it gone: :meth:`Leadership.lose_lead`): the hooks stop writing
                         at once, the leader node is deleted when still ours, the campaign starts
                         again
    any     -> STOPPED   :meth:`Leadership.stop` (the composition root marks it STOPPED)

The *fence* is this controller's own election node: every write of the lead is a transaction that
``check``s it (:meth:`Leadership.commit`, :meth:`controller.lead.store.Store.commit`), so a
controller whose session expired cannot write. A watch on the fence ends the lead as soon as the node is
deleted (its session expired, or someone deleted Ferry's root): then the campaign starts again. Each lead
first makes sure Ferry's folders and the layout marker exist, so a lead on a root deleted under a running
fleet has folders to watch. The *epoch* counts leads (and their ends): a watch
or a follower started in one epoch stops itself once the epoch changed, so nothing of a former
lead acts in the next one.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.recipe.election import Election
from kazoo.recipe.watchers import DataWatch

from ferry.common.cli import ferry_version
from ferry.common.model import encode
from ferry.common.vocabulary import ControllerState
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import NotLeader
from ferry.controller.lead.store import Op, Store

log = logging.getLogger(__name__)

STANDBY, LEADING, STOPPED = ControllerState.STANDBY, ControllerState.LEADING, ControllerState.STOPPED


class LeadHooks(Protocol):
    """What the other parts do when the lead starts and ends (called on the election's thread)."""

    def taking_lead(self, epoch: int) -> None:
        """Before LEADING: forget everything of a former lead."""

    def leading(self, epoch: int) -> None:
        """Just after LEADING: start the lead's watches and jobs."""

    def lead_ended(self) -> None:
        """Just after LEADING -> STANDBY: stop the lead's jobs (the epoch already moved on)."""


class Leadership:
    """See the module docstring for states; one campaign thread per controller."""

    def __init__(self, *, zk: KazooClient, layout: ZkLayout, store: Store, controller_id: str, rest_url: str) -> None:
        self.controller_id = controller_id
        self.rest_url = rest_url
        self.state = STANDBY
        self.epoch = 0
        self.fence: str | None = None  # this lead's election node
        self._zk = zk
        self._layout = layout
        self._store = store
        self._stopping = threading.Event()
        self._lead_lost = threading.Event()
        self._election: Election | None = None
        self._thread: threading.Thread | None = None
        self._hooks: LeadHooks | None = None

    def start(self, hooks: LeadHooks) -> None:
        """Campaigns on a thread of its own (ZooKeeper started already)."""
        self._hooks = hooks
        self._zk.add_listener(self._on_session_state)
        self._thread = threading.Thread(target=self._campaign, name="controller-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Gives the lead up and ends the campaign (waits up to 10 s for it)."""
        self._stopping.set()
        self._lead_lost.set()
        if self._election is not None:
            with contextlib.suppress(Exception):
                self._election.cancel()
        if self._thread is not None:
            self._thread.join(10)

    def is_leader(self) -> bool:
        return self.state == LEADING

    def require_leader(self) -> None:
        if not self.is_leader():
            raise NotLeader(f"controller {self.controller_id} does not lead")

    def commit(self, ops: Sequence[Op], absent: Sequence[str] = (), epoch: int | None = None) -> None:
        """Writes ``ops`` fenced by this lead's election node, while none of ``absent`` exists
        (:meth:`controller.lead.store.Store.commit`); with ``epoch``, only in the lead of that epoch.

        Raises :class:`NotLeader` when this controller does not lead (that lead) or its fence is gone."""
        # Read in this order: a lead sets its fence, then its epoch, then LEADING; so a fence read
        # before a LEADING state and an unchanged epoch is that lead's own.
        fence = self.fence
        if fence is None or self.state != LEADING or (epoch is not None and epoch != self.epoch):
            raise NotLeader(f"controller {self.controller_id} does not lead")
        self._store.commit(fence, ops, absent)

    def lose_lead(self) -> None:
        """A fenced write found the lead gone: end this lead now (any thread)."""
        self._lead_lost.set()

    def leader(self) -> dict[str, str] | None:
        """The leader node's ``{"id", "rest_url"}``, or None (no leader, or ZooKeeper unreachable)."""
        try:
            return self._store.leader()
        except KazooException:
            return None

    def _on_session_state(self, state: str) -> None:
        # kazoo's connection thread: only record it. A lost session lost the election node too.
        if state == KazooState.LOST:
            self._lead_lost.set()

    def _campaign(self) -> None:
        while not self._stopping.is_set():
            try:
                if not self._zk.connected:
                    time.sleep(0.5)
                    continue
                self._election = Election(self._zk, self._layout.election, identifier=self.controller_id)
                self._election.run(self._lead)
            except Exception as exc:  # kazoo's recipe raises what the connection raised; campaign again
                if not self._stopping.is_set():
                    log.warning("election interrupted (%s); campaigning again", exc)
                    time.sleep(1)

    def _lead(self) -> None:
        """Runs while this controller holds the lead; returning gives it up."""
        assert self._election is not None and self._hooks is not None
        self._lead_lost.clear()
        if self._stopping.is_set():
            return
        self.fence = f"{self._layout.election}/{self._election.lock.node}"
        self.epoch += 1
        epoch = self.epoch
        self._watch_fence(self.fence, epoch)
        try:
            self._store.ensure_layout(ferry_version())
            self._publish_leader()
        except (KazooException, NotLeader) as exc:
            log.warning("could not publish the leader node: %s", exc)
            return
        self._hooks.taking_lead(epoch)
        self.state = LEADING
        log.info("controller %s leads (fence %s)", self.controller_id, self.fence)
        try:
            self._hooks.leading(epoch)
            while not self._lead_lost.wait(0.5):
                if self._stopping.is_set():
                    break
        finally:
            self.state = STANDBY
            self.epoch += 1
            self._hooks.lead_ended()
            if self._zk.connected:
                with contextlib.suppress(KazooException):
                    leader = self._store.leader()
                    if leader and leader.get("id") == self.controller_id:
                        self._zk.delete(self._layout.leader)
            log.info("controller %s no longer leads", self.controller_id)

    def _watch_fence(self, fence: str, epoch: int) -> None:
        """Ends the lead of ``epoch`` when its election node is deleted (kazoo's thread: only records it)."""

        def on_fence(data: bytes | None, stat: object) -> bool | None:
            if self.epoch != epoch:
                return False  # stops this watch: that lead is over
            if stat is None:
                log.warning("the election node %s is gone: giving the lead up", fence)
                self._lead_lost.set()
                return False
            return None

        DataWatch(self._zk, fence, on_fence)

    def _publish_leader(self) -> None:
        assert self.fence is not None
        payload = encode({"id": self.controller_id, "rest_url": self.rest_url})
        try:
            self._zk.create(self._layout.leader, payload, ephemeral=True)
        except NodeExistsError:
            # A former leader's node from a session that has not expired yet: ours now.
            transaction = self._zk.transaction()
            transaction.check(self.fence, 0)
            transaction.delete(self._layout.leader)
            transaction.create(self._layout.leader, payload, ephemeral=True)
            results = transaction.commit()
            if any(isinstance(r, Exception) for r in results):
                raise NotLeader(f"could not take over the leader node: {results}") from None
