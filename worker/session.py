"""The worker's ZooKeeper session: its live node, and whether the session still holds, so the copy loop stops in time.

States of :class:`ZkSession`::

    connected  -> suspended   kazoo lost the connection (``suspended_since`` set); the copy loop pauses
    suspended  -> connected   kazoo reconnected within the session
    any        -> lost        kazoo reports the session LOST, or the copy loop stood still past the
                              session timeout and one round trip cannot confirm the live node is ours
    lost       -> connected   :meth:`ZkSession.clear` once the worker registered again

Apart from these, ``live_node_gone`` is set when the live node is deleted while the session holds
(someone deleted Ferry's root, or the node): the copy loop then registers again. The watch sets it, and
so does :meth:`ZkSession.check_live_node`, which the copy loop calls every commit interval: a node
deleted again right after the worker re-created it can pass the watch unseen.

kazoo's connection thread only records what happened (:meth:`ZkSession.on_state`) and wakes the
copy loop; the copy loop asks the rest.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import DataWatch

from ferry.common.model import WorkerInfo
from ferry.worker.errors import RegistrationError

log = logging.getLogger(__name__)

# How long the copy loop waits for ZooKeeper to take its status; not taken: written at a later pass.
STATUS_WRITE_TIMEOUT_S = 2.0


class ZkSession:
    """One worker's session: ``lost`` (an event), ``suspended_since`` (None: connected). See the module docstring."""

    def __init__(
        self,
        *,
        zk: KazooClient,
        live_path: str,
        session_timeout_s: float,
        clock: Callable[[], float],
        wake: threading.Event,
    ) -> None:
        self.lost = threading.Event()
        self.live_node_gone = threading.Event()
        self.suspended_since: float | None = None
        self._zk = zk
        self._live_path = live_path
        self._timeout_s = session_timeout_s
        self._clock = clock
        self._wake = wake
        self._last_pass: float | None = None  # when the copy loop last checked the session

    def on_state(self, state: str) -> None:
        # kazoo's connection thread: only record what happened.
        if state == KazooState.LOST:
            self.lost.set()
        elif state == KazooState.SUSPENDED:
            self.suspended_since = self._clock()
        else:
            self.suspended_since = None
        self._wake.set()

    def confirm_after_standstill(self, running: bool) -> None:
        """Marks the session lost when the copy loop stood still past the session timeout and
        ZooKeeper does not confirm, in one round trip, that our live node still belongs to our ZooKeeper session.

        A stopped process (SIGSTOP, a frozen VM) resumes with kazoo's state as it was before the
        stop: "connected". Its session may have expired meanwhile and its partitions moved; kazoo
        learns that only when it reconnects, while this loop would go on copying what the consumer
        had fetched. Nothing is copied until this check has answered.
        """
        now = self._clock()
        last, self._last_pass = self._last_pass, now
        if last is None or not running or now - last <= self._timeout_s:
            return
        try:
            stat = self._zk.exists_async(self._live_path).get(timeout=self._timeout_s)
            ours = stat is not None and stat.owner_session_id == self._zk.client_id[0]
        except Exception as exc:  # no answer is no confirmation
            log.warning("the copy loop stood still for %.1fs and ZooKeeper did not answer: %s", now - last, exc)
            ours = False
        if not ours:
            log.warning(
                "the copy loop stood still for %.1fs, longer than the session timeout, and the "
                "session is not ours any more",
                now - last,
            )
            self.lost.set()

    def watch_live_node(self) -> None:
        """Sets ``live_node_gone`` and wakes the copy loop whenever the live node is deleted (call once registered)."""

        def on_live_node(data: bytes | None, stat: object) -> None:
            # kazoo's watch thread: only record it.
            if stat is None:
                self.live_node_gone.set()
                self._wake.set()

        DataWatch(self._zk, self._live_path, on_live_node)

    def check_live_node(self) -> None:
        """Sets ``live_node_gone`` when ZooKeeper says now that the live node does not exist.

        The watch alone can miss a deletion: kazoo's ``DataWatch`` reports a change of the node's version,
        and a node re-created and deleted again before the watch read it shows none (both reads: no
        node). Never waits long: skipped while disconnected, and a read ZooKeeper does not answer within
        ``STATUS_WRITE_TIMEOUT_S`` proves nothing."""
        if not self._zk.connected:
            return
        try:
            stat = self._zk.exists_async(self._live_path).get(timeout=STATUS_WRITE_TIMEOUT_S)
        except Exception as exc:  # a timeout or a connection error: ask again next time
            log.debug("live node not checked: %s", exc)
            return
        if stat is None:
            self.live_node_gone.set()

    def cut_off(self) -> bool:
        """Lost, or disconnected for longer than the session timeout."""
        suspended_for = None if self.suspended_since is None else self._clock() - self.suspended_since
        return self.lost.is_set() or (suspended_for is not None and suspended_for > self._timeout_s)

    def create_live_node(self, info: WorkerInfo, stopping: threading.Event) -> bool:
        """Creates the ephemeral live node, waiting out a previous incarnation's session.

        False when ``stopping`` was set while waiting (nothing created)."""
        path = self._live_path
        deadline = self._clock() + self._timeout_s * 2 + 5
        while True:
            try:
                # makepath: the folders are gone too when Ferry's root was deleted under a running fleet
                self._zk.create(path, info.to_bytes(), ephemeral=True, makepath=True)
                return True
            except NodeExistsError:
                stat = self._zk.exists(path)
                if stat is not None and stat.owner_session_id == self._zk.client_id[0]:
                    self._zk.set(path, info.to_bytes())
                    return True
                if self._clock() > deadline:
                    raise RegistrationError(
                        f"another live worker holds the id {info.worker_id!r} ({path}); give this one another --id"
                    ) from None
                log.info("waiting for the previous session of worker %s to expire", info.worker_id)
                if stopping.wait(0.5):
                    return False

    def put_ephemeral(self, path: str, payload: bytes) -> bool:
        """Writes one of this worker's ephemeral nodes (its status), creating it when gone; False
        (logged at debug) when ZooKeeper did not take it now: the next pass writes it again.

        Never waits for a connection: kazoo queues a request made while it reconnects until it is
        connected, and the copy loop must go on copying meanwhile."""
        if not self._zk.connected:
            return False
        try:
            try:
                self._zk.set_async(path, payload).get(timeout=STATUS_WRITE_TIMEOUT_S)
            except NoNodeError:
                self._zk.create_async(path, payload, ephemeral=True, makepath=True).get(timeout=STATUS_WRITE_TIMEOUT_S)
        except Exception as exc:
            log.debug("status not published yet: %s", exc)
            return False
        return True

    def delete(self, *paths: str) -> None:
        """Deletes this worker's nodes (those already gone are no error)."""
        for path in paths:
            with contextlib.suppress(NoNodeError):
                self._zk.delete(path)

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists now; False also when ZooKeeper does not answer."""
        try:
            return self._zk.exists(path) is not None
        except KazooException:
            return False
