"""The read side: what any controller (leader or standby) answers about Ferry's state.

Owns no state. On the leader it reads the reconciler's leader state (never waiting behind a long
reconcile for the ideal states), on a standby ZooKeeper; an unreachable ZooKeeper is
:class:`Unavailable` (503). Offsets are read from Kafka now, at the source. Every answer is data
(the frozen types below, model types, :class:`controller.topics.progress.OffsetSample` per partition);
their JSON is shaped in :mod:`controller.api.rest_json` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apscheduler.schedulers.base import BaseScheduler
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core.diff import Mismatch, compare, summarize
from ferry.common.core.probes import Probe, controller_liveness, controller_readiness
from ferry.common.errors import ConfigError
from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    WorkerInfo,
    WorkerStatus,
    count_states,
    decode,
)
from ferry.common.vocabulary import ControllerState, StrEnum
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import BadRequest, NotFound
from ferry.controller.failover.guard import read_state
from ferry.controller.kafka_meta import ClusterMetadata
from ferry.controller.lead.leadership import Leadership
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.metrics import ControllerMetrics
from ferry.controller.topics.progress import OffsetSample

StoredValidation = dict[str, Any]
"""The document ``ferry validate --store`` keeps in ZooKeeper (:mod:`pipeline`), served as it is."""


@dataclass(frozen=True)
class Health:
    """This controller, whether ZooKeeper answers, who leads (``leader_id``/``leader_url``: None when
    nobody), and whether its scheduler runs; its probes' answers (:mod:`common.core.probes`)."""

    zookeeper_connected: bool
    controller_id: str
    state: ControllerState
    leading: bool
    leader_id: str | None
    leader_url: str | None
    scheduler_running: bool

    def liveness(self) -> Probe:
        return controller_liveness(self.state, self.scheduler_running)

    def readiness(self) -> Probe:
        return controller_readiness(self.state, self.scheduler_running, self.zookeeper_connected)


@dataclass(frozen=True)
class RouteTopic:
    """One topic on one route: its ideal state, its external view and its name at the destination."""

    ideal: IdealState
    external: ExternalView
    destination: str  # the route's destination cluster
    destination_topic: str


@dataclass(frozen=True)
class TopicView:
    """A mirrored topic on every route that mirrors it (at least one), in route order."""

    topic: str
    routes: dict[str, RouteTopic]


@dataclass(frozen=True)
class Instance:
    """A live worker: who it is, what it holds and how its partitions fare."""

    worker_id: str
    info: WorkerInfo
    partitions: list[str]  # "<route>/<topic>/<partition>" (the model's PartitionKey text)
    online: int
    error: int
    generation: int | None  # the assignment generation it applied; None before its first status
    leaving: bool


@dataclass(frozen=True)
class Instances:
    """Live workers (by id) and departed ones still holding partitions (id -> partitions)."""

    live: list[Instance]
    departed: dict[str, list[str]]


@dataclass(frozen=True)
class Validation:
    """Ideal state vs external view now, and the last stored Spark validation (None: none stored)."""

    mismatches: list[Mismatch]
    summary: dict[str, int]
    spark: StoredValidation | None
    failover: dict[str, str] = field(default_factory=dict)  # route -> its failover state, routes not ACTIVE only
    # ONLINE partitions whose worker has something to say (records lost at the source, a destination
    # topic created again): {"route", "topic", "partition", "worker", "reason"}.
    notices: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches


class SourceProblem(StrEnum):
    """Why a mirrored topic's partition count disagrees with the source cluster."""

    MISSING = "missing at source"
    COUNT_DIFFERS = "partition count differs"


@dataclass(frozen=True)
class SourceMismatch:
    route: str
    topic: str
    ideal_partitions: int
    source_partitions: int | None  # None: the source has no such topic
    problem: SourceProblem


@dataclass(frozen=True)
class SourceValidation:
    """uReplicator's ``/validation/srcKafka``: partition counts at the source vs the ideal states."""

    topics: int  # how many topics (route, topic) were compared
    mismatches: list[SourceMismatch]
    spark: StoredValidation | None

    @property
    def ok(self) -> bool:
        return not self.mismatches


