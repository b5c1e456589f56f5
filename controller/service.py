"""A Ferry controller: one of several; the elected leader keeps the ideal state and the assignments.

States::

    STANDBY -> LEADING   won the kazoo Election: creates the ephemeral leader node, watches workers,
                         reconciles
    LEADING -> STANDBY   lost the lead (session expired, or a fenced write found its election node
                         gone): stops writing at once, campaigns again
    any     -> STOPPED   :meth:`Controller.stop`

Level-triggered, from a model: at takeover the leader reads Ferry's state once (pipelined) into
a :class:`controller.leader_state.LeaderState`. ZooKeeper watch callbacks (all on kazoo's one
event thread) only record what they saw (the newest live set, each worker's newest status bytes)
and *schedule* the APScheduler job ``reconcile``; the job feeds what was recorded to the model,
which plans only what those changes touched (deciding exactly as :func:`controller.planner.plan`),
and writes what differs in fenced transactions, stamping changed assignments with a new
generation. The leader's own writes (REST, observer) go to the model once ZooKeeper took them; a
failed write drops the model and the next reconcile reads everything again. REST reads on the
leader answer from the model; a standby reads ZooKeeper.

Jobs, on separate executors so that none waits behind another: ``reconcile`` (now, coalesced),
``rebalance`` (``rebalance_delay_s`` after the last membership change, debounced),
``failover-<worker>`` (when a departed worker's retention ends) and ``resync`` (every few seconds,
a safety net for a trigger that arrived mid-run) share the ``reconcile`` thread; ``observe``,
``lag`` and ``validate`` have a thread each. No job has a misfire grace limit (a late run runs,
coalesced); every run, failure and skip is counted in ``ferry_controller_job_*`` metrics, and
APScheduler's own warnings stay visible.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from functools import partial
from types import MappingProxyType
from typing import Any

from apscheduler.events import (
    EVENT_JOB_ERROR,
    EVENT_JOB_EXECUTED,
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobEvent,
    JobExecutionEvent,
)
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.recipe.election import Election
from kazoo.recipe.watchers import ChildrenWatch
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from common import tree
from common.config import FerryConfig, RouteConfig
from common.diff import compare, summarize
from common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    TopicKey,
    WorkerInfo,
    WorkerStatus,
    decode,
    encode,
    topic_name_problem,
)
from common.zk_layout import ZkLayout, make_client
from controller import observer
from controller.checkpoints import Checkpointer, translations_json
from controller.errors import BadRequest, Conflict, ControllerError, NotFound, NotLeader, Unavailable
from controller.heartbeats import HeartbeatJob
from controller.kafka_meta import ClusterMetadata
from controller.leader_state import Changes, LeaderState, writes
from controller.progress import OffsetSample, ProgressTracker
from controller.schema_distributor import SchemaDistributor
from controller.store import Op, Store

log = logging.getLogger(__name__)

STANDBY, LEADING, STOPPED = "STANDBY", "LEADING", "STOPPED"
RESYNC_INTERVAL_S = 5.0
RETRY_AFTER_FAILURE_S = 1.0
MAX_PARSED_KEYS = 2_000_000

# (cluster name, topic) -> partition count at that cluster, or None when the topic does not exist.
PartitionCounter = Callable[[str, str], "int | None"]


class Controller:
    """See the module docstring for states and jobs."""

    def __init__(
        self,
        config: FerryConfig,
        controller_id: str,
        rest_url: str,
        zk: KazooClient | None = None,
        partition_counter: PartitionCounter | None = None,
        clock: Callable[[], float] = time.time,
        kafka: ClusterMetadata | None = None,
        config_path: str | None = None,
    ) -> None:
        self.config = config
        self.controller_id = controller_id
        self.rest_url = rest_url
        self.layout = ZkLayout(config.zookeeper.root)
        self._zk = zk or make_client(config.zookeeper)
        self._owns_zk = zk is None
        self.store = Store(self._zk, self.layout)
        self.kafka = kafka or ClusterMetadata(config.clusters)
        self._config_path = config_path  # for the Spark validation, run as `ferry validate --store`
        self._count_partitions = partition_counter or self.kafka.partition_count
        self.progress = ProgressTracker(config.controller.noprogress_after_s)
        self.registry = CollectorRegistry()
        self._leader_gauge = Gauge("ferry_controller_leader", "1 while this controller leads", registry=self.registry)
        self._partitions_gauge = Gauge("ferry_controller_partitions", "Mirrored partitions by reported state",
                                       ["state"], registry=self.registry)
        self._lag_gauge = Gauge("ferry_controller_partition_lag", "Log-end minus committed offset at the source",
                                ["route", "topic", "partition"], registry=self.registry)
        self._validation_gauge = Gauge("ferry_controller_validation_problems",
                                       "Problems found by the last Spark validation", registry=self.registry)
        self._stalled_gauge = Gauge("ferry_controller_noprogress_partitions",
                                    "Lagging partitions whose committed offset has not moved", registry=self.registry)
        # Schema distribution (config `schemas`): a leader job of its own, see schema_distributor.
        self.schemas = SchemaDistributor(config.schemas, self.registry) if config.schemas else None
        self._job_runs = Counter("ferry_controller_job_runs", "Runs of the leader's jobs", ["job"], registry=self.registry)
        self._job_failures = Counter("ferry_controller_job_failures", "Runs of the leader's jobs that raised",
                                     ["job"], registry=self.registry)
        self._job_skips = Counter("ferry_controller_job_skips",
                                  "Runs APScheduler skipped (missed their time, or too many instances)",
                                  ["job", "why"], registry=self.registry)
        self._reconcile_seconds = Histogram(
            "ferry_controller_reconcile_seconds", "Time of one reconcile (plan and writes)", registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
        self._plan_seconds = Histogram(
            "ferry_controller_plan_seconds", "Time of one reconcile's planning alone", registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0))
        self._watch_reads = 0  # data the watches brought (each a read at the server)
        zk_counters = (
            ("ferry_controller_zk_reads", "ZooKeeper reads by this controller (watch reads included)",
             lambda: self.store.reads + self._watch_reads),
            ("ferry_controller_zk_writes", "ZooKeeper write ops committed by this controller", lambda: self.store.writes),
            ("ferry_controller_zk_transactions", "ZooKeeper transactions by this controller",
             lambda: self.store.transactions),
            ("ferry_controller_zk_max_transaction_bytes", "The biggest transaction written, in bytes",
             lambda: self.store.max_transaction_bytes),
            ("ferry_controller_zk_max_node_bytes", "The biggest node written, in bytes", lambda: self.store.max_node_bytes),
        )
        for name, text, read in zk_counters:
            Gauge(name, text, registry=self.registry).set_function(read)
        self._checkpoint_age = Gauge("ferry_controller_checkpoint_age_seconds",
                                     "Seconds since a consumer group's offsets were last checkpointed",
                                     ["route", "group"], registry=self.registry)
        self.checkpoints = Checkpointer(config, controller_id, clock=clock)
        self._clock = clock
        self.state = STANDBY
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._lead_lost = threading.Event()
        self._epoch = 0
        self._fence: str | None = None
        self._election: Election | None = None
        self._thread: threading.Thread | None = None
        self._departed_at: dict[str, float] = {}
        self._live_seen: set[str] | None = None
        self._state_watched: set[str] = set()
        self._dirty = False
        # The leader's model (None: read it at the next reconcile) and what the watches saw since.
        self._model: LeaderState | None = None
        self._seen_lock = threading.Lock()
        self._seen_live: set[str] | None = None
        self._seen_statuses: dict[str, bytes | None] = {}
        self._reconcile_queued = False
        self._ideal_published: Mapping[TopicKey, IdealState] | None = None
        # Partition keys parsed from the workers' statuses (a status repeats its keys at every report).
        self._parsed_keys: dict[str, PartitionKey] = {}
        self._ensured_paths: set[str] = set()  # folders created (or seen) during this lead
        self._unreachable_since: dict[str, float] = {}  # tree leaf -> first seen unreachable (leader only)
        self._heartbeats: HeartbeatJob | None = None  # the leader's, with heartbeats.interval_s
        self._beat_latency = Gauge("ferry_heartbeat_latency_seconds",
                                   "Latest heartbeat's travel time from its origin to this cluster",
                                   ["origin", "cluster", "hops"], registry=self.registry)
        self._beat_age = Gauge("ferry_heartbeat_since_last_seconds",
                               "Time since the last heartbeat from origin arrived on cluster",
                               ["origin", "cluster"], registry=self.registry)
        self._route_latency = Gauge("ferry_route_heartbeat_latency_seconds",
                                    "Latest one-hop heartbeat's travel time over the route", ["route"],
                                    registry=self.registry)
        self._route_age = Gauge("ferry_route_heartbeat_since_last_seconds",
                                "Time since the last one-hop heartbeat over the route arrived", ["route"],
                                registry=self.registry)
        self._scheduler = BackgroundScheduler(
            # Reconciliation (with rebalance, failover and resync) has one thread; the observer,
            # the lag sampler, the Spark validation, the tree probes and the heartbeats each have
            # their own, so a long reconcile never starves them, and they never delay a failover.
            executors={"default": ThreadPoolExecutor(1), "timer": ThreadPoolExecutor(1), "observer": ThreadPoolExecutor(1),
                       "lag": ThreadPoolExecutor(1), "spark": ThreadPoolExecutor(1), "tree": ThreadPoolExecutor(1),
                       "heartbeats": ThreadPoolExecutor(1), "checkpoints": ThreadPoolExecutor(1),
                       "schemas": ThreadPoolExecutor(1)},  # registry I/O never delays a failover
            # A late run still runs (no misfire grace limit); missed runs coalesce into one.
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._scheduler.add_listener(self._on_job_event,
                                     EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._owns_zk:
            self._zk.start(timeout=self.config.zookeeper.retry_deadline_s)
        self._zk.add_listener(self._on_session_state)
        self.store.ensure_layout()
        self._scheduler.start()
        self._thread = threading.Thread(target=self._campaign, name="controller-election", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._lead_lost.set()
        if self._election is not None:
            with contextlib.suppress(Exception):
                self._election.cancel()
        if self._thread is not None:
            self._thread.join(10)
        with contextlib.suppress(Exception):
            self._scheduler.shutdown(wait=False)
        self.kafka.close()
        if self.schemas is not None:
            self.schemas.close()
        if self._owns_zk:
            self._zk.stop()
            self._zk.close()
        self.state = STOPPED

    def _on_job_event(self, event: JobEvent) -> None:
        """Counts every run, failure and skip of a job (the scheduler's thread; never raises)."""
        job = _job_name(event.job_id)
        if event.code == EVENT_JOB_EXECUTED:
            self._job_runs.labels(job).inc()
        elif event.code == EVENT_JOB_ERROR:
            self._job_runs.labels(job).inc()
            self._job_failures.labels(job).inc()
            exception = event.exception if isinstance(event, JobExecutionEvent) else None
            log.error("job %s failed: %r", event.job_id, exception)
        else:
            # APScheduler logs each skip as a warning itself (left visible); this counts them.
            why = "missed" if event.code == EVENT_JOB_MISSED else "max_instances"
            self._job_skips.labels(job, why).inc()

    def job_counts(self) -> dict[str, dict[str, int]]:
        """Job -> {"runs", "failures", "skips"}, from the metrics (for tests and the bench)."""
        result: dict[str, dict[str, int]] = {}
        for metric, field in ((self._job_runs, "runs"), (self._job_failures, "failures"), (self._job_skips, "skips")):
            for family in metric.collect():
                for sample in family.samples:
                    if sample.name.endswith("_total"):
                        entry = result.setdefault(sample.labels["job"], {"runs": 0, "failures": 0, "skips": 0})
                        entry[field] += int(sample.value)
        return result

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
                self._election = Election(self._zk, self.layout.election, identifier=self.controller_id)
                self._election.run(self._lead)
            except Exception as exc:
                if not self._stopping.is_set():
                    log.warning("election interrupted (%s); campaigning again", exc)
                    time.sleep(1)

    def _lead(self) -> None:
        """Runs while this controller holds the lead; returning gives it up."""
        assert self._election is not None
        self._lead_lost.clear()
        if self._stopping.is_set():
            return
        self._fence = f"{self.layout.election}/{self._election.lock.node}"
        self._epoch += 1
        epoch = self._epoch
        try:
            self._publish_leader()
        except (KazooException, NotLeader) as exc:
            log.warning("could not publish the leader node: %s", exc)
            return
        self._departed_at = {}
        self._live_seen = None
        self._model = None
        with self._seen_lock:
            self._seen_live, self._seen_statuses = None, {}
        # Workers whose status node has a DataWatch in this epoch (touched only on kazoo's
        # event thread once the watches below exist).
        self._state_watched = set()
        self._reconcile_queued = False
        self._ensured_paths = set()
        self.state = LEADING
        log.info("controller %s leads (fence %s)", self.controller_id, self._fence)
        try:
            ChildrenWatch(self._zk, self.layout.live_workers, lambda children: self._on_live(epoch, children))
            ChildrenWatch(self._zk, self.layout.worker_states, lambda children: self._on_states(epoch, children))
            # The safety net only queues a reconcile (on a thread of its own, so it never piles up).
            self._scheduler.add_job(self.request_reconcile, "interval", seconds=RESYNC_INTERVAL_S, id="resync",
                                    replace_existing=True, executor="timer")
            controller_config = self.config.controller
            self._scheduler.add_job(self._run_guarded, "interval", args=[self.observe], id="observe",
                                    seconds=controller_config.observer_interval_s, replace_existing=True,
                                    next_run_time=datetime.now(), executor="observer")
            self._scheduler.add_job(self._run_guarded, "interval", args=[self.sample_offsets], id="lag",
                                    seconds=controller_config.lag_interval_s, replace_existing=True,
                                    next_run_time=datetime.now() + timedelta(seconds=1), executor="lag")
            if self.config.heartbeats.interval_s:
                self._heartbeats = HeartbeatJob(self.config, self._effective_routes, lambda: int(time.time() * 1000))
                self._scheduler.add_job(self._run_guarded, "interval", args=[self.beat], id="heartbeats",
                                        seconds=self.config.heartbeats.interval_s, replace_existing=True,
                                        executor="heartbeats")
            if self.config.tree is not None:  # probes may wait seconds: their own thread
                self._unreachable_since = {}
                self._scheduler.add_job(self._run_guarded, "interval", args=[self.check_tree], id="tree",
                                        seconds=self.config.tree.probe_interval_s, replace_existing=True,
                                        executor="tree")
            if controller_config.validation_interval_s and self._config_path:
                self._scheduler.add_job(self._run_guarded, "interval", args=[self.run_spark_validation], id="validate",
                                        seconds=controller_config.validation_interval_s, replace_existing=True,
                                        executor="spark")
            if self.schemas is not None:
                self._scheduler.add_job(self._run_guarded, "interval", args=[self.schemas.run], id="schemas",
                                        seconds=self.schemas.config.interval_s,
                                        replace_existing=True, executor="schemas", next_run_time=datetime.now())
            if controller_config.checkpoint_interval_s and any(r.groups for r in self.config.routes):
                self._scheduler.add_job(self._run_guarded, "interval", args=[self.checkpoint], id="checkpoints",
                                        seconds=controller_config.checkpoint_interval_s, replace_existing=True,
                                        executor="checkpoints", next_run_time=datetime.now() + timedelta(seconds=1))
            self._leader_gauge.set(1)
            self.request_reconcile()
            while not self._lead_lost.wait(0.5):
                if self._stopping.is_set():
                    break
        finally:
            self.state = STANDBY
            self._leader_gauge.set(0)
            self._epoch += 1
            self._model = None
            for job in self._scheduler.get_jobs():
                with contextlib.suppress(Exception):
                    job.remove()
            if self._heartbeats is not None:
                with contextlib.suppress(Exception):
                    self._heartbeats.close()
                self._heartbeats = None
            if self._zk.connected:
                with contextlib.suppress(KazooException):
                    leader = self.store.leader()
                    if leader and leader.get("id") == self.controller_id:
                        self._zk.delete(self.layout.leader)
            log.info("controller %s no longer leads", self.controller_id)

    def _publish_leader(self) -> None:
        assert self._fence is not None
        payload = encode({"id": self.controller_id, "rest_url": self.rest_url})
        try:
            self._zk.create(self.layout.leader, payload, ephemeral=True)
        except NodeExistsError:
            # A former leader's node from a session that has not expired yet: ours now.
            transaction = self._zk.transaction()
            transaction.check(self._fence, 0)
            transaction.delete(self.layout.leader)
            transaction.create(self.layout.leader, payload, ephemeral=True)
            results = transaction.commit()
            if any(isinstance(r, Exception) for r in results):
                raise NotLeader(f"could not take over the leader node: {results}") from None

    # -- watches: schedule only -------------------------------------------------------------

    def _on_live(self, epoch: int, children: list[str]) -> bool:
        if epoch != self._epoch:
            return False  # stops this watch: it belongs to an earlier lead
        live = set(children)
        if self._live_seen is not None and live != self._live_seen:
            joined, left = sorted(live - self._live_seen), sorted(self._live_seen - live)
            log.info("workers joined %s left %s; rebalance in %.0fs", joined, left, self.config.controller.rebalance_delay_s)
            self._schedule("rebalance", self.config.controller.rebalance_delay_s, rebalance=True)
        self._live_seen = live
        with self._seen_lock:
            self._seen_live = live
            self._watch_reads += 1
        self.request_reconcile()
        return True

    def _on_states(self, epoch: int, children: list[str]) -> bool:
        """One follower per worker status node per lead: a worker already followed in this
        epoch gets no second one (each would fire on every later change of that node)."""
        if epoch != self._epoch:
            return False
        with self._seen_lock:
            self._watch_reads += 1
        for worker in children:
            if worker not in self._state_watched:
                self._state_watched.add(worker)
                self._follow_status(epoch, worker)
        self.request_reconcile()
        return True

    def _follow_status(self, epoch: int, worker: str) -> None:
        """Follows one worker's status node for this lead, pipelined.

        A kazoo ``DataWatch`` reads the node again on kazoo's one event thread and waits for the
        answer, so 2,000 workers reporting at once are 2,000 round trips one after another.
        Here a notification only sends ``get_async`` (with the next watch) and the answer is
        recorded when it arrives: the reads are in flight together. A deleted node is recorded
        (None) and followed with ``exists_async`` until it comes back. A read that failed (the
        connection dropped) is sent again a second later, while this lead lasts; a lost session
        ends the lead, and the next lead reads everything anyway.
        """
        path = self.layout.worker_state(worker)

        def on_event(event: Any) -> None:  # kazoo's event thread: only send the next read
            if epoch == self._epoch:
                fetch()

        def fetch() -> None:
            if epoch != self._epoch:
                return
            try:
                self._zk.get_async(path, watch=on_event).rawlink(on_data)
            except KazooException:
                threading.Timer(1.0, fetch).start()

        def on_data(result: Any) -> None:
            if epoch != self._epoch:
                return
            try:
                data, _ = result.get()
            except NoNodeError:
                data = None
                self._zk.exists_async(path, watch=on_event).rawlink(on_exists)
            except KazooException:
                threading.Timer(1.0, fetch).start()
                return
            with self._seen_lock:
                self._seen_statuses[worker] = data  # None: the node is gone
                self._watch_reads += 1
            self.request_reconcile()

        def on_exists(result: Any) -> None:
            with contextlib.suppress(KazooException):
                if epoch == self._epoch and result.get() is not None:
                    fetch()  # it came back between the read and the watch

        fetch()

    def request_reconcile(self) -> None:
        """Marks the state dirty and queues one ``reconcile`` run unless one is queued already.

        At most one run waits while another runs: a burst of triggers costs one run, and no
        trigger is ever refused by APScheduler (a refused run would count as a skip).
        """
        self._dirty = True
        with self._seen_lock:
            if self._reconcile_queued:
                return
            self._reconcile_queued = True
        if not self._schedule("reconcile", 0.0, queued=True):
            with self._seen_lock:
                self._reconcile_queued = False

    def _schedule(self, job_id: str, delay_s: float, rebalance: bool = False, queued: bool = False) -> bool:
        """(Re)schedules the one-shot job ``job_id``; False when not leading or the scheduler stopped."""
        if self.state != LEADING:
            return False
        try:
            self._scheduler.add_job(
                self._run_reconcile, "date", run_date=datetime.now() + timedelta(seconds=delay_s), id=job_id,
                replace_existing=True, misfire_grace_time=None, kwargs={"rebalance": rebalance, "queued": queued},
                # One run may wait for the one reconcile thread while another runs.
                max_instances=2,
            )
        except Exception:  # the scheduler is shut down while stopping
            return False
        return True

    # -- reconciliation ---------------------------------------------------------------------

    def _run_reconcile(self, rebalance: bool = False, queued: bool = False) -> None:
        """The scheduler's job: reconcile until no trigger arrived meanwhile."""
        if queued:
            with self._seen_lock:
                self._reconcile_queued = False  # a trigger from now on queues the next run
        self._dirty = True
        while self._dirty and self.state == LEADING:
            self._dirty = False
            try:
                self.reconcile(rebalance=rebalance)
            except NotLeader as exc:
                log.warning("%s", exc)
                self._lead_lost.set()
                return
            except (ControllerError, KazooException) as exc:
                log.warning("reconcile failed (retrying in %.0fs): %s", RETRY_AFTER_FAILURE_S, exc)
                self._schedule("retry", RETRY_AFTER_FAILURE_S, rebalance=rebalance)
                return
            rebalance = False

    def reconcile(self, rebalance: bool = False) -> Changes:
        """Feeds the model what the watches saw, plans what that touched, writes what differs (fenced)."""
        with self._lock:
            self._require_leader()
            started = time.perf_counter()
            model = self._leader_state()
            now = self._clock()
            plan_started = time.perf_counter()
            changes = model.plan(now, self.config.controller.failover_delay_s, rebalance=rebalance)
            self._plan_seconds.observe(time.perf_counter() - plan_started)
            generation = model.generation + 1
            ops = self._changes(model, changes, generation)
            if ops:
                try:
                    self._commit(ops)
                except BaseException:
                    self._model = None  # some transactions may have committed: read everything again
                    raise
            model.applied(changes, generation)
            if changes.ideal:
                self._publish_ideal()
            self._departed_at = dict(model.departed_at)
            for state, count in model.state_counts.items():
                self._partitions_gauge.labels(state).set(count)
            for worker, until in changes.retained_until.items():
                self._schedule(f"failover-{worker}", max(0.0, until - now) + 0.05)
            if changes.moved:
                log.info("reconciled: %d partitions moved%s", changes.moved, " (rebalance)" if rebalance else "")
            self._reconcile_seconds.observe(time.perf_counter() - started)
            return changes

    def _leader_state(self) -> LeaderState:
        """The model, read from ZooKeeper when there is none, with what the watches saw since."""
        if self._model is None:
            with self._seen_lock:
                self._seen_live, self._seen_statuses = None, {}
            started = time.perf_counter()
            # The views are the leader's own function of the statuses: rewritten at the first
            # reconcile rather than read (half the nodes of a takeover read).
            self._model = LeaderState(self.store.snapshot(read_views=False), self._departed_at)
            self._publish_ideal()
            log.info("read the state: %d topics, %d workers in %.2fs", len(self._model.ideal),
                     len(self._model.live), time.perf_counter() - started)
        model = self._model
        with self._seen_lock:
            live, statuses = self._seen_live, self._seen_statuses
            self._seen_live, self._seen_statuses = None, {}
        if live is not None and live != set(model.live):
            infos = {w: info for w, info in model.live.items() if w in live}
            new = self.store.data_many(self.layout.live_worker(w) for w in live - set(infos))
            for worker in live - set(infos):
                got = new.get(self.layout.live_worker(worker))
                if got is not None:
                    infos[worker] = WorkerInfo.from_bytes(got[0]) or WorkerInfo(worker, "?", 0)
            model.set_live(infos)
        if len(self._parsed_keys) > MAX_PARSED_KEYS:
            self._parsed_keys = {}  # topics came and went: start over rather than grow forever
        for worker, data in statuses.items():
            model.set_status(worker, None if data is None else WorkerStatus.from_bytes(data, self._parsed_keys))
        return model

    def _changes(self, model: LeaderState, changes: Changes, generation: int) -> list[Op]:
        """The writes of ``changes`` in a safe order (:func:`controller.leader_state.writes`)."""
        for key in changes.views:
            self._ensure_path(self.layout.route_external(key.route))
        return writes(self.layout, model, changes, generation)

    def _commit(self, ops: list[Op]) -> None:
        if self._fence is None or self.state != LEADING:
            raise NotLeader(f"controller {self.controller_id} does not lead")
        try:
            self.store.commit(self._fence, ops)
        except BaseException:
            self._model = None  # some transactions may have committed: the next reconcile reads everything
            raise

    def _ensure_path(self, path: str) -> None:
        """``ensure_path`` once per lead: a route's folders are never deleted while it leads."""
        if path not in self._ensured_paths:
            self._zk.ensure_path(path)
            self._ensured_paths.add(path)

    def _put_topic(self, key: TopicKey, state: IdealState | None, version: int = 0) -> None:
        """Tells the model about a topic node this controller just wrote (no model: read at the next reconcile)."""
        if self._model is not None:
            self._model.put_topic(key, state, version)

    # -- reads (any controller) -------------------------------------------------------------

    def is_leader(self) -> bool:
        return self.state == LEADING

    def leader(self) -> dict[str, str] | None:
        try:
            return self.store.leader()
        except KazooException:
            return None

    def health(self) -> dict[str, Any]:
        leader = self.leader()
        return {
            "status": "ok" if self._zk.connected else "zookeeper unreachable",
            "id": self.controller_id,
            "state": self.state,
            "leader": self.is_leader(),
            "leaderId": leader.get("id") if leader else None,
            "leaderUrl": leader.get("rest_url") if leader else None,
        }

    def _routes(self, route: str | None) -> list[RouteConfig]:
        if route is None:
            return list(self.config.routes)
        for candidate in self.config.routes:
            if candidate.name == route:
                return [candidate]
        raise BadRequest(f"unknown route {route!r}; configured routes: {[r.name for r in self.config.routes]}")

    def _read(self, what: Callable[[], Any]) -> Any:
        try:
            return what()
        except KazooException as exc:
            raise Unavailable(f"ZooKeeper cannot be reached: {type(exc).__name__}") from None

    def _leader_model(self) -> LeaderState | None:
        """The model when this controller leads and has read it (call with the lock held), else None."""
        return self._model if self.state == LEADING else None

    def _ideal_state(self, route: str, topic: str) -> IdealState | None:
        with self._lock:
            model = self._leader_model()
            if model is not None:
                return model.ideal.get(TopicKey(route, topic))
        state: IdealState | None = self._read(partial(self.store.ideal_state, route, topic))
        return state

    def _ideal_version(self, key: TopicKey) -> int:
        model = self._leader_model()
        if model is not None and key in model.ideal_versions:
            return model.ideal_versions[key]
        got = self._read(partial(self.store.data, self.layout.topic(key.route, key.topic)))
        return -1 if got is None else int(got[1])

    def _ideal_states(self) -> Mapping[TopicKey, IdealState]:
        """Every ideal state; on the leader the model's as of its last change, without waiting for
        the lock (the observer, the lag job and GET /topics never wait behind a long reconcile)."""
        published = self._ideal_published
        if published is not None and self.state == LEADING and self._model is not None:
            return published
        ideal, _ = self._read(self.store.ideal_states)
        return dict(ideal)

    def _publish_ideal(self) -> None:
        """A fresh read-only copy of the model's ideal states (call with the lock, after each change)."""
        self._ideal_published = None if self._model is None else MappingProxyType(dict(self._model.ideal))

    def _external_view(self, route: str, topic: str) -> ExternalView | None:
        with self._lock:
            model = self._leader_model()
            if model is not None:
                return model.external.get(TopicKey(route, topic))
        stored: ExternalView | None = self._read(partial(self.store.external_view, route, topic))
        return stored

    def list_topics(self) -> list[dict[str, Any]]:
        ideal = self._ideal_states()
        return [
            {"topic": key.topic, "route": key.route, "partitions": state.partitions}
            for key, state in sorted(ideal.items())
        ]

    def topic_view(self, topic: str, route: str | None = None) -> dict[str, Any]:
        routes = self._routes(route)
        ideal: dict[str, IdealState] = {}
        external: dict[str, ExternalView] = {}
        for r in routes:
            state = self._ideal_state(r.name, topic)
            if state is not None:
                ideal[r.name] = state
                external[r.name] = self._external_view(r.name, topic) or ExternalView(r.name, topic)
        if not ideal:
            raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
        by_name = {r.name: r for r in routes}
        per_route = {name: {**_route_view(ideal[name], external[name]),
                            "destination": by_name[name].destination,
                            "destinationTopic": by_name[name].destination_topic(topic)} for name in ideal}
        if len(per_route) == 1:
            view = dict(next(iter(per_route.values())))
        else:  # several routes: flat maps keyed "<route>/<partition>"
            view = {"idealState": {}, "externalView": {}, "workers": {}}
            for name, one in per_route.items():
                for p, w in one["idealState"].items():
                    view["idealState"][f"{name}/{p}"] = w
                for p, entry in one["externalView"].items():
                    view["externalView"][f"{name}/{p}"] = entry
                for w, parts in one["workers"].items():
                    view["workers"].setdefault(w, []).extend(f"{name}/{p}" for p in parts)
        return {"topic": topic, **view, "routes": per_route}

    def instances(self) -> dict[str, Any]:
        with self._lock:
            model = self._leader_model()
            if model is not None:
                live, statuses = dict(model.live), dict(model.statuses)
                holding = {w: [str(p) for p in held] for w, held in model.holding().items()}
                return _instances(live, statuses, holding)
        live = self._read(self.store.live_workers)
        statuses = self._read(self.store.statuses)
        ideal, _ = self._read(self.store.ideal_states)
        holding = {}
        for key, state in sorted(ideal.items()):
            for p, worker in sorted(state.assignment.items()):
                holding.setdefault(worker, []).append(f"{key.route}/{key.topic}/{p}")
        return _instances(live, statuses, holding)

    def validation(self) -> dict[str, Any]:
        with self._lock:
            model = self._leader_model()
            if model is not None:
                mismatches, summary = model.validation()
            else:
                ideal, _ = self._read(self.store.ideal_states)
                external = self._read(self.store.external_views)
                live = set(self._read(self.store.live_workers))
                mismatches = compare(ideal, external, live)
                summary = summarize(ideal, external)
        return {
            "ok": not mismatches,
            "summary": summary,
            "mismatches": [m.to_json() for m in mismatches],
            "spark": self.spark_validation(),  # the last `ferry validate --store`, with checkedAt
        }

    # -- writes (leader only) ---------------------------------------------------------------

    def _require_leader(self) -> None:
        if not self.is_leader():
            raise NotLeader(f"controller {self.controller_id} does not lead")

    def add_topic(self, topic: Any, num_partitions: Any = None, route: str | None = None) -> dict[str, Any]:
        """Whitelists ``topic`` on every route (or ``route``); its partitions are assigned at once."""
        self.add_topics([{"topic": topic, "numPartitions": num_partitions}], route)
        return self.topic_view(topic, route)

    def add_topics(self, topics: Any, route: str | None = None) -> dict[str, Any]:
        """Whitelists many topics (``[{"topic", "numPartitions"?}, ...]``) in one write and one reconcile.

        All or nothing: any bad, already mirrored or missing topic refuses the whole request.
        """
        if not isinstance(topics, list) or not topics:
            raise BadRequest('topics must be a non-empty list like [{"topic": "orders", "numPartitions": 8}]')
        wanted_counts: dict[str, int | None] = {}
        for item in topics:
            if not isinstance(item, dict):
                raise BadRequest(f'every entry of topics must be an object like {{"topic": "orders"}}, not {item!r}')
            topic = item.get("topic")
            _check_topic(topic)
            assert isinstance(topic, str)  # _check_topic refused anything else
            if topic in wanted_counts:
                raise BadRequest(f"topic {topic!r} is listed twice")
            wanted_counts[topic] = _check_count(item.get("numPartitions"), required=not self._checks_source)
        routes = self._routes(route)
        with self._lock:
            self._require_leader()
            for r in routes:
                for topic in wanted_counts:
                    if self._ideal_state(r.name, topic) is not None:
                        raise Conflict(f"topic {topic!r} is already mirrored on route {r.name}")
            ops, created = [], []
            for r in routes:
                removed = set(self.store.children(f"{self.layout.removed}/{r.name}"))
                self._ensure_path(self.layout.route_topics(r.name))
                for topic, count in wanted_counts.items():
                    wanted = self._mirrored_count(r, topic, count)
                    state = IdealState(r.name, topic, wanted)
                    ops.append(Op("create", self.layout.topic(r.name, topic), state.to_bytes()))
                    created.append(state)
                    if topic in removed:
                        ops.append(Op("delete", self.layout.removed_topic(r.name, topic)))
            self._commit(ops)
            for state in created:
                self._put_topic(TopicKey(state.route, state.topic), state, 0)
            self._publish_ideal()
            if len(wanted_counts) == 1:
                log.info("whitelisted topic %s on %s", next(iter(wanted_counts)), [r.name for r in routes])
            else:
                log.info("whitelisted %d topics on %s", len(wanted_counts), [r.name for r in routes])
            self.reconcile()
        return {"topics": [{"topic": s.topic, "route": s.route, "partitions": s.partitions} for s in created]}

    def _mirrored_count(self, route: RouteConfig, topic: str, count: int | None) -> int:
        """How many partitions of ``topic`` to mirror: ``count``, checked against the source when configured."""
        if not self._checks_source:
            assert count is not None  # required by add_topics then
            return count
        at_source = self._source_count(route, topic)
        wanted = count or at_source
        if wanted > at_source:
            raise BadRequest(f"numPartitions {wanted} exceeds the {at_source} partitions of {topic!r} on {route.source}")
        return wanted

    @property
    def _checks_source(self) -> bool:
        return self.config.controller.check_source_topics

    def expand_topic(self, topic: Any, num_partitions: Any, route: str | None = None) -> dict[str, Any]:
        """Raises the partition count Ferry mirrors (never lowers it); new partitions are assigned at once."""
        _check_topic(topic)
        count = _check_count(num_partitions, required=True)
        assert count is not None
        with self._lock:
            self._require_leader()
            ops = []
            grown: list[tuple[TopicKey, IdealState, int]] = []
            mirrored = False
            for r in self._routes(route):
                state = self._ideal_state(r.name, topic)
                if state is None:
                    continue
                mirrored = True
                if count < state.partitions:
                    raise BadRequest(f"topic {topic!r} has {state.partitions} partitions; Kafka cannot shrink it to {count}")
                self._mirrored_count(r, topic, count)
                if count > state.partitions:
                    expanded = IdealState(r.name, topic, count, dict(state.assignment))
                    key = TopicKey(r.name, topic)
                    version = self._ideal_version(key)
                    ops.append(Op("set", self.layout.topic(r.name, topic), expanded.to_bytes(), version))
                    grown.append((key, expanded, version + 1))
            if not mirrored:
                raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
            if ops:
                self._commit(ops)
                for key, expanded, version in grown:
                    self._put_topic(key, expanded, version)
                self._publish_ideal()
                self.reconcile()
        return self.topic_view(topic, route)

    def delete_topic(self, topic: str, route: str | None = None) -> dict[str, Any]:
        """Stops mirroring ``topic``; workers release its partitions. The destination topic stays."""
        with self._lock:
            self._require_leader()
            ops = []
            deleted = []
            for r in self._routes(route):
                if self._ideal_state(r.name, topic) is not None:
                    ops.append(Op("delete", self.layout.topic(r.name, topic)))
                    deleted.append(TopicKey(r.name, topic))
                    # Remembered, so the observer does not whitelist it again until someone POSTs it.
                    self._zk.ensure_path(f"{self.layout.removed}/{r.name}")
                    removed = self.layout.removed_topic(r.name, topic)
                    if not self._zk.exists(removed):
                        ops.append(Op("create", removed, encode({"at": self._clock()})))
            if not ops:
                raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
            self._commit(ops)
            for key in deleted:
                self._put_topic(key, None)
            self._publish_ideal()
            log.info("stopped mirroring topic %s", topic)
            self.reconcile()
        return {"topic": topic, "deleted": True}

    def rebalance_now(self) -> dict[str, Any]:
        with self._lock:
            plan = self.reconcile(rebalance=True)
        return {"rebalanced": True, "moved": plan.moved}

    # -- Kafka metadata ---------------------------------------------------------------------

    def _source_count(self, route: RouteConfig, topic: str) -> int:
        count = self._count_partitions(route.source, topic)
        if count is None:
            raise NotFound(f"topic {topic!r} does not exist on the source cluster {route.source!r}")
        return count

    # -- the observer, lag and progress (leader jobs) ------------------------------------------

    def _run_guarded(self, job: Callable[[], Any]) -> None:
        """Runs a periodic leader job; a failure is logged and the next run tries again."""
        if self.state != LEADING:
            return
        try:
            job()
        except NotLeader as exc:
            log.warning("%s", exc)
            self._lead_lost.set()
        except (ControllerError, KazooException) as exc:
            log.warning("%s failed (next run retries): %s", getattr(job, "__name__", job), exc)

    # -- the distribution tree (common/tree.py) ---------------------------------------------

    def switched_targets(self) -> tuple[dict[str, str], int | None]:
        """ZooKeeper's ``tree/targets`` (distributor -> leaf) and its version (None: no node yet)."""
        try:
            data, stat = self._zk.get(self.layout.tree_targets)
        except NoNodeError:
            return {}, None
        except KazooException as exc:
            raise Unavailable(f"ZooKeeper cannot be reached: {type(exc).__name__}") from None
        return {str(k): str(v) for k, v in (decode(data) or {}).items()}, stat.version

    def switch_target(self, distributor: str, leaf: str, why: str) -> dict[str, str]:
        """Points ``distributor`` at ``leaf`` of its subtree; workers move its partitions there."""
        if self.config.tree is None:
            raise NotFound("no distribution tree is configured")
        derived = {d.name: d for d in tree.distributors(tree.parse(self.config.tree.layout))}
        if distributor not in derived:
            raise NotFound(f"no distributor {distributor!r} (distributors: {sorted(derived)})")
        if leaf not in derived[distributor].subtree:
            raise BadRequest(f"{leaf!r} is not a leaf of {distributor}'s subtree {list(derived[distributor].subtree)}")
        for _ in range(5):  # compare-and-set: the leader's own switches and an operator's may race
            switched, version = self.switched_targets()
            updated = {**switched, distributor: leaf}
            try:
                if version is None:
                    self._zk.create(self.layout.tree_targets, encode(updated), makepath=True)
                else:
                    self._zk.set(self.layout.tree_targets, encode(updated), version=version)
            except (NodeExistsError, BadVersionError):
                continue
            except KazooException as exc:
                raise Unavailable(f"ZooKeeper cannot be reached: {type(exc).__name__}") from None
            log.warning("distributor %s now copies to %s (%s)", distributor, leaf, why)
            return updated
        raise Conflict("the tree's targets kept changing; try again")

    def tree_view(self) -> dict[str, Any]:
        """The derived distributors, their targets and state (REST ``/tree``, ``ferry tree``)."""
        if self.config.tree is None:
            raise NotFound("no distribution tree is configured")
        root = tree.parse(self.config.tree.layout)
        derived = tree.distributors(root)
        switched, _ = self.switched_targets()
        routes = {r.name: r for r in self.config.with_targets(switched)}
        unreachable = dict(self._unreachable_since) if self.state == LEADING else {}
        rows: list[dict[str, Any]] = []
        states: dict[str, str] = {}
        for d in derived:
            target = routes[d.name].destination
            state = states[d.name] = "target unreachable" if target in unreachable else "copying"
            rows.append({"name": d.name, "cluster": d.cluster, "level": d.level, "mask": tree.format_flags(d.mask),
                         "bit": tree.format_flags(d.bit), "subtree": list(d.subtree), "subtreeLayout": d.subtree_layout,
                         "target": target, "switched": d.name in switched, "state": state})
        return {"layout": root.render(), "switchAfterS": self.config.tree.switch_after_s, "distributors": rows,
                "unreachable": sorted(unreachable),
                "table": tree.table(derived, {d.name: routes[d.name].destination for d in derived}, states)}

    def check_tree(self) -> None:
        """The leader's tree job: probes every leaf; switches distributors whose target is down too long."""
        assert self.config.tree is not None
        root = tree.parse(self.config.tree.layout)
        now = self._clock()
        for leaf in root.leaves():
            if self.kafka.reachable(leaf):
                if self._unreachable_since.pop(leaf, None) is not None:
                    log.info("tree: cluster %s is reachable again", leaf)
            elif leaf not in self._unreachable_since:
                log.warning("tree: cluster %s is unreachable", leaf)
                self._unreachable_since[leaf] = now
        if not self.config.tree.switch_after_s:
            return
        switched, _ = self.switched_targets()
        targets = {r.name: r.destination for r in self.config.with_targets(switched) if r.distributor}
        decided = tree.switches(tree.distributors(root), targets, self._unreachable_since, now,
                                self.config.tree.switch_after_s)
        for name, leaf in sorted(decided.items()):
            self.switch_target(name, leaf, f"{targets[name]} unreachable for {now - self._unreachable_since[targets[name]]:.0f}s")

    # -- heartbeats (common/heartbeat.py) ----------------------------------------------------

    def _effective_routes(self) -> list[RouteConfig]:
        switched = self.switched_targets()[0] if self.config.tree is not None else {}
        return self.config.with_targets(switched)

    def beat(self) -> None:
        """The leader's heartbeat job: write, read, and publish the figures as metrics."""
        job = self._heartbeats
        if job is None:
            return
        job.tick()
        view = self.heartbeats()
        for row in view["endToEnd"]:
            self._beat_latency.labels(row["origin"], row["cluster"], str(row["hops"])).set(row["latencyS"])
            self._beat_age.labels(row["origin"], row["cluster"]).set(row["sinceLastS"])
        for name, row in view["routes"].items():
            if row["latencyS"] is not None:
                self._route_latency.labels(name).set(row["latencyS"])
                self._route_age.labels(name).set(row["sinceLastS"])

    def heartbeats(self) -> dict[str, Any]:
        """Per route and end to end: the latest heartbeat latency and the time since one arrived (REST)."""
        if not self.config.heartbeats.interval_s:
            raise NotFound("heartbeats are off (heartbeats.interval_s: 0)")
        job = self._heartbeats
        if job is None or self.state != LEADING:
            raise NotLeader("only the leader reads heartbeats; ask it (GET /health names it)")
        routes = [(r.name, r.source, r.destination) for r in self._effective_routes()]
        view: dict[str, Any] = job.book.view(int(time.time() * 1000), routes)
        return view

    def removed_topics(self) -> set[TopicKey]:
        return {
            TopicKey(route.name, topic)
            for route in self.config.routes for topic in self.store.children(f"{self.layout.removed}/{route.name}")
        }

    def observe(self) -> observer.Decisions:
        """Whitelists new matching source topics, expands grown ones, makes destination configs follow.

        One metadata request per source cluster (not one per topic), one write and one reconcile
        for everything it decided. Topics Ferry mirrors but the source does not have (e.g. a
        benchmark's topics that live only in ZooKeeper) are left alone.
        """
        mirrored_routes = {k.route for k in self._ideal_states()}
        source_topics = {
            r.name: self.kafka.topics(r.source) for r in self.config.routes if r.include or r.name in mirrored_routes
        }
        removed = self.removed_topics()
        ideal = self._ideal_states()
        decisions = observer.decide(self.config.routes, source_topics, ideal, removed)
        if not decisions.add and not decisions.expand:  # the usual case: no need to wait for the lock
            at_source = {TopicKey(route, t) for route, topics in source_topics.items() for t in topics}
            self._follow_configs(set(ideal) & at_source)
            return decisions
        with self._lock:
            self._require_leader()
            ideal = self._ideal_states()  # again, under the lock: what the writes start from
            decisions = observer.decide(self.config.routes, source_topics, ideal, removed)
            ops, written = [], []
            for key, partitions in sorted(decisions.add.items()):
                self._ensure_path(self.layout.route_topics(key.route))
                state = IdealState(key.route, key.topic, partitions)
                ops.append(Op("create", self.layout.topic(key.route, key.topic), state.to_bytes()))
                written.append((key, state, 0))
            for key, partitions in sorted(decisions.expand.items()):
                old = ideal[key]
                grown = IdealState(key.route, key.topic, partitions, dict(old.assignment))
                version = self._ideal_version(key)
                ops.append(Op("set", self.layout.topic(key.route, key.topic), grown.to_bytes(), version))
                written.append((key, grown, version + 1))
            if ops:
                self._commit(ops)
                for key, state, version in written:
                    self._put_topic(key, state, version)
                self._publish_ideal()
                log.info("observer: whitelisted %d topics %s, expanded %s", len(decisions.add),
                         sorted(map(str, decisions.add))[:20], {str(k): n for k, n in decisions.expand.items()})
                self.reconcile()
        at_source = {TopicKey(route, t) for route, topics in source_topics.items() for t in topics}
        self._follow_configs((set(ideal) | set(decisions.add)) & at_source)
        return decisions

    def _follow_configs(self, topics: set[TopicKey]) -> None:
        """Only for topics that exist at the source (the caller filters)."""
        for route in self.config.routes:
            names = sorted(k.topic for k in topics if k.route == route.name)
            if not names:
                continue
            source = self.kafka.topic_configs(route.source, names)
            renamed = {topic: route.destination_topic(topic) for topic in names}  # common.naming
            destination = self.kafka.topic_configs(route.destination, sorted(renamed.values()))
            for topic in names:
                target = renamed[topic]
                if topic not in source or target not in destination:
                    continue  # the destination topic does not exist yet: its worker creates it
                changes = observer.config_changes(source[topic], destination[target], route.config_exclude)
                if changes:
                    self.kafka.set_topic_configs(route.destination, target, changes)
                    log.info("observer: %s on %s now follows the source: %s", target, route.destination, changes)

    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[PartitionKey, OffsetSample]:
        """Committed (route's group, at the source) and log-end offsets of mirrored partitions, read now.

        Only partitions of topics the source has (one metadata request per route): a topic that
        exists only in ZooKeeper has no offsets, and asking for them would wait for timeouts.
        """
        ideal = self._ideal_states()
        if topic is not None and not any(k.topic == topic for k in ideal):
            raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
        result: dict[PartitionKey, OffsetSample] = {}
        for route in self.config.routes:
            if not any(k.route == route.name for k in ideal):
                continue
            at_source = self.kafka.topics(route.source)
            wanted = [
                (key.topic, p) for key, state in ideal.items() if key.route == route.name and key.topic in at_source
                and (topic is None or key.topic == topic) for p in range(min(state.partitions, at_source[key.topic]))
                if partition is None or p == partition
            ]
            if not wanted:
                continue
            ends = self.kafka.end_offsets(route.source, wanted)
            committed = self.kafka.committed(route.source, route.group_id, wanted)
            for t, p in wanted:
                if (t, p) in ends:
                    result[PartitionKey(route.name, t, p)] = OffsetSample(committed.get((t, p)), ends[(t, p)])
        if topic is not None and partition is not None and not result:
            raise NotFound(f"partition {partition} of {topic!r} is not mirrored by Ferry")
        return result

    def sample_offsets(self) -> None:
        """The leader's lag job: feeds /noprogress and the lag metrics."""
        samples = self.offsets()
        self.progress.update(samples, self._clock())
        self._lag_gauge.clear()
        for key, sample in samples.items():
            self._lag_gauge.labels(key.route, key.topic, str(key.partition)).set(sample.lag)
        self._stalled_gauge.set(len(self.progress.stalled(self._clock())))

    def noprogress(self) -> dict[str, Any]:
        self._require_leader()  # only the leader samples; the REST layer forwards to it
        now = self._clock()
        latest = self.progress.latest()
        return {"noprogress": [
            {"partition": str(key), "route": key.route, "topic": key.topic, "partitionId": key.partition,
             "committed": latest[key].committed, "logEnd": latest[key].end, "lag": latest[key].lag,
             "stalledForS": round(since, 1)}
            for key, since in sorted(self.progress.stalled(now).items())
        ], "thresholdS": self.progress.noprogress_after_s}

    def run_spark_validation(self) -> None:
        """The leader's ``validate`` job: ``ferry validate --store`` in a process of its own (a JVM)."""
        assert self._config_path is not None
        command = [sys.executable, "-m", "common.cli", "validate", "--config", self._config_path, "--store", "--json"]
        timeout = self.config.controller.validation_timeout_s
        try:
            done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            log.warning("the Spark validation took longer than %.0fs; stopped", timeout)
            return
        if done.returncode not in (0, 1):  # 1: it ran and found problems
            log.warning("the Spark validation failed (exit %d): %s", done.returncode, done.stderr.decode()[-500:])
        stored = self.spark_validation()
        if stored is not None:
            self._validation_gauge.set(len(stored.get("problems", [])))

    def spark_validation(self) -> dict[str, Any] | None:
        """The last stored result of ``ferry validate --store``, or None."""
        try:
            data, _ = self._zk.get(self.layout.validation)
        except NoNodeError:
            return None
        except KazooException as exc:
            raise Unavailable(f"ZooKeeper cannot be reached: {type(exc).__name__}") from None
        stored: dict[str, Any] | None = decode(data)
        return stored

    def source_validation(self) -> dict[str, Any]:
        """uReplicator's ``/validation/srcKafka``: partition counts at the source vs the ideal state."""
        ideal = self._ideal_states()
        problems = []
        routes = {r.name: r for r in self.config.routes}
        source_topics = {name: self.kafka.topics(r.source) for name, r in routes.items()
                         if any(k.route == name for k in ideal)}
        for key, state in sorted(ideal.items()):
            route = routes.get(key.route)
            if route is None:
                continue
            at_source = source_topics[key.route].get(key.topic)
            if at_source != state.partitions:
                problems.append({"route": key.route, "topic": key.topic, "idealPartitions": state.partitions,
                                 "sourcePartitions": at_source,
                                 "problem": "missing at source" if at_source is None else "partition count differs"})
        spark = self.spark_validation()
        return {"ok": not problems, "topics": len(ideal), "mismatches": problems,
                "spark": None if spark is None else {"checkedAt": spark.get("checkedAt"), "srcKafka": spark.get("srcKafka")}}

    def checkpoint(self) -> None:
        """The leader's checkpoint job (controller/checkpoints.py)."""
        self.checkpoints.run()
        for (route, group), age in self.checkpoints.ages().items():
            self._checkpoint_age.labels(route, group).set(age)

    def groups(self, group: str | None = None) -> dict[str, Any]:
        """The leader's latest checkpoints: every group's, or one group's (NotFound when it has none)."""
        return translations_json(self.checkpoints.latest(group), self.checkpoints.ages())

    def metrics_text(self) -> bytes:
        for (route, group), age in self.checkpoints.ages().items():
            self._checkpoint_age.labels(route, group).set(age)
        return generate_latest(self.registry)

    # -- schema distribution (leader) ---------------------------------------------------------

    def _schema_distributor(self) -> SchemaDistributor:
        if self.schemas is None:
            raise NotFound("schema distribution is off: the config has no `schemas` section")
        return self.schemas

    def schema_status(self) -> dict[str, Any]:
        """The last distribution pass's report (the leader's; a read-only pass when none ran yet)."""
        distributor = self._schema_distributor()
        self._require_leader()
        return distributor.status()

    def schema_sync(self) -> dict[str, Any]:
        """A distribution pass now; its report."""
        distributor = self._schema_distributor()
        self._require_leader()
        return distributor.run()


def _job_name(job_id: str) -> str:
    """A metric label: ``failover-<worker>`` jobs count as one ``failover`` job."""
    return "failover" if job_id.startswith("failover-") else job_id


def _instances(
    live: dict[str, WorkerInfo], statuses: dict[str, WorkerStatus], holding: dict[str, list[str]]
) -> dict[str, Any]:
    instances = []
    for worker, info in sorted(live.items()):
        status = statuses.get(worker)
        states = [s.state for s in status.partitions.values()] if status else []
        instances.append({
            "id": worker, "host": info.host, "pid": info.pid, "metricsUrl": info.metrics_url,
            "partitions": holding.get(worker, []),
            "online": states.count(PartitionState.ONLINE), "error": states.count(PartitionState.ERROR),
            "generation": status.generation if status else None,
            "leaving": bool(status and status.leaving),
        })
    departed = [{"id": w, "partitions": parts} for w, parts in sorted(holding.items()) if w not in live]
    return {"instances": instances, "departed": departed}


def _route_view(ideal: IdealState, external: ExternalView) -> dict[str, Any]:
    workers: dict[str, list[int]] = {}
    for p, w in sorted(ideal.assignment.items()):
        workers.setdefault(w, []).append(p)
    return {
        "partitions": ideal.partitions,
        "idealState": {str(p): w for p, w in sorted(ideal.assignment.items())},
        "externalView": {str(p): v for p, v in sorted(external.partitions.items())},
        "workers": workers,
    }


def _check_topic(topic: Any) -> None:
    problem = topic_name_problem(topic)
    if problem:
        raise BadRequest(problem)
    if topic.startswith("__"):
        raise BadRequest(f"{topic!r} is an internal topic; Ferry does not mirror internal topics")


def _check_count(value: Any, required: bool) -> int | None:
    if value is None:
        if required:
            raise BadRequest("numPartitions is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"numPartitions must be a positive integer, not {value!r}")
    if value <= 0:
        raise BadRequest(f"numPartitions must be positive, not {value}")
    return value
