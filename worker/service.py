"""A Ferry worker: registers in ZooKeeper, watches its assignment and applies it, level-triggered.

States of the worker::

    STARTING  -> RUNNING    registered (live node + status node); assignment watched
    STARTING  -> STOPPED    ZooKeeper not reached within ``zookeeper.retry_deadline_s``
                            (:class:`common.errors.UnreachableError`), or SIGTERM while connecting
                            or waiting to register
    RUNNING (disconnected)  ZooKeeper unreachable: exactly-once routes copy on; at-least-once
                            routes pause at once (deliveries of what was sent are still served)
                            and go on if the session survives
    RUNNING (unregistered)  its live node deleted while the session holds (Ferry's root deleted
                            under a running fleet): registers again at once, with the folders; the
                            assignment node went too, so it holds nothing until the leader assigns
    RUNNING   -> SUSPENDED  ZooKeeper session lost, or unreachable for longer than the session
                            timeout, or the copy loop itself stood still that long (SIGSTOP, a
                            frozen VM) and one round trip to ZooKeeper cannot confirm the session
                            is still ours: the leader may already have moved our partitions.
                            At-least-once routes: their producers are purged (nothing they still
                            hold is written) and their partitions released (committed, unassigned).
                            Exactly-once routes copy on with the assignment they hold: the leader
                            fences their writers before it gives their partitions to another
                            worker, so nothing written after that ever commits
    RUNNING or SUSPENDED -> SUSPENDED (fenced)
                            a route's writer was fenced (the leader moved its partitions away):
                            every producer is purged, every partition released, and nothing is
                            copied until registered again with a freshly read assignment
    SUSPENDED -> RUNNING    connected: registers again (same id), reads its assignment and applies
                            it, with new writers where they were fenced
    ZooKeeper unreachable for any length of time never ends a worker: kazoo keeps reconnecting
    any       -> DRAINING   SIGTERM or :meth:`Worker.stop`: releases everything, writes its status
                            with ``leaving: true`` so the leader moves its partitions at once, and
                            waits (bounded) until the leader emptied its assignment; not at all
                            while no controller leads
    DRAINING  -> STOPPED    live and status nodes deleted, clients closed

ZooKeeper watch callbacks (kazoo runs them all on one thread) only store the newest assignment
and wake the copy loop. The copy loop owns every Kafka client; each pass compares the partitions
it holds with the newest assignment and releases or acquires the difference (level-triggered),
then copies a batch per route and commits: an exactly-once route's transaction every
``transaction_interval_s`` (what a ``read_committed`` reader waits for), an at-least-once route's
acknowledged offsets every ``commit_interval_s``.

The health probes (:mod:`common.core.probes`, served on the metrics port) read, on the HTTP server's
thread, what the copy loop last wrote (its state and since when, its last pass, the assignment it
took and the one it applied) and what kazoo last reported: live unless the copy loop stood still
too long; ready when RUNNING, connected, and the newest assignment the loop took is applied.
While ZooKeeper is unreachable, ``/health`` says since when, and so does
``ferry_worker_zookeeper_unreachable_seconds``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.recipe.watchers import DataWatch

from ferry.common import logs
from ferry.common.cli import ferry_version
from ferry.common.config import FerryConfig
from ferry.common.core.probes import WorkerFacts, worker_liveness, worker_readiness
from ferry.common.errors import ConfigError
from ferry.common.model import (
    PartitionKey,
    PartitionLoad,
    PartitionStatus,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
)
from ferry.common.vocabulary import PartitionState, WorkerState
from ferry.common.zk.layout import ZkLayout, connect, given_up, lost, make_client
from ferry.common.zk.state import StateReader
from ferry.worker.controls import SwitchedTargets, WorkerControls
from ferry.worker.copier import RouteCopier
from ferry.worker.copying.committer import FLUSH_TIMEOUT_S
from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.errors import RETRY_BACKOFF_S, RegistrationError
from ferry.worker.load import LoadMeter
from ferry.worker.mailbox import Mailbox
from ferry.worker.metrics import HealthAnswer, WorkerMetrics, advertised_metrics_url, serve
from ferry.worker.position import start_offsets
from ferry.worker.session import ZkSession

log = logging.getLogger(__name__)

COMMIT_DEADLINE_S = 10.0
# How long a draining worker waits for the leader to take its partitions away.
LEAVE_WAIT_S = 10.0


class Worker:
    """One worker process's logic. See the module docstring for its states."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        worker_id: str,
        metrics_port: int | None = None,
        zk: KazooClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.worker_id = worker_id
        self.layout = ZkLayout(config.zookeeper.root)
        self.metrics = WorkerMetrics()
        self.state: WorkerState = WorkerState.STARTING
        self._state_since = clock()
        self._metrics_port = config.worker.metrics_port if metrics_port is None else metrics_port
        # A worker never gives ZooKeeper up: its exactly-once routes copy on through an outage.
        self._zk = zk or make_client(config.zookeeper, reconnect_forever=True)
        self._owns_zk = zk is None
        self._clock = clock
        self._wall_clock = wall_clock
        self._fenced = False  # a writer was fenced: hold nothing until registered again
        self._copiers: dict[str, RouteCopier] = {}
        self._routes = {route.name: route for route in config.routes}
        # Partitions assigned on a route this worker has no config for: reported ERROR.
        self._foreign: dict[PartitionKey, str] = {}
        self._deferred: dict[PartitionKey, tuple[float, str]] = {}  # retry at, why
        self._wake = threading.Event()
        self._assignments: Mailbox[WorkerAssignment] = Mailbox(self._wake)  # from the assignment's watch
        self._assignment = WorkerAssignment(generation=0)  # the newest the copy loop took
        self._applied: WorkerAssignment | None = None
        self._targets = SwitchedTargets(self.layout.tree_targets, self._wake)  # tree distributors' switched leaves
        self._controls = WorkerControls(worker_id, self._wake, clock)
        self._stopping = threading.Event()
        self._session = ZkSession(
            zk=self._zk,
            live_path=self.layout.live_worker(worker_id),
            session_timeout_s=config.zookeeper.session_timeout_s,
            clock=clock,
            wake=self._wake,
        )
        self._session_lost = self._session.lost
        self._status_dirty = True
        self._registered = False
        self._health: dict[str, Any] = {"status": WorkerState.STARTING, "worker": worker_id}
        self._loop_passed_at: float | None = None  # the copy loop's last pass, for the liveness probe
        self._server: Any = None
        self._advertised_metrics_url: str | None = None
        self._load_meter = LoadMeter(config.worker.load_report_interval_s, clock())
        self._load: dict[PartitionKey, PartitionLoad] = {}  # the last window's, written with every status
        self._busy: float | None = None

    # -- control from other threads ---------------------------------------------------------

    def stop(self) -> None:
        """Asks the copy loop to drain and stop; safe from signal handlers and other threads."""
        self._stopping.set()
        self._wake.set()

    def health(self) -> dict[str, Any]:
        """What the status last said: state, id, generation, partitions per state, leaving; and since
        when ZooKeeper has been unreachable, if it is."""
        health = dict(self._health)
        since = self._session.suspended_since
        if since is not None:
            unreachable_at = self._wall_clock() - (self._clock() - since)
            health["zookeeper"] = "unreachable since " + time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(unreachable_at)
            )
        return health

    def liveness(self) -> HealthAnswer:
        """``GET /health/live``: :func:`common.core.probes.worker_liveness`, with the reasons when not."""
        probe = worker_liveness(self._facts(), self._clock(), self.config.worker.copy_loop_stalled_after_s)
        return HealthAnswer(probe.ok, {**self.health(), "live": probe.ok, "reasons": list(probe.reasons)})

    def readiness(self) -> HealthAnswer:
        """``GET /health/ready`` and ``GET /health``: :func:`common.core.probes.worker_readiness`, with the
        reasons when not."""
        probe = worker_readiness(self._facts(), self._clock(), self.config.worker.copy_loop_stalled_after_s)
        return HealthAnswer(probe.ok, {**self.health(), "ready": probe.ok, "reasons": list(probe.reasons)})

    def _facts(self) -> WorkerFacts:
        # Any thread (the probes'): each attribute is one reference the copy loop or kazoo replaces
        # whole; a probe that reads them in the middle of a change answers right the next time.
        applied = self._applied
        return WorkerFacts(
            state=self.state,
            state_since=self._state_since,
            loop_passed_at=self._loop_passed_at,
            assigned_generation=self._assignment.generation,
            applied_generation=None if applied is None else applied.generation,
            zookeeper_disconnected_since=self._session.suspended_since,
            session_lost=self._session_lost.is_set(),
        )

    # -- the copy loop ----------------------------------------------------------------------

    def run(self) -> int:
        """Runs until :meth:`stop`; returns the process exit status.

        :meth:`stop` while still connecting or registering ends it at once (status 0); an
        ensemble that does not answer within ``zookeeper.retry_deadline_s`` raises
        :class:`common.errors.UnreachableError`.
        """
        self._advertised_metrics_url = advertised_metrics_url(
            self.config.worker, self._metrics_port
        )  # a wildcard host no name resolves for: fail first
        # Every line of the copy loop (which owns the Kafka clients, so theirs too) names this worker.
        with logs.context(worker=self.worker_id):
            return self._run()

    def _run(self) -> int:
        if self._metrics_port:
            host = self.config.worker.metrics_host
            try:
                self._server = serve(self.metrics, self.liveness, self.readiness, host, self._metrics_port)
            except OSError as exc:
                raise ConfigError(
                    f"cannot serve metrics on {host}:{self._metrics_port}: {exc.strerror or exc}"
                ) from None
        try:
            if self._owns_zk and not connect(self._zk, self.config.zookeeper, self._stopping):
                return 0
            return self._run_connected()
        finally:
            self._shutdown()

    def _run_connected(self) -> int:
        self._zk.add_listener(self._session.on_state)
        try:
            StateReader(self._zk, self.layout).check_layout(ferry_version())
            for path in self.layout.persistent_paths():
                self._zk.ensure_path(path)
            if not self._register():
                return 0
        except KazooException as exc:  # lost again at once, or refused (ACLs): one line, not a traceback
            raise RegistrationError(
                f"ZooKeeper at {self.config.zookeeper.connect}: registering failed: {type(exc).__name__} {exc}".rstrip()
            ) from None
        self._session.watch_live_node()
        DataWatch(self._zk, self.layout.assignment(self.worker_id), self._on_assignment)
        DataWatch(self._zk, self.layout.controls, self._controls.on_controls)
        DataWatch(self._zk, self.layout.throttle_shares, self._controls.on_shares)
        if self.config.tree is not None:
            DataWatch(self._zk, self.layout.tree_targets, self._targets.on_targets)
        self._set_state(WorkerState.RUNNING)
        commit_every = self.config.worker.commit_interval_s
        transaction_every = self.config.worker.transaction_interval_s
        next_commit = self._clock() + commit_every
        next_transaction = self._clock() + transaction_every
        while not self._stopping.is_set():
            self._check_session()
            self._restart_failed()
            self._apply_targets()
            self._reconcile()
            if self._controls.apply(self._copiers, COMMIT_DEADLINE_S):
                self._status_dirty = True
            copying = self._copying()
            if copying:
                timeout = 0.1 / len(copying)
                started = self._clock()
                copied = 0
                for copier in copying:
                    copied += copier.copy_batch(timeout)
                if copied:
                    self._load_meter.busy(self._clock() - started)
            else:
                for copier in self._copiers.values():
                    copier.poll(0)  # deliveries of what was sent, while paused
                self._wake.wait(0.2)
                self._wake.clear()
            # Any copier, holding partitions or not: a writer fenced while releasing its last ones stays
            # fenced (nothing of its route starts) until the worker registered again.
            if not self._fenced and any(copier.fenced for copier in self._copiers.values()):
                self._on_fenced()
            now = self._clock()
            self._loop_passed_at = now
            if now >= next_transaction:
                next_transaction = now + transaction_every
                self._commit(transactional=True)
            if now >= next_commit:
                next_commit = now + commit_every
                self._commit_and_measure()
                if self.state == WorkerState.RUNNING:
                    self._session.check_live_node()
            if self._load_meter.due(now):
                self._load, self._busy = self._load_meter.report(now, self._copiers)
                self._status_dirty = True
            if self._status_dirty or any(copier.changed for copier in self._copiers.values()):
                self._publish_status()
        self._drain()
        return 0

    def _copying(self) -> list[RouteCopier]:
        """The copiers that copy in this pass: every one holding partitions while registered and
        connected; without ZooKeeper, only those whose writers the leader can fence (exactly once).
        At-least-once routes pause while disconnected: the leader moves partitions only after the
        session expired, and by then they stopped writing."""
        registered = self.state == WorkerState.RUNNING and self._session.suspended_since is None
        return [
            copier
            for copier in self._copiers.values()
            if (registered or (copier.fenced_writes and not self._fenced)) and copier.held()
        ]

    def _on_fenced(self) -> None:
        """A route's writer was fenced: the leader gave its partitions to another worker while this one
        was cut off (its session expired). Stop everything and register again (-> SUSPENDED, fenced)."""
        routes = sorted(name for name, copier in self._copiers.items() if copier.fenced)
        log.warning(
            "fenced: the leader moved the partitions of route(s) %s to other workers; dropping what was queued, "
            "releasing every partition and registering again",
            ", ".join(routes),
        )
        for name in routes:
            self.metrics.fenced.labels(name).inc()
        for copier in self._copiers.values():
            copier.purge()
        self._fenced = True
        if self.state == WorkerState.RUNNING:
            self._set_state(WorkerState.SUSPENDED)
        self._applied = None
        self._reconcile()  # wanted is empty while fenced: releases everything

    def _wanted(self, assignment: WorkerAssignment) -> frozenset[PartitionKey]:
        """What the worker copies in its state: its assignment when RUNNING; while SUSPENDED (registration
        lost, not fenced), the partitions of its exactly-once routes; else nothing."""
        if self.state == WorkerState.RUNNING:
            return assignment.partitions
        if self.state == WorkerState.SUSPENDED and not self._fenced:
            return frozenset(key for key in assignment.partitions if self._fenced_writes(key.route))
        return frozenset()

    def _fenced_writes(self, route: str) -> bool:
        config = self._routes.get(route)
        return config is not None and config.exactly_once

    def _reconcile(self) -> None:
        """Releases what is held but no longer assigned; acquires what is assigned but not held."""
        assignment = self._newest_assignment()
        now = self._clock()
        deferred_due = any(at <= now for at, _ in self._deferred.values())
        if assignment is self._applied and not deferred_due:
            return
        wanted = self._wanted(assignment)
        held = self._held()
        release = held - wanted
        for route, keys in _by_route(release).items():
            if route in self._copiers:
                self._copiers[route].release(keys, FLUSH_TIMEOUT_S, COMMIT_DEADLINE_S)
        for key in release:
            self._foreign.pop(key, None)
        self._deferred = {k: v for k, v in self._deferred.items() if k in wanted}
        acquire = {k for k in wanted - held if k not in self._deferred or self._deferred[k][0] <= now}
        for route, keys in _by_route(acquire).items():
            if route not in self._routes:
                for topic, partition in keys:
                    self._foreign[PartitionKey(route, topic, partition)] = (
                        f"route {route!r} is not in this worker's config"
                    )
                continue
            result = self._copier(route).acquire(keys)
            for (topic, partition), why in result.deferred.items():
                self._deferred[PartitionKey(route, topic, partition)] = (now + RETRY_BACKOFF_S, why)
                log.warning(
                    "route %s: %s/%s not started yet (retry in %.0fs): %s",
                    route,
                    topic,
                    partition,
                    RETRY_BACKOFF_S,
                    why,
                    extra={"route": route, "topic": topic, "partition": partition},
                )
            for key in (PartitionKey(route, t, p) for t, p in result.online):
                self._deferred.pop(key, None)
            for key in (PartitionKey(route, t, p) for t, p in result.errors):
                self._deferred.pop(key, None)
        if release or acquire or assignment is not self._applied:
            log.info(
                "applied assignment generation %d: %d partitions (released %d, started %d)",
                assignment.generation,
                len(wanted),
                len(release),
                len(acquire),
            )
        self._applied = assignment
        self._status_dirty = True

    def _apply_targets(self) -> None:
        """Points tree distributors at their switched targets: the route's partitions are released
        (flushed, committed up to what the old target acknowledged), its copier closed, and the
        next reconcile acquires them again with a copier for the new target, from the committed
        offsets. Nothing is lost; what the old target had received but not acknowledged is
        copied again (documented duplicates)."""
        switched = self._targets.take()
        if switched is None:
            return
        for route in self.config.with_targets(switched):
            current = self._routes.get(route.name)
            if current is None or current.destination == route.destination:
                continue
            log.warning(
                "distributor %s: switching its target from %s to %s", route.name, current.destination, route.destination
            )
            copier = self._copiers.pop(route.name, None)
            if copier is not None:
                copier.abandon(COMMIT_DEADLINE_S)
                try:
                    copier.close(0)
                except KafkaException as exc:
                    log.warning("closing route %s: %s", route.name, exc, extra={"route": route.name})
            self._routes[route.name] = route
            self._applied = None  # the next reconcile acquires the route's partitions again
            self._status_dirty = True

    def _restart_failed(self) -> None:
        """ERROR -> released -> acquired again, for partitions stopped by a temporary failure."""
        for route, copier in self._copiers.items():
            due = copier.due_retries()
            if due:
                log.info("route %s: restarting %d partitions after a temporary failure", route, len(due))
                copier.release(due, FLUSH_TIMEOUT_S, COMMIT_DEADLINE_S)
                self._applied = None  # the next reconcile acquires them again

    def _held(self) -> set[PartitionKey]:
        held = set(self._foreign)
        for route, copier in self._copiers.items():
            held.update(PartitionKey(route, t, p) for t, p in copier.held())
        return held

    def _copier(self, route: str) -> RouteCopier:
        if route not in self._copiers:
            config = self._routes[route]
            with logs.context(route=route):  # the copier's Kafka clients log with the route
                self._copiers[route] = RouteCopier(
                    route=config,
                    source=self.config.clusters[config.source],
                    destination=self.config.clusters[config.destination],
                    config=self.config.worker,
                    metrics=self.metrics,
                    client_id=f"ferry-{self.worker_id}",
                    clock=self._clock,
                    origins=self.config.copied_origins(config),
                    topic_start=lambda topic: start_offsets.topic_start(
                        self._zk, self.layout.topic_start(route, topic)
                    ),
                    internal_topics=self.config.internal_topics,
                    transactional_id=config.transactional_id(self.worker_id) if config.exactly_once else None,
                )
            self.metrics.start_route(route)
        return self._copiers[route]

    def _commit(self, *, transactional: bool) -> None:
        """Commits the routes of one kind: exactly-once ones (their transactions) every
        ``transaction_interval_s``, at-least-once ones (their source offsets) every ``commit_interval_s``."""
        for copier in self._copiers.values():
            if copier.fenced_writes == transactional:
                copier.commit()

    def _commit_and_measure(self) -> None:
        self._commit(transactional=False)
        in_flight = 0
        for copier in self._copiers.values():
            copier.update_lag()
            in_flight += copier.in_flight()
        self.metrics.in_flight.set(in_flight)
        since = self._session.suspended_since
        self.metrics.zookeeper_unreachable.set(0 if since is None else self._clock() - since)

    # -- ZooKeeper --------------------------------------------------------------------------

    def _on_assignment(self, data: bytes | None, stat: Any) -> None:
        # kazoo's watch thread: store and wake, never block.
        try:
            assignment = WorkerAssignment.from_bytes(data)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring an unreadable assignment node: %s", exc)
            return
        # A late notification of an older generation is dropped; a deleted node always counts.
        self._assignments.put(assignment, lambda last: assignment.generation >= last.generation or data is None)

    def _newest_assignment(self) -> WorkerAssignment:
        """The copy loop's view of its assignment: the newest one a watch stored, once taken."""
        taken = self._assignments.take()
        if taken is not None:
            self._assignment = taken
        return self._assignment

    def _confirm_after_standstill(self) -> None:
        self._session.confirm_after_standstill(self.state == WorkerState.RUNNING)

    def _check_session(self) -> None:
        self._confirm_after_standstill()
        if self._session.cut_off() and self.state == WorkerState.RUNNING:
            log.warning(
                "ZooKeeper session lost: at-least-once routes release their partitions until registered again "
                "(producers purged first); exactly-once routes copy on"
            )
            for copier in self._copiers.values():
                if not copier.fenced_writes:
                    copier.purge()
            self._set_state(WorkerState.SUSPENDED)
            self._applied = None
            self._reconcile()  # while SUSPENDED only exactly-once routes keep their partitions
        if self.state == WorkerState.SUSPENDED and given_up(self._zk):
            raise lost(self.config.zookeeper)  # only when the client was stopped: it reconnects forever
        if self.state == WorkerState.SUSPENDED and self._zk.connected and self._session.suspended_since is None:
            self._session_lost.clear()
            self._session.live_node_gone.clear()  # this registration re-creates it
            try:
                self._register()
                data, _ = self._zk.get(self.layout.assignment(self.worker_id))
                self._on_assignment(data, None)
            except NoNodeError:
                self._on_assignment(None, None)
            except Exception as exc:
                log.warning("registering again failed (will retry): %s", exc)
                return
            self._applied = None
            self._fenced = False
            for copier in self._copiers.values():
                copier.registered_again()  # fenced writers are built anew
            self._set_state(WorkerState.RUNNING)
            log.info("registered again in ZooKeeper")
        if self.state == WorkerState.RUNNING and self._session.live_node_gone.is_set() and self._zk.connected:
            # The session holds but the live node was deleted (Ferry's root deleted under a running
            # fleet): register again, or no leader would ever assign this worker anything.
            self._session.live_node_gone.clear()
            log.warning("this worker's live node was deleted while its session holds: registering again")
            try:
                self._register()
            except Exception as exc:
                log.warning("registering again failed (will retry): %s", exc)
                self._session.live_node_gone.set()

    def _register(self) -> bool:
        """Creates the ephemeral live node, waiting out a previous incarnation's session.

        False when :meth:`stop` came while waiting (nothing registered)."""
        info = WorkerInfo(self.worker_id, socket.gethostname(), os.getpid(), self._advertised_metrics_url)
        if not self._session.create_live_node(info, self._stopping):
            return False
        self._registered = True
        self._status_dirty = True
        self._publish_status()
        return True

    def _publish_status(self, leaving: bool = False) -> None:
        partitions = {key: PartitionStatus(PartitionState.ERROR, why) for key, why in self._foreign.items()}
        for key, (_, why) in self._deferred.items():
            partitions[key] = PartitionStatus(PartitionState.OFFLINE, why)
        for route, copier in self._copiers.items():
            copier.changed = False
            for (topic, partition), status in copier.statuses().items():
                partitions[PartitionKey(route, topic, partition)] = status
        # Only a RUNNING worker has applied its assignment; released while suspended or draining.
        generation = self._applied.generation if self._applied is not None and self.state == WorkerState.RUNNING else 0
        load = {key: self._load[key] for key in partitions if key in self._load}
        published = WorkerStatus(
            generation=generation, partitions=partitions, leaving=leaving, load=load, busy=self._busy if load else None
        )
        payload = published.to_bytes()
        path = self.layout.worker_state(self.worker_id)
        if not self._session.put_ephemeral(path, payload):
            return
        self._status_dirty = False
        counts = published.state_counts()
        for state, count in counts.items():
            self.metrics.partitions.labels(state).set(count)
        self.metrics.generation.set(generation)
        self._health = {
            "status": self.state,
            "worker": self.worker_id,
            "generation": generation,
            "partitions": dict(counts),
            "leaving": leaving,
        }

    def _set_state(self, state: WorkerState) -> None:
        self._state_since = self._clock()
        self.state = state
        self._health = {**self._health, "status": state}

    # -- leaving ----------------------------------------------------------------------------

    def _drain(self) -> None:
        log.info("draining: releasing every partition")
        self._set_state(WorkerState.DRAINING)
        self._applied = None
        self._reconcile()  # wanted is empty while DRAINING: flush, commit, unassign everything
        self._publish_status(leaving=True)
        deadline = self._clock() + LEAVE_WAIT_S
        while self._clock() < deadline and self._zk.connected:
            if not self._newest_assignment().partitions:
                break
            if not self._session.exists(self.layout.leader):
                # A whole fleet stopping at once: no leader is left to move them, and the next one
                # finds this worker gone and moves them then.
                log.info("draining: no controller leads, so not waiting for the partitions to move")
                break
            self._wake.wait(0.2)
            self._wake.clear()

    def _shutdown(self) -> None:
        for copier in self._copiers.values():
            try:
                copier.close(FLUSH_TIMEOUT_S)
            except Exception as exc:
                log.warning("closing route %s: %s", copier.route.name, exc, extra={"route": copier.route.name})
        if self._zk.connected and self._registered:  # never another incarnation's nodes
            self._session.delete(self.layout.live_worker(self.worker_id), self.layout.worker_state(self.worker_id))
        if self._owns_zk:
            self._zk.stop()
            self._zk.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self._set_state(WorkerState.STOPPED)
        log.info("worker %s stopped", self.worker_id)


def _by_route(keys: set[PartitionKey]) -> dict[str, list[TopicPartitionKey]]:
    grouped: dict[str, list[TopicPartitionKey]] = {}
    for key in keys:
        grouped.setdefault(key.route, []).append((key.topic, key.partition))
    return grouped
