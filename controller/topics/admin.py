"""Topic administration: the leader's fenced commands on the ideal state, and the observer's writes.

Owns no state: every command takes typed requests (:class:`controller.topics.spec.TopicSpec`, well
formed already) and checks the domain's rules (:class:`BadRequest` for an internal topic or a count the
source does not have, :class:`Conflict`, :class:`NotFound`), takes the reconciler's lock, requires the
lead, writes its ideal-state nodes in one fenced batch, tells the leader state, and reconciles once, so the new
partitions are assigned before the command answers. A bulk ``POST /topics`` is the exception:
it takes only the reconciler's bulk lock, never waits behind a running reconcile, and
queues the reconcile that assigns its topics, so bulk requests sent one after another share
reconciles (the leader state takes its topics when the next reconcile takes the lock).
``POST /topics``, ``PUT /topics``, ``DELETE /topics/<t>``, ``POST /instances`` (rebalance) and the
``observe`` job come here.
Every command answers with data (:class:`controller.topics.reads.TopicView`, the ideal states it
created, :class:`TopicDeleted`, :class:`Rebalanced`); :mod:`controller.api.rest_json`
shapes the JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from kazoo.client import KazooClient

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.model import IdealState, PartitionKey, TopicKey, encode
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import BadRequest, Conflict, NotFound
from ferry.controller.failover import guard as failover_guard
from ferry.controller.kafka_meta import ClusterMetadata
from ferry.controller.lead.leadership import Leadership
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.lead.store import Op
from ferry.controller.lead.topic_writes import TopicChange, TopicWriter
from ferry.controller.topics import observer
from ferry.controller.topics.progress import OffsetSample
from ferry.controller.topics.reads import ReadSide, TopicView, select_routes
from ferry.controller.topics.spec import TopicSpec

log = logging.getLogger(__name__)


class TopicDeleted(NamedTuple):
    """``topic`` is no longer mirrored on ``routes``."""

    topic: str
    routes: tuple[str, ...]


class Rebalanced(NamedTuple):
    """A rebalance ran now; ``moved`` partitions changed worker."""

    moved: int


class TopicAdmin:
    """The leader's topic commands; see the module docstring."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        leadership: Leadership,
        reconciler: Reconciler,
        kafka: ClusterMetadata,
        reads: ReadSide,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self._zk = zk
        self._layout = layout
        self._leadership = leadership
        self._reconciler = reconciler
        self._kafka = kafka
        self._reads = reads
        self._clock = clock

    def add_topic(self, spec: TopicSpec, route: str | None = None) -> TopicView:
        """Whitelists ``spec.topic`` on every route (or ``route``); its partitions are assigned at once."""
        self.add_topics([spec], route, assign_now=True)
        return self._reads.topic_view(spec.topic, route)

    def add_topics(
        self, specs: Sequence[TopicSpec], route: str | None = None, assign_now: bool = False
    ) -> list[IdealState]:
        """Whitelists many topics in one write and one reconcile.

        All or nothing: any internal, twice listed, already mirrored or missing topic refuses the whole
        request. A topic's ``start`` stands in for the route's ``start`` for this topic.
        Returns the ideal states created (route by route, topics in request order), before assignment.
        The reconcile that assigns them is queued (:meth:`Reconciler.request_reconcile`), not run in
        the request: bulk requests that arrive while one runs share the next run, so whitelisting
        N topics in bulk rewrites the workers' assignments a few times, not once per request.
        ``assign_now`` (one topic, whose answer shows its assignment) runs it in the request.
        """
        wanted_counts: dict[str, int | None] = {}
        starts: dict[str, str | int] = {}
        for spec in specs:
            _refuse_internal(spec.topic)
            if spec.topic in wanted_counts:
                raise BadRequest(f"topic {spec.topic!r} is listed twice")
            if spec.num_partitions is None and not self._checks_source:
                raise BadRequest("numPartitions is required")
            wanted_counts[spec.topic] = spec.num_partitions
            if spec.start is not None:
                starts[spec.topic] = spec.start
        routes = select_routes(self.config, route)
        self._leadership.require_leader()  # a standby refuses before it asks the source anything
        counts = self._mirrored_counts(routes, wanted_counts)  # before any lock: it may ask the source
        reconciler = self._reconciler
        if assign_now:
            with reconciler.topic_writer() as writer:
                return self._whitelist(writer, routes, counts, starts)
        written: list[IdealState] | None = None
        with reconciler.bulk_topic_writer() as bulk:  # a running reconcile does not hold the request up
            if bulk is not None:
                written = self._whitelist(bulk, routes, counts, starts)
        if written is None:  # no leader state yet (a lead's first moments): take the lock; it gets read
            with reconciler.topic_writer(reconcile=False) as writer:
                written = self._whitelist(writer, routes, counts, starts)
        reconciler.request_reconcile()
        return written

    def _mirrored_counts(
        self, routes: list[RouteConfig], wanted_counts: dict[str, int | None]
    ) -> dict[str, dict[str, int]]:
        """Route -> topic -> how many partitions to mirror, checked against the source when configured.

        A bulk request asks each source cluster for its topics once (one metadata request), not
        once per topic: 1,000 topics cost one round trip.
        """
        if not self._checks_source:
            return {r.name: {t: c for t, c in wanted_counts.items() if c is not None} for r in routes}
        at_source_of: dict[str, dict[str, int]] = {}
        counts: dict[str, dict[str, int]] = {}
        for r in routes:
            if len(wanted_counts) > 1 and r.source not in at_source_of:
                at_source_of[r.source] = self._kafka.topics(r.source)
            at_source = at_source_of.get(r.source, {})
            counts[r.name] = {}
            for topic, count in wanted_counts.items():
                partitions = at_source.get(topic)
                if partitions is None:  # not listed (missing, or in error: asked alone, it says which)
                    partitions = self._kafka.partition_count(r.source, topic)
                counts[r.name][topic] = _checked_count(r, topic, count, partitions)
        return counts

    def _whitelist(
        self,
        writer: TopicWriter,
        routes: list[RouteConfig],
        counts: dict[str, dict[str, int]],
        starts: Mapping[str, str | int],
    ) -> list[IdealState]:
        """Writes the topics' nodes and their starts (fenced, one transaction when they fit) through ``writer``."""
        layout = self._layout
        self._leadership.require_leader()
        for r in routes:
            for topic in counts[r.name]:
                if writer.known(TopicKey(r.name, topic)) is not None:
                    raise Conflict(f"topic {topic!r} is already mirrored on route {r.name}")
        ops, created = [], []
        for r in routes:
            removed = writer.removed(r.name)
            writer.ensure_route(r.name)
            for topic, count in counts[r.name].items():
                state = IdealState(r.name, topic, count)
                ops.append(Op(OpKind.CREATE, layout.topic(r.name, topic), state.to_bytes()))
                created.append(state)
                if topic in removed:
                    ops.append(Op(OpKind.DELETE, layout.removed_topic(r.name, topic)))
            ops.extend(self._start_ops(r.name, {t: s for t, s in starts.items() if t in counts[r.name]}))
        writer.commit(ops, [TopicChange(TopicKey(state.route, state.topic), state, 0) for state in created])
        topics = {state.topic for state in created}
        if len(topics) == 1:
            log.info("whitelisted topic %s on %s", next(iter(topics)), [r.name for r in routes])
        else:
            log.info("whitelisted %d topics on %s", len(topics), [r.name for r in routes])
        return created

    def _start_ops(self, route: str, starts: Mapping[str, str | int]) -> list[Op]:
        """The writes of the topics' start nodes on ``route`` (a node left over is overwritten)."""
        if not starts:
            return []
        layout = self._layout
        self._zk.ensure_path(layout.topic_starts(route))
        ops = []
        for topic, start in starts.items():
            path = layout.topic_start(route, topic)
            data = encode({"start": start})
            ops.append(Op(OpKind.SET, path, data, -1) if self._zk.exists(path) else Op(OpKind.CREATE, path, data))
        return ops

    def expand_topic(self, topic: str, num_partitions: int, route: str | None = None) -> TopicView:
        """Raises the partition count Ferry mirrors (never lowers it); new partitions are assigned at once."""
        _refuse_internal(topic)
        count = num_partitions
        with self._reconciler.topic_writer() as writer:
            self._leadership.require_leader()
            ops = []
            grown: list[TopicChange] = []
            mirrored = False
            for r in select_routes(self.config, route):
                key = TopicKey(r.name, topic)
                state = writer.known(key)
                if state is None:
                    continue
                mirrored = True
                if count < state.partitions:
                    raise BadRequest(
                        f"topic {topic!r} has {state.partitions} partitions; Kafka cannot shrink it to {count}"
                    )
                self._mirrored_count(r, topic, count)
                if count > state.partitions:
                    expanded = IdealState(r.name, topic, count, dict(state.assignment))
                    version = writer.version(key)
                    ops.append(Op(OpKind.SET, self._layout.topic(r.name, topic), expanded.to_bytes(), version))
                    grown.append(TopicChange(key, expanded, version + 1))
            if not mirrored:
                raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
            writer.commit(ops, grown)
        return self._reads.topic_view(topic, route)

    def delete_topic(self, topic: str, route: str | None = None) -> TopicDeleted:
        """Stops mirroring ``topic``; workers release its partitions. The destination topic stays."""
        layout = self._layout
        with self._reconciler.topic_writer() as writer:
            self._leadership.require_leader()
            ops = []
            deleted = []
            for r in select_routes(self.config, route):
                if writer.known(TopicKey(r.name, topic)) is not None:
                    ops.append(Op(OpKind.DELETE, layout.topic(r.name, topic)))
                    deleted.append(TopicKey(r.name, topic))
                    # Remembered, so the observer does not whitelist it again until someone POSTs it.
                    self._zk.ensure_path(f"{layout.removed}/{r.name}")
                    removed = layout.removed_topic(r.name, topic)
                    if not self._zk.exists(removed):
                        ops.append(Op(OpKind.CREATE, removed, encode({"at": self._clock()})))
                    if self._zk.exists(layout.topic_start(r.name, topic)):  # its start goes with it
                        ops.append(Op(OpKind.DELETE, layout.topic_start(r.name, topic)))
            if not ops:
                raise NotFound(f"topic {topic!r} is not mirrored by Ferry")
            writer.commit(ops, [TopicChange(key, None, 0) for key in deleted])
            log.info("stopped mirroring topic %s", topic)
        return TopicDeleted(topic, tuple(key.route for key in deleted))

    def keep_source_ends(self, samples: Mapping[PartitionKey, OffsetSample]) -> None:
        """The lag job's source log ends, kept in ZooKeeper (:mod:`controller.failover.guard`)."""
        failover_guard.keep_source_ends(self._zk, self._layout, self._reconciler, samples, self._clock())

    def rebalance_now(self) -> Rebalanced:
        """Reconciles now, moving partitions to even out the workers."""
        changes = self._reconciler.reconcile(rebalance=True)  # it takes the lock
        return Rebalanced(changes.moved)

    # -- the observer (job ``observe``) -------------------------------------------------------

    def follow_sources(self) -> observer.Decisions:
        """Writes what the observer decided: whitelists new matching source topics, expands grown
        ones (fenced writes and a reconcile), makes destination configs follow.

        One metadata request per source cluster (not one per topic), one write and one reconcile
        for everything it decided. Topics Ferry mirrors but the source does not have (e.g. a
        benchmark's topics that live only in ZooKeeper) are left alone.
        """
        reconciler, layout = self._reconciler, self._layout
        stopped = failover_guard.stop_routes(self._zk, layout, reconciler)  # failed-over routes: copied by nobody
        routes = [r for r in self.config.routes if r.name not in stopped]
        mirrored_routes = {k.route for k in reconciler.ideal_states()}
        source_topics = {r.name: self._kafka.topics(r.source) for r in routes if r.include or r.name in mirrored_routes}
        removed = reconciler.removed_topics()
        ideal = reconciler.ideal_states()
        decisions = observer.decide(routes, source_topics, ideal, removed)
        at_source = {TopicKey(route, t) for route, topics in source_topics.items() for t in topics}
        if not decisions.add and not decisions.expand:  # the usual case: no need to wait for the lock
            self._follow_configs(set(ideal) & at_source)
            return decisions
        # Beside bulk POST /topics, which creates topic nodes without the reconciler's lock.
        with reconciler.topic_writer(beside_bulk=True) as writer:
            self._leadership.require_leader()
            ideal = reconciler.ideal_states()  # again, under the locks: what the writes start from
            decisions = observer.decide(routes, source_topics, ideal, removed)
            ops: list[Op] = []
            written: list[TopicChange] = []
            for key, partitions in sorted(decisions.add.items()):
                writer.ensure_route(key.route)
                state = IdealState(key.route, key.topic, partitions)
                ops.append(Op(OpKind.CREATE, layout.topic(key.route, key.topic), state.to_bytes()))
                written.append(TopicChange(key, state, 0))
            for key, partitions in sorted(decisions.expand.items()):
                old = ideal[key]
                grown = IdealState(key.route, key.topic, partitions, dict(old.assignment))
                version = writer.version(key)
                ops.append(Op(OpKind.SET, layout.topic(key.route, key.topic), grown.to_bytes(), version))
                written.append(TopicChange(key, grown, version + 1))
            writer.commit(ops, written)
            if ops:
                log.info(
                    "observer: whitelisted %d topics %s, expanded %s",
                    len(decisions.add),
                    sorted(map(str, decisions.add))[:20],
                    {str(k): n for k, n in decisions.expand.items()},
                )
        self._follow_configs((set(ideal) | set(decisions.add)) & at_source)
        return decisions

    def _follow_configs(self, topics: set[TopicKey]) -> None:
        """Only for topics that exist at the source (the caller filters)."""
        for route in self.config.routes:
            names = sorted(k.topic for k in topics if k.route == route.name)
            if not names:
                continue
            source = self._kafka.topic_configs(route.source, names)
            renamed = {topic: route.destination_topic(topic) for topic in names}  # common.core.naming
            destination = self._kafka.topic_configs(route.destination, sorted(renamed.values()))
            replicas = self._kafka.replication_factors(route.destination, renamed.values())
            for topic in names:
                target = renamed[topic]
                if topic not in source or target not in destination:
                    continue  # the destination topic does not exist yet: its worker creates it
                changes = observer.config_changes(
                    source[topic], destination[target], route.config_exclude, replicas.get(target, 0)
                )
                if changes:
                    self._kafka.set_topic_configs(route.destination, target, changes)
                    log.info("observer: %s on %s now follows the source: %s", target, route.destination, changes)

    # -- partition counts ---------------------------------------------------------------------

    @property
    def _checks_source(self) -> bool:
        return self.config.controller.check_source_topics

    def _mirrored_count(self, route: RouteConfig, topic: str, count: int | None) -> int:
        """How many partitions of ``topic`` to mirror: ``count``, checked against the source when configured."""
        if not self._checks_source:
            assert count is not None  # required by add_topics then
            return count
        return _checked_count(route, topic, count, self._kafka.partition_count(route.source, topic))


def _checked_count(route: RouteConfig, topic: str, count: int | None, at_source: int | None) -> int:
    """``count`` (or every partition) of a topic with ``at_source`` partitions at the source (None: missing)."""
    if at_source is None:
        raise NotFound(f"topic {topic!r} does not exist on the source cluster {route.source!r}")
    wanted = count or at_source
    if wanted > at_source:
        raise BadRequest(f"numPartitions {wanted} exceeds the {at_source} partitions of {topic!r} on {route.source}")
    return wanted


def _refuse_internal(topic: str) -> None:
    """Internal topics (``__consumer_offsets``, ...) are Kafka's own: Ferry does not mirror them."""
    if topic.startswith("__"):
        raise BadRequest(f"{topic!r} is an internal topic; Ferry does not mirror internal topics")
