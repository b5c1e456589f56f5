"""The leader's periodic jobs and their results: observer, lag, Spark validation, tree probes,
heartbeats, checkpoints, schema distribution and ACL sync.

Every job has an executor (thread) of its own, so none waits behind another and none delays a
failover (reconciliation has the ``default`` thread, :mod:`controller.lead.reconciler`). No job has a
misfire grace limit (a late run runs; missed runs coalesce into one); every run, failure and
skip is counted (:meth:`controller.metrics.ControllerMetrics.on_job_event`).

States: jobs exist only while this controller leads (:meth:`LeaderJobs.start` at the start of a
lead, :meth:`LeaderJobs.stop` at its end, which removes *every* scheduled job, the reconciler's
included, and closes the heartbeat and ACL sync clients). The results the REST layer reads here (``/noprogress``,
``/heartbeats``, ``/groups``, ``/schemas``) are the leader's alone: a standby forwards. They are
data (:class:`controller.topics.progress.NoProgress`, :class:`common.core.heartbeat.HeartbeatView`,
:class:`controller.groups.checkpoints.GroupCheckpoints`, :class:`controller.schemas.distributor.SchemaStatus`
and ``SchemaReport``); :mod:`controller.api.rest_json` shapes the JSON.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from ferry.common.config import FerryConfig
from ferry.common.core.heartbeat import HeartbeatView
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import ControllerError, NotFound, NotLeader
from ferry.controller.groups.checkpoints import Checkpointer, GroupCheckpoints
from ferry.controller.groups.translate import OffsetTranslation, OffsetTranslator
from ferry.controller.jobs.acl_sync import AclSyncJob
from ferry.controller.jobs.heartbeats import HeartbeatJob
from ferry.controller.lead.leadership import Leadership
from ferry.controller.metrics import ControllerMetrics
from ferry.controller.schemas.distributor import SchemaDistributor, SchemaReport, SchemaStatus
from ferry.controller.topics.admin import TopicAdmin
from ferry.controller.topics.progress import NoProgress, ProgressTracker
from ferry.controller.topics.reads import ReadSide
from ferry.controller.tree.control import TreeControl

log = logging.getLogger(__name__)

# Reconciliation (with rebalance, failover and retries) has the one "default" thread; "timer"
# runs the resync; every periodic job has its own (registry and Kafka I/O never delay a failover).
_EXECUTORS = ("default", "timer", "observer", "lag", "spark", "tree", "heartbeats", "checkpoints", "schemas", "acls")


def make_scheduler(metrics: ControllerMetrics) -> BackgroundScheduler:
    """The controller's scheduler: one thread per executor, every job event counted."""
    scheduler = BackgroundScheduler(
        executors={name: ThreadPoolExecutor(1) for name in _EXECUTORS},
        # A late run still runs (no misfire grace limit); missed runs coalesce into one.
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
    )
    scheduler.add_listener(
        metrics.on_job_event, EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES
    )
    return scheduler


