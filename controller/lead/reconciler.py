"""The reconciler: the leader state (the leader's copy of Ferry's state), the watches that feed it, its writes.

Level-triggered, from the leader state. At the first reconcile of a lead it reads Ferry's state once
(pipelined) into a :class:`controller.lead.leader_state.LeaderState`. ZooKeeper watch callbacks (all
on kazoo's one event thread) only record what they saw (the newest live set, each worker's
newest status bytes) and *queue* the job ``reconcile``; the job feeds what was recorded to the
leader state, which plans only what those changes touched (deciding exactly as
``plan`` of ``tests/oracles/planner.py``), and writes what differs in fenced transactions, stamping
changed assignments with a new generation. The leader's own topic writes (topic commands,
observer) go through the topic writers it hands out (:mod:`controller.lead.topic_writes`,
:meth:`Reconciler.topic_writer`), and into the leader state once ZooKeeper took them; a failed write drops
the leader state and the next reconcile reads everything again. A bulk ``POST /topics`` writes its
topics holding the bulk lock instead of ``lock`` (:meth:`Reconciler.bulk_topic_writer`: it does not
wait behind a reconcile); they wait as pending topics (:mod:`controller.lead.bulk_topics`) until the
next holder of ``lock`` hands them to the leader state (:class:`controller.lead.state_lock.LeaderStateLock`).

States of the leader state: ``None`` (read it at the next reconcile) -> read -> ``None`` again after a
failed write or at the end of a lead. A state read while its lead ended is never kept: the reconcile that
read it raises :class:`controller.errors.NotLeader`, and ends quietly when a later lead (the epoch moved
on) is already running, so nothing read in one lead serves another.

Triggers (APScheduler one-shot jobs, all on the one ``default`` executor thread, so runs never
overlap): ``reconcile`` (now; a trigger during a run queues exactly one more run, which *waits*
for the running one: no trigger is dropped and APScheduler never refuses one), ``rebalance``
(``rebalance_delay_s`` after the last membership change, debounced by ``replace_existing``),
``failover-<worker>`` (when a departed worker's retention ends), ``load-balance`` (with
``controller.balance: load``, every ``load_rebalance_interval_s``: :mod:`controller.lead.load_balance`
plans moves from the workers' load reports), ``retry`` (1 s after a failed run) and ``resync``
(every 5 s on the ``timer`` thread, it only queues a reconcile: a safety net).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from functools import partial

from apscheduler.schedulers.base import BaseScheduler
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core.assignment import Rate
from ferry.common.core.operate import controls as fleet_controls
from ferry.common.core.operate import load_shares
from ferry.common.core.operate.controls import Controls
from ferry.common.model import ExternalView, IdealState, PartitionKey, TopicKey, WorkerInfo, WorkerStatus
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import ControllerError, NotLeader
from ferry.controller.lead import lead_controls
from ferry.controller.lead.bulk_topics import BulkLedger, BulkTopics
from ferry.controller.lead.fencing import WriterFencer
from ferry.controller.lead.lead_watches import LeadWatches
from ferry.controller.lead.leader_state import Changes, LeaderState
from ferry.controller.lead.leadership import LEADING, Leadership
from ferry.controller.lead.load_balance import LoadBalancer
from ferry.controller.lead.state_lock import LeaderStateLock
from ferry.controller.lead.store import Op, Store
from ferry.controller.lead.topic_writes import TopicChange, TopicWriter
from ferry.controller.lead.write_order import ordered_ops
from ferry.controller.metrics import ControllerMetrics

log = logging.getLogger(__name__)

RESYNC_INTERVAL_S = 5.0
RETRY_AFTER_FAILURE_S = 1.0
MAX_PARSED_KEYS = 2_000_000


class Reconciler:
    """See the module docstring. ``lock`` serializes the leader's writes (reconcile and commands);
    the bulk lock (:class:`controller.lead.bulk_topics.BulkTopics`) serializes bulk whitelisting,
    which does not wait for ``lock``. Topic commands take them only through :meth:`topic_writer` and
    :meth:`bulk_topic_writer`, which keep the order (``lock`` before the bulk lock, never the reverse).
    With ``lock`` held the reconciler itself is the writers'
    :class:`controller.lead.topic_writes.TopicLedger` (:meth:`known_topic` ... :meth:`record_topics`)."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        store: Store,
        leadership: Leadership,
        scheduler: BaseScheduler,
        metrics: ControllerMetrics,
        clock: Callable[[], float],
        effective_routes: Callable[[], Iterable[RouteConfig]] | None = None,
    ) -> None:
        """``effective_routes``: the routes as the workers copy them now (a tree's switched targets
        applied), for fencing lost workers' writers where they write."""
        self.config = config
        self.layout = layout
        self.store = store
        self.lock = LeaderStateLock(self._take_pending)
        # Bulk POST /topics writes its topic nodes holding the bulk lock only, not behind a running
        # reconcile; what it wrote is pending until the next holder of ``lock`` takes it.
        self._bulk = BulkTopics()
        self.departed_at: dict[str, float] = {}  # worker -> when the leader first saw it gone
        self._zk = zk
        self._leadership = leadership
        self._scheduler = scheduler
        self._metrics = metrics
        self._clock = clock
        self._state: LeaderState | None = None
        # Guards the leader state's end of a lead (the election's thread) against its assignment by a
        # reconcile that read it (the job's thread): see _keep_state.
        self._state_guard = threading.Lock()
        # What the watches saw since the last reconcile (kazoo's thread writes, the job reads);
        # request_reconcile is looked up at each call (tests replace it on the instance).
        self._watches = LeadWatches(
            zk=zk,
            layout=layout,
            leadership=leadership,
            on_change=lambda: self.request_reconcile(),
            on_membership=self._membership_changed,
        )
        self._queue_lock = threading.Lock()  # guards _reconcile_queued (watch callbacks and the job set it)
        self._reconcile_queued = False
        # Partition keys parsed from the workers' statuses (a status repeats its keys at every report).
        self._parsed_keys: dict[str, PartitionKey] = {}
        self._ensured_paths: set[str] = set()  # folders created (or seen) during this lead
        self.balancer = LoadBalancer(config.controller, metrics.registry)
        self._fencer = WriterFencer(config=config, effective_routes=effective_routes)
        self._by_load = config.controller.balance == "load"
        # The operator's controls (controls/desired) as last read or written, and the throttle
        # shares as last written (None: not read in this lead; absent node: {} and not existing).
        self.controls = Controls()
        self._shares: fleet_controls.Shares | None = None
        self._shares_exist = False
        # What the paused-partition metric was last computed from: the controls, each paused topic's partition count.
        self._paused_from: tuple[Controls, tuple[tuple[str, str, int | None], ...]] | None = None

    # -- a lead's start and end -------------------------------------------------------------

    def reset(self) -> None:
        """Forgets everything of a former lead (before LEADING)."""
        self.departed_at = {}
        self.drop_state()
        self._watches.reset()
        self._reconcile_queued = False
        self._ensured_paths = set()
        self.balancer.reset()
        self._shares = None
        self._bulk.forget_pending()

    def watch(self, epoch: int) -> None:
        """Starts this lead's watches, the resync safety net and a first reconcile."""
        self._watches.start(epoch)
        # The safety net only queues a reconcile (on a thread of its own, so it never piles up).
        self._scheduler.add_job(
            self.request_reconcile,
            "interval",
            seconds=RESYNC_INTERVAL_S,
            id="resync",
            replace_existing=True,
            executor="timer",
        )
        if self._by_load:
            self._scheduler.add_job(
                partial(self._schedule, "load-balance", 0.0, by_load=True),
                "interval",
                seconds=self.config.controller.load_rebalance_interval_s,
                id="load-balance-timer",
                replace_existing=True,
                executor="timer",
            )

    def drop_state(self) -> None:
        """The next reconcile reads everything again (a failed write, or the lead ended)."""
        with self._state_guard:
            self._state = None

    def _keep_state(self, leader_state: LeaderState, epoch: int) -> None:
        """Keeps a leader state just read in the lead of ``epoch``, unless that lead has ended."""
        with self._state_guard:
            if self._leadership.epoch != epoch or self._leadership.state != LEADING:
                raise NotLeader(f"controller {self._leadership.controller_id}'s lead ended while it read the state")
            self._state = leader_state

    @property
    def watch_reads(self) -> int:
        """The data the watches brought (each a read at the server)."""
        return self._watches.reads

    def _membership_changed(self, joined: list[str], left: list[str]) -> None:
        log.info(
            "workers joined %s left %s; rebalance in %.0fs", joined, left, self.config.controller.rebalance_delay_s
        )
        self._schedule("rebalance", self.config.controller.rebalance_delay_s, rebalance=True)

    # -- triggers -----------------------------------------------------------------------------

    def request_reconcile(self) -> None:
        """Queues one ``reconcile`` run unless one is queued (and not started) already.

        At most one run waits while another runs: a burst of triggers costs one run, no trigger
        is lost (the queued run starts after the trigger was recorded, so it sees its data), and
        none is ever refused by APScheduler (a refused run would count as a skip).
        """
        with self._queue_lock:
            if self._reconcile_queued:
                return
            self._reconcile_queued = True
        if not self._schedule("reconcile", 0.0, queued=True):
            with self._queue_lock:
                self._reconcile_queued = False

    def _schedule(
        self, job_id: str, delay_s: float, rebalance: bool = False, queued: bool = False, by_load: bool = False
    ) -> bool:
        """(Re)schedules the one-shot job ``job_id``; False when not leading or the scheduler stopped."""
        if self._leadership.state != LEADING:
            return False
        try:
            self._scheduler.add_job(
                self._run,
                "date",
                run_date=datetime.now() + timedelta(seconds=delay_s),
                id=job_id,
                replace_existing=True,
                misfire_grace_time=None,
                kwargs={"rebalance": rebalance, "queued": queued, "by_load": by_load},
                # One run may wait for the one reconcile thread while another runs.
                max_instances=2,
            )
        except Exception:  # the scheduler is shut down while stopping (APScheduler raises its own types)
            return False
        return True

    def _run(self, rebalance: bool = False, queued: bool = False, by_load: bool = False) -> None:
        """The scheduler's job: one reconcile. A trigger that arrives during it has queued the next run."""
        if queued:
            with self._queue_lock:
                self._reconcile_queued = False  # a trigger from now on queues the next run
        epoch = self._leadership.epoch
        if self._leadership.state != LEADING:
            return
        if rebalance and not self.autobalancing():
            log.info("autobalancing is off: no rebalance after the membership change")
            rebalance = False
        try:
            self.reconcile(rebalance=rebalance, by_load=by_load)
        except NotLeader as exc:
            if self._leadership.epoch != epoch:
                # The lead this run began in has ended (and maybe another begun): not this lead's fence.
                log.info("a reconcile of a lead that ended stopped: %s", exc)
                return
            log.warning("%s", exc)
            self._leadership.lose_lead()
        except (ControllerError, KazooException) as exc:
            log.warning("reconcile failed (retrying in %.0fs): %s", RETRY_AFTER_FAILURE_S, exc)
            self._schedule("retry", RETRY_AFTER_FAILURE_S, rebalance=rebalance)

    # -- reconciliation ---------------------------------------------------------------------

    def reconcile(self, rebalance: bool = False, by_load: bool = False) -> Changes:
        """Feeds the leader state what the watches saw, plans what that touched, writes what differs (fenced).

        ``by_load``: also the moves of the balance by load (:meth:`LoadBalancer.plan`)."""
        with self.lock:
            self._leadership.require_leader()
            epoch = self._leadership.epoch
            started = time.perf_counter()
            leader_state = self._fed_state(epoch)
            now = self._clock()
            plan_started = time.perf_counter()
            moves = self._load_moves(leader_state, now) if by_load and self._by_load else None
            rates = (lambda: self.balancer.rates()) if self._by_load else None
            changes = leader_state.plan(
                now, self.config.controller.failover_delay_s, rebalance=rebalance, rates=rates, moves=moves
            )
            self._metrics.plan_seconds.observe(time.perf_counter() - plan_started)
            generation = leader_state.generation + 1
            for key in changes.views:
                self.ensure_path(self.layout.route_external(key.route))
            ops = ordered_ops(self.layout, leader_state, changes, generation)
            if changes.fence:
                try:
                    self._fencer.fence(changes.fence)
                except ControllerError:
                    self.drop_state()  # planned but not written: the next reconcile plans again
                    raise
            if ops:
                self.commit(ops, [self.layout.live_worker(worker) for worker in sorted(changes.fence)], epoch)
            leader_state.applied(changes, generation)
            if changes.ideal:
                self.publish_ideal()
            if changes.ideal or self._shares is None or self.budgets():
                self._write_shares(leader_state, epoch)
            self.departed_at = dict(leader_state.departed_at)
            for state, count in leader_state.state_counts.items():
                self._metrics.partitions.labels(state).set(count)
            # What an operator chose, for the alerts to leave out: paused partitions, and those cordons left unassigned.
            self._publish_paused(leader_state)
            self._metrics.cordoned_unassigned.set(leader_state.cordoned_unassigned)
            self._metrics.held_twice.set(leader_state.held_twice)
            for worker, until in changes.retained_until.items():
                self._schedule(f"failover-{worker}", max(0.0, until - now) + 0.05)
            if changes.moved:
                log.info(
                    "reconciled: %d partitions moved%s",
                    changes.moved,
                    " (rebalance)" if rebalance else " (balance by load)" if moves else "",
                )
            self._metrics.reconcile_seconds.observe(time.perf_counter() - started)
            return changes

    def _publish_paused(self, leader_state: LeaderState) -> None:
        """The paused partitions to the metrics, listed again only when the controls or the partition
        count of a paused topic changed (a whole paused topic may have many)."""
        controls = self.controls
        counts = tuple(
            (route, topic, state.partitions if (state := leader_state.ideal.get(TopicKey(route, topic))) else None)
            for route, topics in controls.paused.items()
            for topic in topics
        )
        if self._paused_from is None or self._paused_from[0] is not controls or self._paused_from[1] != counts:
            self._paused_from = (controls, counts)
            self._metrics.set_paused(controls.paused_partitions(leader_state.ideal))

    def _load_moves(self, leader_state: LeaderState, now: float) -> dict[PartitionKey, str]:
        """The balance by load's moves among the active workers (live, not leaving)."""
        leaving = {w for w, status in leader_state.statuses.items() if status.leaving}
        eligible = set(leader_state.live) - leaving
        holding = {p: w for w, partitions in leader_state.holding().items() for p in partitions}
        moves = self.balancer.plan(holding, eligible, now)
        if moves:
            log.info("balance by load: %s", describe_moves(holding, moves, self.balancer.weights(holding, eligible)))
        return moves

    def _fed_state(self, epoch: int) -> LeaderState:
        """The leader state, read from ZooKeeper when there is none (in the lead of ``epoch``), with
        what the watches saw since.

        The lead may end on the election's thread while this reads (that drops the leader state): what
        was read is kept only if the lead of ``epoch`` still runs, else this raises :class:`NotLeader`."""
        leader_state = self._state
        if leader_state is None:
            self._watches.forget()
            started = time.perf_counter()
            # The views are the leader's own function of the statuses: rewritten at the first
            # reconcile rather than read (half the nodes of a takeover read).
            leader_state = LeaderState(self.store.snapshot(read_views=False), self.departed_at)
            for worker, reported in leader_state.statuses.items():
                self.balancer.observe(worker, reported, self._clock())
            self._read_controls()
            leader_state.set_cordoned(frozenset(self.controls.cordoned), frozenset(self.controls.drained()))
            self._keep_state(leader_state, epoch)
            self.publish_ideal()
            log.info(
                "read the state: %d topics, %d workers in %.2fs",
                len(leader_state.ideal),
                len(leader_state.live),
                time.perf_counter() - started,
            )
        live, statuses = self._watches.take()
        if live is not None and live != set(leader_state.live):
            infos = {w: info for w, info in leader_state.live.items() if w in live}
            new = self.store.data_many(self.layout.live_worker(w) for w in live - set(infos))
            for worker in live - set(infos):
                got = new.get(self.layout.live_worker(worker))
                if got is not None:
                    infos[worker] = WorkerInfo.from_bytes(got[0]) or WorkerInfo(worker, "?", 0)
            leader_state.set_live(infos)
        if len(self._parsed_keys) > MAX_PARSED_KEYS:
            self._parsed_keys = {}  # topics came and went: start over rather than grow forever
        now = self._clock()
        for worker, data in statuses.items():
            status = None if data is None else WorkerStatus.from_bytes(data, self._parsed_keys)
            leader_state.set_status(worker, status)
            self.balancer.observe(worker, status, now)
        return leader_state

    # -- an operator's controls ----------------------------------------------------------------

    def autobalancing(self) -> bool:
        enabled = self.controls.autobalancing
        return self.config.controller.autobalancing if enabled is None else enabled

    def budgets(self) -> dict[str, fleet_controls.Throttle]:
        """Each throttled route's budget: the run-time one, else the config's."""
        return lead_controls.budgets(self.config, self.controls)

    def set_controls(self, controls: Controls) -> None:
        """The controls this controller just wrote (call with the lock); the next reconcile applies them."""
        self.controls = controls
        leader_state = self._state
        if leader_state is not None:
            leader_state.set_cordoned(frozenset(controls.cordoned), frozenset(controls.drained()))

    def _read_controls(self) -> None:
        self.controls, self._shares, self._shares_exist = lead_controls.read_controls(self.store, self.layout)

    def _write_shares(self, leader_state: LeaderState, epoch: int) -> None:
        """Writes each worker's part of the throttled routes' budgets when it changed (fenced).

        With ``balance: load`` the parts follow the partitions' measured demand
        (:mod:`common.core.operate.load_shares`), and parts within a small tolerance of those written
        are kept: demand moves a little at every load report. With ``balance: count``, partition counts."""
        budgets = self.budgets()
        holding = {p: w for w, held in leader_state.holding().items() for p in held} if budgets else {}
        if self._by_load:
            wanted = load_shares.shares_by_load(budgets, holding, self.balancer.demand(holding) if budgets else {})
            if self._shares is not None and self._shares_exist and load_shares.settled(self._shares, wanted):
                return
        else:
            wanted = fleet_controls.shares(budgets, holding)
        if wanted == self._shares and (self._shares_exist or not wanted):
            return
        self.ensure_path(self.layout.throttle_shares.rsplit("/", 1)[0])
        kind = OpKind.SET if self._shares_exist else OpKind.CREATE
        self.commit([Op(kind, self.layout.throttle_shares, fleet_controls.shares_to_bytes(wanted))], epoch=epoch)
        self._shares, self._shares_exist = wanted, True

    # -- the leader's writes ------------------------------------------------------------------

    def commit(self, ops: Sequence[Op], absent: Sequence[str] = (), epoch: int | None = None) -> None:
        """Writes ``ops`` fenced by this lead's election node (and while none of ``absent`` exists;
        with ``epoch``, only in that lead); any failure drops the leader state."""
        self._leadership.require_leader()
        try:
            self._leadership.commit(ops, absent, epoch)
        except BaseException:
            self.drop_state()  # some transactions may have committed: the next reconcile reads everything
            raise

    def ensure_path(self, path: str) -> None:
        """``ensure_path`` once per lead: a route's folders are never deleted while it leads."""
        if path not in self._ensured_paths:
            self._zk.ensure_path(path)
            self._ensured_paths.add(path)

    def publish_ideal(self) -> None:
        """Publishes the leader state's ideal states to the readers (call with the lock, after each change)."""
        leader_state = self._state
        self._bulk.publish(None if leader_state is None else leader_state.ideal)

    # -- topic writers (controller.lead.topic_writes) and the lock order -----------------------

    @contextmanager
    def topic_writer(self, reconcile: bool = True, beside_bulk: bool = False) -> Iterator[TopicWriter]:
        """Topic writes through the leader state, with ``lock`` held; a reconcile follows when they
        committed and ``reconcile``. ``beside_bulk`` holds the bulk lock too (after ``lock``) while the
        block runs, so no bulk request writes between what the block read and what it writes."""
        with self.lock:
            writer = TopicWriter(self)
            if beside_bulk:
                with self._bulk.holding():
                    yield writer
            else:
                yield writer
            if writer.committed and reconcile:
                self.reconcile()

    @contextmanager
    def bulk_topic_writer(self) -> Iterator[TopicWriter | None]:
        """Bulk topic writes holding the bulk lock only: a running reconcile does not hold them up.
        None when this leader has no leader state yet (then :meth:`topic_writer` with
        ``reconcile=False`` reads it)."""
        with self._bulk.holding():
            yield TopicWriter(BulkLedger(self, self._bulk)) if self.has_state() else None

    def has_state(self) -> bool:
        """Whether this leader has its leader state (then bulk whitelisting need not take ``lock``)."""
        return self._bulk.published() is not None and self._state is not None

    def _take_pending(self) -> None:
        """With ``lock`` just taken: the leader state gets the topics bulk whitelisting wrote since."""
        taken = self._bulk.take_pending()
        if not taken:
            return
        leader_state = self._state
        if leader_state is None:
            return  # the next reconcile reads ZooKeeper, where they are
        for key, state in taken.items():
            # A key the leader state has already came from a read of ZooKeeper after the write: newer.
            if key not in leader_state.ideal:
                leader_state.put_topic(key, state, 0)
        self.publish_ideal()  # they stay visible (a duplicate bulk request must see them)

    # -- the topic ledger of writes with ``lock`` held (controller.lead.topic_writes.TopicLedger) --

    def known_topic(self, key: TopicKey) -> IdealState | None:
        """The topic's ideal state as the leader knows it now; None when it is not mirrored."""
        return self.ideal_state(key.route, key.topic)

    def topic_version(self, key: TopicKey) -> int:
        """The topic node's version (for a conditional set); -1 when there is none."""
        leader_state = self.leader_state()
        if leader_state is not None and key in leader_state.ideal_versions:
            return leader_state.ideal_versions[key]
        got = self.store.data(self.layout.topic(key.route, key.topic))
        return -1 if got is None else int(got[1])

    def removed_topics_of(self, route: str) -> set[str]:
        """The topics of ``route`` removed through ``DELETE`` (their markers)."""
        return set(self.store.children(f"{self.layout.removed}/{route}"))

    def ensure_route(self, route: str) -> None:
        """The route's folder of topic nodes exists (once per lead)."""
        self.ensure_path(self.layout.route_topics(route))

    def record_topics(self, changes: Sequence[TopicChange]) -> None:
        """Topic writes just committed with ``lock`` held go into the leader state (none: read at the
        next reconcile) and out to the readers."""
        leader_state = self._state
        if leader_state is not None:
            for key, state, version in changes:
                leader_state.put_topic(key, state, version)
        self.publish_ideal()

    # -- reads: the leader state on the leader, ZooKeeper elsewhere ----------------------------

    def leader_state(self) -> LeaderState | None:
        """The leader state when this controller leads and has read it (call with the lock held), else None."""
        return self._state if self._leadership.state == LEADING else None

    def ideal_state(self, route: str, topic: str) -> IdealState | None:
        with self.lock:
            leader_state = self.leader_state()
            if leader_state is not None:
                return leader_state.ideal.get(TopicKey(route, topic))
        state: IdealState | None = self.store.ideal_state(route, topic)
        return state

    def ideal_states(self) -> Mapping[TopicKey, IdealState]:
        """Every ideal state; on the leader the leader state's as of its last change, without waiting for
        the lock (the observer, the lag job and GET /topics never wait behind a long reconcile)."""
        published = self._bulk.published()
        if published is not None and self._leadership.state == LEADING and self._state is not None:
            return published
        ideal, _ = self.store.ideal_states()
        return dict(ideal)

    def external_view(self, route: str, topic: str) -> ExternalView | None:
        with self.lock:
            leader_state = self.leader_state()
            if leader_state is not None:
                return leader_state.external.get(TopicKey(route, topic))
        stored: ExternalView | None = self.store.external_view(route, topic)
        return stored

    def removed_topics(self) -> set[TopicKey]:
        """Topics removed through ``DELETE`` (the observer does not whitelist them again)."""
        return {
            TopicKey(route.name, topic) for route in self.config.routes for topic in self.removed_topics_of(route.name)
        }


MOVES_LOGGED = 20
"""At most this many of one load-balance run's moves are named in its log line (the rest are counted)."""


def describe_moves(
    holding: Mapping[PartitionKey, str], moves: Mapping[PartitionKey, str], rates: Mapping[PartitionKey, Rate]
) -> str:
    """One log line for a load-balance run: each worker's measured bytes/s, and the moves with their rates."""
    loads: dict[str, int] = {}
    for partition, worker in holding.items():
        loads[worker] = loads.get(worker, 0) + rates.get(partition, Rate()).bytes_per_s
    named = [
        f"{partition} {holding.get(partition, '-')}->{worker} ({rates.get(partition, Rate()).bytes_per_s} B/s)"
        for partition, worker in sorted(moves.items())
    ]
    more = f" and {len(named) - MOVES_LOGGED} more" if len(named) > MOVES_LOGGED else ""
    worker_loads = ", ".join(f"{worker} {load}" for worker, load in sorted(loads.items()))
    return f"worker bytes/s {worker_loads}; moving {', '.join(named[:MOVES_LOGGED])}{more}"
