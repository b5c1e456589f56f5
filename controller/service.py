"""A Ferry controller: the composition root that builds its parts, wires them and starts/stops them.

One of several controllers leads (:mod:`controller.lead.leadership`: STANDBY -> LEADING -> STANDBY,
any -> STOPPED). The parts, each in a module of its own:

- ``leadership`` (:mod:`controller.lead.leadership`): the campaign, the fence, the leader node, the epoch;
- ``reconciler`` (:mod:`controller.lead.reconciler`): the leader state, the watches feeding it, the
  fenced writes of assignments and views;
- ``topics`` (:mod:`controller.topics.admin`): the fenced topic commands and the observer's writes;
- ``jobs`` (:mod:`controller.jobs.scheduler`): the scheduler's periodic leader jobs and their results;
- ``tree`` (:mod:`controller.tree.control`): the distribution tree's targets and probes;
- ``metrics`` (:mod:`controller.metrics`): the Prometheus registry;
- ``reads`` (:mod:`controller.topics.reads`): what any controller answers (REST reads);
- ``operate`` (:mod:`controller.operate.control`): an operator's controls (pause, cordon, throttles);
- ``failover`` (:mod:`controller.failover.control`): routes' failover states and the failover command.

The REST edge (:func:`controller.api.rest.create_app`) takes this object as a
:class:`controller.api.ports.ControllerApi` and uses the parts by name; the parts
answer with typed data, which :mod:`controller.api.rest_json` shapes as JSON. When the
lead starts, the reconciler forgets the former lead, then (LEADING) its watches and the jobs
start; when the lead ends, every job is removed and the leader state dropped.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from apscheduler.schedulers import SchedulerNotRunningError
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from ferry.common.cli import ferry_version
from ferry.common.config import FerryConfig
from ferry.common.zk.layout import ZkLayout, connect, given_up, make_client
from ferry.controller.errors import Unavailable
from ferry.controller.failover.control import FailoverControl
from ferry.controller.jobs.scheduler import LeaderJobs, make_scheduler
from ferry.controller.kafka_meta import ClusterMetadata
from ferry.controller.lead.leadership import LEADING, STANDBY, STOPPED, Leadership
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.lead.store import Store
from ferry.controller.metrics import ControllerMetrics
from ferry.controller.operate.control import FleetControls
from ferry.controller.topics.admin import TopicAdmin
from ferry.controller.topics.reads import ReadSide
from ferry.controller.tree.control import TreeControl

__all__ = ["LEADING", "STANDBY", "STOPPED", "Controller"]


class Controller:
    """Builds and wires the parts; see the module docstring. ``zk`` and ``clock`` are for tests."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        controller_id: str,
        rest_url: str,
        zk: KazooClient | None = None,
        clock: Callable[[], float] = time.time,
        config_path: str | None = None,
    ) -> None:
        self.config = config
        self.controller_id = controller_id
        self._zk = zk or make_client(config.zookeeper)
        self._owns_zk = zk is None
        layout = ZkLayout(config.zookeeper.root)
        self.store = Store(self._zk, layout)
        self.kafka = ClusterMetadata(config.clusters)
        self.leadership = Leadership(
            zk=self._zk, layout=layout, store=self.store, controller_id=controller_id, rest_url=rest_url
        )
        self.metrics = ControllerMetrics(self.store, lambda: self.reconciler.watch_reads)
        self.scheduler = make_scheduler(self.metrics)
        self.tree = TreeControl(
            config=config, zk=self._zk, layout=layout, leadership=self.leadership, kafka=self.kafka, clock=clock
        )
        self.reconciler = Reconciler(
            config=config,
            zk=self._zk,
            layout=layout,
            store=self.store,
            leadership=self.leadership,
            scheduler=self.scheduler,
            metrics=self.metrics,
            clock=clock,
            effective_routes=self.tree.effective_routes,
        )
        self.operate = FleetControls(
            config=config, layout=layout, leadership=self.leadership, reconciler=self.reconciler
        )
        self.failover = FailoverControl(
            config=config,
            zk=self._zk,
            layout=layout,
            leadership=self.leadership,
            store=self.store,
            registry=self.metrics.registry,
        )
        self.reads = ReadSide(
            config=config,
            zk=self._zk,
            layout=layout,
            leadership=self.leadership,
            reconciler=self.reconciler,
            kafka=self.kafka,
            metrics=self.metrics,
            scheduler=self.scheduler,
            before_scrape=self._before_scrape,
        )
        self.topics = TopicAdmin(
            config=config,
            zk=self._zk,
            layout=layout,
            leadership=self.leadership,
            reconciler=self.reconciler,
            kafka=self.kafka,
            reads=self.reads,
            clock=clock,
        )
        self.jobs = LeaderJobs(
            config=config,
            controller_id=controller_id,
            leadership=self.leadership,
            scheduler=self.scheduler,
            metrics=self.metrics,
            reads=self.reads,
            topics=self.topics,
            tree=self.tree,
            zk=self._zk,
            layout=layout,
            clock=clock,
            config_path=config_path,
        )

    def _before_scrape(self) -> None:
        self.jobs.publish_checkpoint_ages()
        self.failover.publish()

    def start(self, stop: threading.Event | None = None) -> bool:
        """Connects (when it owns the client), lays out ZooKeeper, starts the scheduler and campaigns.

        False when ``stop`` was set while connecting (nothing started). An ensemble that does not
        answer within ``zookeeper.retry_deadline_s`` raises :class:`common.errors.UnreachableError`.
        """
        if self._owns_zk and not connect(self._zk, self.config.zookeeper, stop):
            return False
        try:
            self.store.ensure_layout(ferry_version())
        except KazooException as exc:  # lost again at once, or refused (ACLs): one line, not a traceback
            raise Unavailable(
                f"ZooKeeper at {self.config.zookeeper.connect}: creating Ferry's nodes failed: "
                f"{type(exc).__name__} {exc}".rstrip()
            ) from None
        self.scheduler.start()
        self.leadership.start(self)
        return True

    def zookeeper_given_up(self) -> bool:
        """Whether kazoo stopped reconnecting (ZooKeeper unreachable for longer than
        ``zookeeper.retry_deadline_s``): this controller can neither lead nor follow any more."""
        return given_up(self._zk)

    def stop(self) -> None:
        """Gives up the lead, stops the jobs and closes every client."""
        self.leadership.stop()
        with contextlib.suppress(SchedulerNotRunningError):
            self.scheduler.shutdown(wait=False)
        self.kafka.close()
        self.jobs.close()
        if self._owns_zk:
            self._zk.stop()
            self._zk.close()
        self.leadership.state = STOPPED

    # -- leadership hooks (the election's thread) ------------------------------------------------

    def taking_lead(self, epoch: int) -> None:
        self.reconciler.reset()

    def leading(self, epoch: int) -> None:
        self.reconciler.watch(epoch)
        self.jobs.start()
        self.metrics.leader.set(1)
        self.reconciler.request_reconcile()

    def lead_ended(self) -> None:
        self.metrics.leader.set(0)
        self.reconciler.drop_state()
        self.jobs.stop()