class ReadSide:
    """See the module docstring; ``before_scrape`` refreshes metrics computed on demand."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        leadership: Leadership,
        reconciler: Reconciler,
        kafka: ClusterMetadata,
        metrics: ControllerMetrics,
        scheduler: BaseScheduler,
        before_scrape: Callable[[], None],
    ) -> None:
        self.config = config
        self._zk = zk
        self._scheduler = scheduler  # its jobs are the leader's; the probes ask only whether it runs
        self._layout = layout
        self._leadership = leadership
        self._reconciler = reconciler
        self._kafka = kafka
        self._metrics = metrics
        self._before_scrape = before_scrape

    def health(self) -> Health:
        """Answers at once, whatever ZooKeeper does: the leader node is read only while connected (a
        read while kazoo reconnects would wait until it has reconnected)."""
        connected = bool(self._zk.connected)
        leader = self._leadership.leader() if connected else None
        return Health(
            zookeeper_connected=connected,
            controller_id=self._leadership.controller_id,
            state=self._leadership.state,
            leading=self._leadership.is_leader(),
            leader_id=leader.get("id") if leader else None,
            leader_url=leader.get("rest_url") if leader else None,
            scheduler_running=bool(self._scheduler.running),
        )

    def metrics_text(self) -> bytes:
        self._before_scrape()
        return self._metrics.text()

    def list_topics(self) -> list[IdealState]:
        """Every mirrored (route, topic), in key order."""
        ideal = self._reconciler.ideal_states()
        return [state for _, state in sorted(ideal.items())]

    def topic_view(self, topic: str, route: str | None = None) -> TopicView:
        """``topic`` on every route (or ``route``) that mirrors it; NotFound when none does."""
        per_route: dict[str, RouteTopic] = {}
        for r in select_routes(self.config, route):
            state = self._reconciler.ideal_state(r.name, topic)
            if state is not None:
                external = self._reconciler.external_view(r.name, topic) or ExternalView(r.name, topic)
                per_route[r.name] = RouteTopic(state, external, r.destination, r.destination_topic(topic))
        if not per_route:
            raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
        return TopicView(topic, per_route)

    def instances(self) -> Instances:
        reconciler = self._reconciler
        with reconciler.lock:
            leader_state = reconciler.leader_state()
            if leader_state is not None:
                live, statuses = dict(leader_state.live), dict(leader_state.statuses)
                holding = {w: [str(p) for p in held] for w, held in leader_state.holding().items()}
                return _instances(live, statuses, holding)
        store = reconciler.store
        live = store.live_workers()
        statuses = store.statuses()
        ideal, _ = store.ideal_states()
        holding = {}
        for key, state in sorted(ideal.items()):
            for p, worker in sorted(state.assignment.items()):
                holding.setdefault(worker, []).append(f"{key.route}/{key.topic}/{p}")
        return _instances(live, statuses, holding)

    def validation(self) -> Validation:
        reconciler = self._reconciler
        with reconciler.lock:
            leader_state = reconciler.leader_state()
            if leader_state is not None:
                mismatches, summary = leader_state.validation()
                external = dict(leader_state.external)
            else:
                store = reconciler.store
                ideal, _ = store.ideal_states()
                external = store.external_views()
                live = set(store.live_workers())
                mismatches = compare(ideal, external, live)
                summary = summarize(ideal, external)
        # Few entries carry a reason: pick them out first, sort only those (160,000 partitions: 11 ms, not 56).
        found = [
            (key, partition, entry)
            for key, view in external.items()
            for partition, entry in view.partitions.items()
            if entry.get("reason") and entry.get("state") == "ONLINE"
        ]
        notices = [
            {
                "route": key.route,
                "topic": key.topic,
                "partition": partition,
                "worker": entry.get("worker"),
                "reason": entry["reason"],
            }
            for key, partition, entry in sorted(found, key=lambda f: (f[0], f[1]))
        ]
        return Validation(list(mismatches), summary, self.spark_validation(), self.failover_states(), notices)

    def failover_states(self) -> dict[str, str]:
        """Routes that are not ACTIVE -> their failover state (:mod:`controller.failover.states`)."""
        try:
            names = self._zk.get_children(self._layout.failovers)
        except NoNodeError:
            return {}
        return {name: read_state(self._zk, self._layout, name)[0].state for name in sorted(names)}

    def spark_validation(self) -> StoredValidation | None:
        """The last stored result of ``ferry validate --store``, or None."""
        try:
            data, _ = self._zk.get(self._layout.validation)
        except NoNodeError:
            return None
        stored: StoredValidation | None = decode(data)
        return stored

    def source_validation(self) -> SourceValidation:
        """uReplicator's ``/validation/srcKafka``: partition counts at the source vs the ideal state."""
        ideal = self._reconciler.ideal_states()
        problems: list[SourceMismatch] = []
        routes = {r.name: r for r in self.config.routes}
        source_topics = {
            name: self._kafka.topics(r.source) for name, r in routes.items() if any(k.route == name for k in ideal)
        }
        for key, state in sorted(ideal.items()):
            route = routes.get(key.route)
            if route is None:
                continue
            at_source = source_topics[key.route].get(key.topic)
            if at_source != state.partitions:
                problems.append(
                    SourceMismatch(
                        key.route,
                        key.topic,
                        state.partitions,
                        at_source,
                        SourceProblem.MISSING if at_source is None else SourceProblem.COUNT_DIFFERS,
                    )
                )
        return SourceValidation(len(ideal), problems, self.spark_validation())

    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[PartitionKey, OffsetSample]:
        """Committed (route's group, at the source) and log-end offsets of mirrored partitions, read now.

        Only partitions of topics the source has (one metadata request per route): a topic that
        exists only in ZooKeeper has no offsets, and asking for them would wait for timeouts.
        """
        ideal = self._reconciler.ideal_states()
        if topic is not None and not any(k.topic == topic for k in ideal):
            raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
        result: dict[PartitionKey, OffsetSample] = {}
        for route in self.config.routes:
            if not any(k.route == route.name for k in ideal):
                continue
            at_source = self._kafka.topics(route.source)
            wanted = [
                (key.topic, p)
                for key, state in ideal.items()
                if key.route == route.name and key.topic in at_source and (topic is None or key.topic == topic)
                for p in range(min(state.partitions, at_source[key.topic]))
                if partition is None or p == partition
            ]
            if not wanted:
                continue
            ends = self._kafka.end_offsets(route.source, wanted)
            committed = self._kafka.committed(route.source, route.group_id, wanted)
            for t, p in wanted:
                if (t, p) in ends:
                    result[PartitionKey(route.name, t, p)] = OffsetSample(committed.get((t, p)), ends[(t, p)])
        if topic is not None and partition is not None and not result:
            raise NotFound(f"partition {partition} of {topic!r} is not mirrored by Ferry")
        return result

    def destination_topic(self, route: str, topic: str) -> str:
        """The name of ``topic`` on ``route``'s destination (the topic itself for identity naming)."""
        for candidate in self.config.routes:
            if candidate.name == route:
                return candidate.destination_topic(topic)
        return topic  # a route no longer configured: its topics keep their names


def _instances(
    live: dict[str, WorkerInfo], statuses: dict[str, WorkerStatus], holding: dict[str, list[str]]
) -> Instances:
    instances = []
    for worker, info in sorted(live.items()):
        status = statuses.get(worker)
        counts = status.state_counts() if status else count_states([])
        instances.append(
            Instance(
                worker,
                info,
                holding.get(worker, []),
                counts[PartitionState.ONLINE],
                counts[PartitionState.ERROR],
                status.generation if status else None,
                bool(status and status.leaving),
            )
        )
    departed = {w: parts for w, parts in sorted(holding.items()) if w not in live}
    return Instances(instances, departed)


def select_routes(config: FerryConfig, route: str | None) -> list[RouteConfig]:
    """Every route, or the one named ``route`` (:class:`BadRequest` when it is not configured)."""
    try:
        return config.routes_named(route)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None
