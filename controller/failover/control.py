"""The controller's failover part: ``GET /routes``, ``GET /routes/<route>``, ``POST /routes/<route>/failover``.

Reads answer on any controller (the state is in ZooKeeper); a failover runs on the leader (a standby
forwards it, like every write), one at a time per controller, with the state machine of
:mod:`controller.failover.workflow`. A leader that dies halfway leaves the phase it reached in
ZooKeeper; the retried request, on the next leader, goes on from there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from prometheus_client import CollectorRegistry, Gauge

from ferry.common.config import FerryConfig
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import NotFound, NotLeader, Unavailable
from ferry.controller.failover import states as fsm
from ferry.controller.failover.document import FailoverDocument, FailoverPlan
from ferry.controller.failover.guard import read_state
from ferry.controller.lead.leadership import Leadership
from ferry.controller.lead.store import Op, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class RouteFailover:
    """A configured route, its clusters and its failover document."""

    route: str
    source: str
    destination: str
    document: FailoverDocument

    def to_json(self) -> dict[str, Any]:
        """As ``GET /routes`` shows it: the route and its clusters, then the document's JSON."""
        return {"route": self.route, "source": self.source, "destination": self.destination, **self.document.to_json()}


class FailoverControl:
    """See the module docstring."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        leadership: Leadership,
        store: Store,
        registry: CollectorRegistry,
    ) -> None:
        self._store = store
        self.config = config
        self._zk = zk
        self._layout = layout
        self._leadership = leadership
        self._running = threading.Lock()
        self._gauge = Gauge(
            "ferry_controller_route_failover_state",
            "1 for each route's failover state (ACTIVE, REQUESTED, DRAINING, SYNCING, FAILED_OVER, FAILING_BACK)",
            ["route", "state"],
            registry=registry,
        )

    def routes(self) -> list[RouteFailover]:
        """Every configured route with its failover document (and report, once it has one)."""
        out = []
        for route in self.config.routes:
            document, _ = read_state(self._zk, self._layout, route.name)
            out.append(
                RouteFailover(route=route.name, source=route.source, destination=route.destination, document=document)
            )
        return out

    def route(self, name: str) -> RouteFailover:
        for row in self.routes():
            if row.route == name:
                return row
        raise NotFound(f"no route {name!r} in the config")

    def publish(self) -> None:
        """The state gauge, from ZooKeeper (before a scrape)."""
        for row in self.routes():
            for state in fsm.STATES:
                self._gauge.labels(row.route, state).set(1 if row.document.state == state else 0)

    def _fenced(self, ops: list[Op]) -> None:
        fence = self._leadership.fence
        if fence is None:
            raise NotLeader(f"controller {self._leadership.controller_id} does not lead")
        self._store.commit(fence, ops)

    def plan(self, name: str, planned: bool, groups: str | None, topics: str | None) -> FailoverPlan:
        """What :meth:`fail_over` would do now, read-only (:meth:`FailoverRun.plan`); alongside a failover
        running, since it writes nothing."""
        from ferry.controller.failover.workflow import FailoverRun  # the Kafka clients load only when used

        self.route(name)
        run = FailoverRun(
            config=self.config,
            zk=self._zk,
            layout=self._layout,
            client_id=self._leadership.controller_id,
            say=lambda line: log.info("failover dry run: %s", line),
        )
        try:
            return run.plan(name, planned, groups, topics)
        finally:
            run.close()

    def fail_over(
        self, name: str, planned: bool, groups: str | None, topics: str | None, quiet_s: float, timeout_s: float
    ) -> FailoverDocument:
        from ferry.controller.failover.workflow import FailoverRun  # the Kafka clients load only when used

        self.route(name)
        self._leadership.require_leader()
        if not self._running.acquire(blocking=False):
            raise Unavailable("a failover runs on this controller now; retry when it ended")
        run = FailoverRun(
            config=self.config,
            zk=self._zk,
            layout=self._layout,
            client_id=self._leadership.controller_id,
            say=lambda line: log.info("failover: %s", line),
            commit=self._fenced,
        )
        try:
            return run.failover(name, planned, groups, topics, quiet_s, timeout_s)
        finally:
            run.close()
            self._running.release()
