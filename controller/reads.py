"""The read side: what any controller (leader or standby) answers about Ferry's state.

Owns no state. On the leader it reads the reconciler's model (never waiting behind a long
reconcile for the ideal states), on a standby ZooKeeper; an unreachable ZooKeeper is
:class:`Unavailable` (503). Offsets are read from Kafka now, at the source. Offsets come back as
data (:class:`controller.progress.OffsetSample` per partition); their JSON is shaped in
:mod:`controller.rest`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from common.config import FerryConfig
from common.diff import compare, summarize
from common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    WorkerInfo,
    WorkerStatus,
    count_states,
    decode,
)
from common.zk_layout import ZkLayout
from controller.errors import NotFound, Unavailable
from controller.kafka_meta import ClusterMetadata
from controller.leadership import Leadership
from controller.metrics import ControllerMetrics
from controller.progress import OffsetSample
from controller.reconciler import Reconciler, select_routes


class ReadSide:
    """See the module docstring; ``before_scrape`` refreshes metrics computed on demand."""

    def __init__(self, config: FerryConfig, zk: KazooClient, layout: ZkLayout, leadership: Leadership,
                 reconciler: Reconciler, kafka: ClusterMetadata, metrics: ControllerMetrics,
                 before_scrape: Callable[[], None]) -> None:
        self.config = config
        self._zk = zk
        self._layout = layout
        self._leadership = leadership
        self._reconciler = reconciler
        self._kafka = kafka
        self._metrics = metrics
        self._before_scrape = before_scrape

    def health(self) -> dict[str, Any]:
        leader = self._leadership.leader()
        return {
            "status": "ok" if self._zk.connected else "zookeeper unreachable",
            "id": self._leadership.controller_id,
            "state": self._leadership.state,
            "leader": self._leadership.is_leader(),
            "leaderId": leader.get("id") if leader else None,
            "leaderUrl": leader.get("rest_url") if leader else None,
        }

    def metrics_text(self) -> bytes:
        self._before_scrape()
        return self._metrics.text()

    def list_topics(self) -> list[dict[str, Any]]:
        ideal = self._reconciler.ideal_states()
        return [
            {"topic": key.topic, "route": key.route, "partitions": state.partitions}
            for key, state in sorted(ideal.items())
        ]

    def topic_view(self, topic: str, route: str | None = None) -> dict[str, Any]:
        routes = select_routes(self.config, route)
        ideal: dict[str, IdealState] = {}
        external: dict[str, ExternalView] = {}
        for r in routes:
            state = self._reconciler.ideal_state(r.name, topic)
            if state is not None:
                ideal[r.name] = state
                external[r.name] = self._reconciler.external_view(r.name, topic) or ExternalView(r.name, topic)
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
        reconciler = self._reconciler
        with reconciler.lock:
            model = reconciler.model()
            if model is not None:
                live, statuses = dict(model.live), dict(model.statuses)
                holding = {w: [str(p) for p in held] for w, held in model.holding().items()}
                return _instances(live, statuses, holding)
        store = reconciler.store
        live = reconciler.read(store.live_workers)
        statuses = reconciler.read(store.statuses)
        ideal, _ = reconciler.read(store.ideal_states)
        holding = {}
        for key, state in sorted(ideal.items()):
            for p, worker in sorted(state.assignment.items()):
                holding.setdefault(worker, []).append(f"{key.route}/{key.topic}/{p}")
        return _instances(live, statuses, holding)

    def validation(self) -> dict[str, Any]:
        reconciler = self._reconciler
        with reconciler.lock:
            model = reconciler.model()
            if model is not None:
                mismatches, summary = model.validation()
            else:
                store = reconciler.store
                ideal, _ = reconciler.read(store.ideal_states)
                external = reconciler.read(store.external_views)
                live = set(reconciler.read(store.live_workers))
                mismatches = compare(ideal, external, live)
                summary = summarize(ideal, external)
        return {
            "ok": not mismatches,
            "summary": summary,
            "mismatches": [m.to_json() for m in mismatches],
            "spark": self.spark_validation(),  # the last `ferry validate --store`, with checkedAt
        }

    def spark_validation(self) -> dict[str, Any] | None:
        """The last stored result of ``ferry validate --store``, or None."""
        try:
            data, _ = self._zk.get(self._layout.validation)
        except NoNodeError:
            return None
        except KazooException as exc:
            raise Unavailable(f"ZooKeeper cannot be reached: {type(exc).__name__}") from None
        stored: dict[str, Any] | None = decode(data)
        return stored

    def source_validation(self) -> dict[str, Any]:
        """uReplicator's ``/validation/srcKafka``: partition counts at the source vs the ideal state."""
        ideal = self._reconciler.ideal_states()
        problems = []
        routes = {r.name: r for r in self.config.routes}
        source_topics = {name: self._kafka.topics(r.source) for name, r in routes.items()
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
                (key.topic, p) for key, state in ideal.items() if key.route == route.name and key.topic in at_source
                and (topic is None or key.topic == topic) for p in range(min(state.partitions, at_source[key.topic]))
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
) -> dict[str, Any]:
    instances = []
    for worker, info in sorted(live.items()):
        status = statuses.get(worker)
        counts = status.state_counts() if status else count_states([])
        instances.append({
            "id": worker, "host": info.host, "pid": info.pid, "metricsUrl": info.metrics_url,
            "partitions": holding.get(worker, []),
            "online": counts[PartitionState.ONLINE], "error": counts[PartitionState.ERROR],
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
