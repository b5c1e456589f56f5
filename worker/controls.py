"""The worker's side of an operator's controls: which held partitions are paused, this worker's
share of each route's throttle (:mod:`common.core.operate.controls`), and the tree distributors'
switched targets.

ZooKeeper watches (kazoo's one thread) only store the newest ``controls/desired`` and
``controls/shares`` and wake the copy loop; the copy loop applies the whole desired state to its
copiers after every reconcile (level-triggered: a partition acquired while its topic is paused is
paused before its first batch). An unreadable node is logged and ignored (the last good one stays).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ferry.common.core.operate.controls import Controls, Throttle, shares_from_bytes
from ferry.common.core.operate.rate import RouteThrottle
from ferry.common.model import PartitionKey, decode
from ferry.worker.copier import RouteCopier
from ferry.worker.mailbox import Mailbox

log = logging.getLogger(__name__)


class WorkerControls:
    """See the module docstring. ``on_*`` run on kazoo's thread; :meth:`apply` on the copy loop's."""

    def __init__(self, worker_id: str, wake: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
        self._worker_id = worker_id
        self._clock = clock
        self._desired: Mailbox[Controls] = Mailbox(wake)
        self._new_shares: Mailbox[dict[str, Throttle]] = Mailbox(wake)
        # The copy loop's own: what it last took, and the held partitions it last applied them to.
        self._controls = Controls()
        self._shares: dict[str, Throttle] = {}
        self._applied_to: frozenset[PartitionKey] | None = None

    def on_controls(self, data: bytes | None, stat: Any) -> None:
        try:
            controls = Controls.from_bytes(data)
        except ValueError as exc:
            log.error("ignoring an unreadable controls node: %s", exc)
            return
        self._desired.put(controls)

    def on_shares(self, data: bytes | None, stat: Any) -> None:
        try:
            shares = shares_from_bytes(data).get(self._worker_id, {})
        except ValueError as exc:
            log.error("ignoring an unreadable throttle shares node: %s", exc)
            return
        self._new_shares.put(shares)

    def apply(self, copiers: Mapping[str, RouteCopier], commit_deadline: float) -> bool:
        """Pauses exactly the paused held partitions and sets each route's throttle (when anything
        changed); True when it looked again (the worker then reports its statuses again)."""
        held = frozenset(PartitionKey(route, t, p) for route, copier in copiers.items() for t, p in copier.held())
        controls, shares = self._desired.take(), self._new_shares.take()
        if controls is None and shares is None and self._applied_to == held:
            return False
        self._controls = controls = self._controls if controls is None else controls
        self._shares = shares = self._shares if shares is None else shares
        now = self._clock()
        for route, copier in copiers.items():
            paused = {
                (p.topic, p.partition)
                for p in controls.paused_among(PartitionKey(route, t, n) for t, n in copier.held())
            }
            copier.set_paused(paused, commit_deadline)
            share = shares.get(route)
            if share is None or not share.limited():
                copier.throttle = None
            elif copier.throttle is None:
                copier.throttle = RouteThrottle(share.max_bytes_per_s, share.max_records_per_s)
            else:
                copier.throttle.set_rates(share.max_bytes_per_s, share.max_records_per_s, now)
        self._applied_to = held
        return True


class SwitchedTargets:
    """The newest switched targets of the tree's distributors (ZooKeeper ``tree/targets``: distributor
    route name -> its target cluster), handed from kazoo's watch thread to the copy loop through a
    :class:`worker.mailbox.Mailbox` (its states: EMPTY, FULL).
    """

    def __init__(self, path: str, wake: threading.Event) -> None:
        self._path = path
        self._switched: Mailbox[dict[str, str]] = Mailbox(wake)

    def on_targets(self, data: bytes | None, stat: Any) -> None:
        """A ``DataWatch`` callback: runs on kazoo's event thread, so it only stores and wakes."""
        try:
            switched = decode(data) or {}
        except ValueError:
            log.error("ignoring an unreadable %s", self._path)
            return
        self._switched.put({str(k): str(v) for k, v in switched.items()})

    def take(self) -> dict[str, str] | None:
        """The targets stored since the last call, or None when nothing new came."""
        return self._switched.take()
