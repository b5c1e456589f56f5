"""The leader's side of an operator's controls (:mod:`common.core.operate.controls`).

Owns ``controls/desired``: every change is read-modify-write under the reconciler's lock on the
leader (standbys forward the REST writes), written fenced with the node's version, handed to the
reconciler's leader state, and applied by the next reconcile (cordons and drains move partitions; the
throttle shares are written again). Workers watch the node and apply the pauses themselves.

No state of its own: the node is the state; reads come from ZooKeeper (any controller answers).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ferry.common.config import FerryConfig
from ferry.common.core.operate.controls import CORDON, DRAIN, Controls, Throttle
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import BadRequest, NotFound
from ferry.controller.lead.leadership import Leadership
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.lead.store import Op
from ferry.controller.topics.reads import select_routes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerControl:
    """A worker's cordon and what the ideal states still give it."""

    worker: str
    cordon: str | None  # CORDON, DRAIN or None
    partitions: int


@dataclass(frozen=True)
class EffectiveThrottle:
    """A route's throttle in effect, and whether an operator set it at run time (else the config's)."""

    throttle: Throttle
    runtime: bool

    def to_json(self) -> dict[str, Any]:
        return {**self.throttle.to_json(), "runtime": self.runtime}


@dataclass(frozen=True)
class ControlsView:
    """The controls, the autobalancing switch in effect and every route's throttle in effect."""

    controls: Controls
    autobalancing: bool
    throttles: dict[str, EffectiveThrottle]  # route -> its throttle

    def to_json(self) -> dict[str, Any]:
        return {
            **self.controls.to_json(),
            "autobalancing": self.autobalancing,
            "throttles": {route: throttle.to_json() for route, throttle in self.throttles.items()},
        }


@dataclass(frozen=True)
class PausedTopic:
    """A topic's paused partitions on each route that pauses some of it (None: the whole topic)."""

    topic: str
    paused: dict[str, list[int] | None]

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "paused": self.paused}


@dataclass(frozen=True)
class RouteThrottleSet:
    """A route's throttle as an operator set it."""

    route: str
    throttle: Throttle

    def to_json(self) -> dict[str, Any]:
        return {"route": self.route, **self.throttle.to_json()}


class FleetControls:
    """See the module docstring."""

    def __init__(
        self, *, config: FerryConfig, layout: ZkLayout, leadership: Leadership, reconciler: Reconciler
    ) -> None:
        self.config = config
        self._layout = layout
        self._leadership = leadership
        self._reconciler = reconciler

    # -- reads ------------------------------------------------------------------------------

    def controls(self) -> Controls:
        got = self._reconciler.store.data(self._layout.controls)
        try:
            return Controls.from_bytes(None if got is None else got[0])
        except ValueError:
            return Controls()

    def view(self) -> ControlsView:
        """The controls, the autobalancing switch in effect and every route's throttle in effect."""
        controls = self.controls()
        enabled = self.config.controller.autobalancing if controls.autobalancing is None else controls.autobalancing
        throttles = {}
        for route in self.config.routes:
            override = controls.throttles.get(route.name)
            effective = override or Throttle(route.max_bytes_per_s, route.max_records_per_s)
            throttles[route.name] = EffectiveThrottle(effective, runtime=override is not None)
        return ControlsView(controls, enabled, throttles)

    def worker(self, worker: str) -> WorkerControl:
        controls = self.controls()
        held = sum(
            1 for state in self._reconciler.ideal_states().values() for w in state.assignment.values() if w == worker
        )
        return WorkerControl(worker, controls.cordoned.get(worker), held)

    # -- writes (the leader only) -------------------------------------------------------------

    def pause(self, topic: str, partitions: list[int] | None, route: str | None, resume: bool = False) -> PausedTopic:
        """Pauses (or resumes) ``partitions`` (None: all) of ``topic`` on every route that mirrors it (or ``route``)."""

        def change(controls: Controls) -> Controls:
            found = False
            for r in select_routes(self.config, route):
                state = self._reconciler.ideal_state(r.name, topic)
                if state is None:
                    continue
                found = True
                bad = [p for p in partitions or () if not 0 <= p < state.partitions]
                if bad:
                    raise BadRequest(f"{topic} has {state.partitions} partitions on {r.name}: no partition {bad[0]}")
                try:
                    controls = (controls.resume if resume else controls.pause)(r.name, topic, partitions)
                except ValueError as exc:
                    raise BadRequest(str(exc)) from None
            if not found:
                raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
            return controls

        controls = self._update(change)
        log.info(
            "%s %s partitions %s", "resumed" if resume else "paused", topic, "all" if partitions is None else partitions
        )
        return PausedTopic(topic, {r: t[topic] for r, t in controls.to_json()["paused"].items() if topic in t})

    def cordon(self, worker: str, how: str | None) -> WorkerControl:
        """Cordons (``CORDON``), drains (``DRAIN``) or uncordons (None) ``worker``."""
        assert how in (CORDON, DRAIN, None)
        self._update(lambda c: c.uncordon(worker) if how is None else c.cordon(worker, how))
        log.info("worker %s: %s", worker, how or "uncordoned")
        return self.worker(worker)

    def set_autobalancing(self, enabled: bool) -> bool:
        """Switches autobalancing on or off; returns the switch as set."""
        self._update(lambda c: c.with_autobalancing(enabled))
        log.info("autobalancing %s", "on" if enabled else "off")
        return enabled

    def set_throttle(self, route: str, throttle: Throttle) -> RouteThrottleSet:
        if route not in {r.name for r in self.config.routes}:
            raise NotFound(f"no route {route!r} (routes: {sorted(r.name for r in self.config.routes)})")
        self._update(lambda c: c.throttle(route, throttle))
        log.info("route %s throttled to %s", route, throttle.to_json())
        return RouteThrottleSet(route, throttle)

    def _update(self, change: Callable[[Controls], Controls]) -> Controls:
        reconciler = self._reconciler
        with reconciler.lock:
            self._leadership.require_leader()
            got = reconciler.store.data(self._layout.controls)
            try:
                current = Controls.from_bytes(None if got is None else got[0])
            except ValueError:
                current = Controls()  # unreadable: the operator's write replaces it
            updated: Controls = change(current)
            if got is None:
                reconciler.ensure_path(self._layout.controls.rsplit("/", 1)[0])
                op = Op(OpKind.CREATE, self._layout.controls, updated.to_bytes())
            else:
                op = Op(OpKind.SET, self._layout.controls, updated.to_bytes(), int(got[1]))
            reconciler.commit([op])
            reconciler.set_controls(updated)
        reconciler.request_reconcile()
        return updated