class LeaderJobs:
    """See the module docstring."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        controller_id: str,
        leadership: Leadership,
        scheduler: BaseScheduler,
        metrics: ControllerMetrics,
        reads: ReadSide,
        topics: TopicAdmin,
        tree: TreeControl,
        zk: KazooClient,
        layout: ZkLayout,
        clock: Callable[[], float],
        config_path: str | None,
    ) -> None:
        self.config = config
        self._leadership = leadership
        self._scheduler = scheduler
        self._metrics = metrics
        self._reads = reads
        self._topics = topics
        self._tree = tree
        self._clock = clock
        self._config_path = config_path  # for the Spark validation, run as `ferry validate --store`
        self.progress = ProgressTracker(config.controller.noprogress_after_s)
        self.checkpoints = Checkpointer(config, controller_id, clock=clock)
        # Schema distribution (config `schemas`): see controller/schemas/distributor.py.
        self.schemas = SchemaDistributor(config=config.schemas, metrics=metrics.registry) if config.schemas else None
        self._heartbeats: HeartbeatJob | None = None  # the leader's, with heartbeats.interval_s
        self._zk = zk
        self._layout = layout
        self.acl_sync: AclSyncJob | None = None  # the leader's, with acl_sync_interval_s and a route's sync_acls
        # GET /translate, on any controller: its own clients (the checkpoint job's are not thread-safe).
        self._translator: OffsetTranslator | None = None
        self._translator_lock = threading.Lock()
        self._controller_id = controller_id

    def start(self) -> None:
        """Schedules this lead's periodic jobs."""
        config = self.config.controller
        self._every("observe", self._topics.follow_sources, config.observer_interval_s, "observer", datetime.now())
        self._every("lag", self.sample_offsets, config.lag_interval_s, "lag", datetime.now() + timedelta(seconds=1))
        if self.config.heartbeats.interval_s:
            self._heartbeats = HeartbeatJob(self.config, self._tree.effective_routes, lambda: int(time.time() * 1000))
            self._every("heartbeats", self.beat, self.config.heartbeats.interval_s, "heartbeats")
        if self.config.tree is not None:  # probes may wait seconds: their own thread
            self._tree.reset()
            self._every("tree", self._tree.check_tree, self.config.tree.probe_interval_s, "tree")
        if config.validation_interval_s and self._config_path:
            self._every("validate", self.run_spark_validation, config.validation_interval_s, "spark")
        if self.schemas is not None:
            self._every("schemas", self.schemas.run, self.schemas.config.interval_s, "schemas", datetime.now())
        if config.checkpoint_interval_s and any(r.groups for r in self.config.routes):
            self._every(
                "checkpoints",
                self.checkpoint,
                config.checkpoint_interval_s,
                "checkpoints",
                datetime.now() + timedelta(seconds=1),
            )
        if config.acl_sync_interval_s and any(r.sync_acls for r in self.config.routes):
            self.acl_sync = AclSyncJob(
                config=self.config,
                routes=self._tree.effective_routes,
                topics=self.mirrored_topics,
                zk=self._zk,
                layout=self._layout,
                commit=self._leadership.commit,
                clock=self._clock,
                failures=self._metrics.acl_sync_failures,
            )
            self._every(
                "acls", self.sync_acls, config.acl_sync_interval_s, "acls", datetime.now() + timedelta(seconds=1)
            )

    def stop(self) -> None:
        """Removes every scheduled job (the reconciler's too) and closes the heartbeat and ACL sync clients."""
        for job in self._scheduler.get_jobs():
            with contextlib.suppress(Exception):  # a job may have ended meanwhile (APScheduler's own error type)
                job.remove()
        if self._heartbeats is not None:
            with contextlib.suppress(Exception):
                self._heartbeats.close()
            self._heartbeats = None
        if self.acl_sync is not None:
            self.acl_sync.close()
            self.acl_sync = None

    def close(self) -> None:
        if self.schemas is not None:
            self.schemas.close()
        with self._translator_lock:
            if self._translator is not None:
                self._translator.close()
                self._translator = None

    def translate_offset(
        self, route: str | None, topic: str, partition: int, offset: int, reverse: bool = False
    ) -> OffsetTranslation:
        """One consumer position translated (:mod:`controller.groups.translate`); any controller answers."""
        with self._translator_lock:
            if self._translator is None:
                self._translator = OffsetTranslator(self.config, f"{self._controller_id}-translate")
            return self._translator.translate_offset(route, topic, partition, offset, reverse)

    def _every(
        self, job_id: str, job: Callable[[], Any], seconds: float, executor: str, first: datetime | None = None
    ) -> None:
        kwargs: dict[str, Any] = {} if first is None else {"next_run_time": first}
        self._scheduler.add_job(
            self._run_guarded,
            "interval",
            args=[job],
            id=job_id,
            seconds=seconds,
            replace_existing=True,
            executor=executor,
            **kwargs,
        )

    def _run_guarded(self, job: Callable[[], Any]) -> None:
        """Runs a periodic leader job; a failure is logged and the next run tries again."""
        if not self._leadership.is_leader():
            return
        try:
            job()
        except NotLeader as exc:
            log.warning("%s", exc)
            self._leadership.lose_lead()
        except (ControllerError, KazooException) as exc:
            log.warning("%s failed (next run retries): %s", getattr(job, "__name__", job), exc)

    # -- ACL sync (controller/jobs/acl_sync.py) ------------------------------------------------------

    def sync_acls(self) -> None:
        """The leader's ACL sync job."""
        job = self.acl_sync
        if job is not None:
            job.run()

    def mirrored_topics(self) -> dict[str, set[str]]:
        """Route name -> the source topics of its ideal state."""
        out: dict[str, set[str]] = {}
        for state in self._reads.list_topics():
            out.setdefault(state.route, set()).add(state.topic)
        return out

    # -- lag and progress -----------------------------------------------------------------------

    def sample_offsets(self) -> None:
        """The leader's lag job: feeds /noprogress and the lag metrics."""
        samples = self._reads.offsets()
        self._topics.keep_source_ends(samples)  # an unplanned failover's RPO, with the source gone
        self.progress.update(samples, self._clock())
        self._metrics.lag.clear()
        for key, sample in samples.items():
            self._metrics.lag.labels(key.route, key.topic, str(key.partition)).set(sample.lag)
        stalled = self.progress.stalled(self._clock())
        self._metrics.stalled.set(len(stalled))
        self._metrics.set_noprogress(stalled)

    def noprogress(self) -> NoProgress:
        self._leadership.require_leader()  # only the leader samples; the REST layer forwards to it
        return self.progress.report(self._clock())

    # -- the Spark validation -------------------------------------------------------------------

    def run_spark_validation(self) -> None:
        """The leader's ``validate`` job: ``ferry validate --store`` in a process of its own (a JVM)."""
        assert self._config_path is not None
        command = [sys.executable, "-m", "ferry.cli", "validate", "--config", self._config_path, "--store", "--json"]
        timeout = self.config.controller.validation_timeout_s
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            log.warning("the Spark validation took longer than %.0fs; stopped", timeout)
            return
        if done.returncode not in (0, 1):  # 1: it ran and found problems
            log.warning("the Spark validation failed (exit %d): %s", done.returncode, done.stderr.decode()[-500:])
        stored = self._reads.spark_validation()
        if stored is not None:
            self._metrics.validation_problems.set(len(stored.get("problems", [])))

    # -- checkpoints (controller/groups/checkpoints.py) --------------------------------------------------

    def checkpoint(self) -> None:
        """The leader's checkpoint job."""
        self.checkpoints.run()
        self.publish_checkpoint_ages()

    def publish_checkpoint_ages(self) -> None:
        for (route, group), age in self.checkpoints.ages().items():
            self._metrics.checkpoint_age.labels(route, group).set(age)

    def groups(self, group: str | None = None) -> GroupCheckpoints:
        """The leader's latest checkpoints: every group's, or one group's (NotFound when it has none)."""
        return GroupCheckpoints(self.checkpoints.latest(group), self.checkpoints.ages())

    # -- heartbeats (common/core/heartbeat.py) ---------------------------------------------------------

    def beat(self) -> None:
        """The leader's heartbeat job: write, read, and publish the figures as metrics."""
        job = self._heartbeats
        if job is None:
            return
        job.tick()
        view = self.heartbeats()
        metrics = self._metrics
        for row in view.end_to_end:
            metrics.beat_latency.labels(row.origin, row.cluster, str(row.hops)).set(row.latency_s)
            metrics.beat_age.labels(row.origin, row.cluster).set(row.since_last_s)
        for name, latency in view.routes.items():
            if latency is not None:
                metrics.route_latency.labels(name).set(latency.latency_s)
                metrics.route_age.labels(name).set(latency.since_last_s)

    def heartbeats(self) -> HeartbeatView:
        """Per route and end to end: the latest heartbeat latency and the time since one arrived (REST)."""
        if not self.config.heartbeats.interval_s:
            raise NotFound("heartbeats are off (heartbeats.interval_s: 0)")
        job = self._heartbeats
        if job is None or not self._leadership.is_leader():
            raise NotLeader("only the leader reads heartbeats; ask it (GET /health names it)")
        routes = [(r.name, r.source, r.destination) for r in self._tree.effective_routes()]
        return job.book.view(int(time.time() * 1000), routes)

    # -- schema distribution --------------------------------------------------------------------

    def _schema_distributor(self) -> SchemaDistributor:
        if self.schemas is None:
            raise NotFound("schema distribution is off: the config has no `schemas` section")
        return self.schemas

    def schema_status(self) -> SchemaStatus:
        """The last distribution pass's report (the leader's; a read-only pass when none ran yet)."""
        distributor = self._schema_distributor()
        self._leadership.require_leader()
        return distributor.status()

    def schema_sync(self) -> SchemaReport:
        """A distribution pass now; its report."""
        distributor = self._schema_distributor()
        self._leadership.require_leader()
        return distributor.run()
