"""Fakes shared by the tests: one clock, Ferry's Kafka clients, as Ferry's own adapters hand them out.

Tests replace only Ferry's adapters (``common.kafka.clients``, the controller parts the REST layer
asks), never library internals. The Kafka fakes hand back plain messages, metadata and delivery
reports so the copy path, the watermark and the ERROR states can be checked without servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.common.core.heartbeat import HeartbeatView
from ferry.common.core.offset_map import MAP_TOPIC
from ferry.common.core.operate.controls import Controls, Throttle
from ferry.common.model import ExternalView, IdealState, PartitionKey
from ferry.common.vocabulary import ControllerState
from ferry.controller.api.ports import ControllerApi
from ferry.controller.errors import NotFound
from ferry.controller.failover.control import RouteFailover
from ferry.controller.failover.document import FailoverDocument, FailoverPlan, UnplannedPlan
from ferry.controller.groups.checkpoints import GroupCheckpoints
from ferry.controller.groups.translate import OffsetTranslation
from ferry.controller.operate.control import ControlsView, PausedTopic, RouteThrottleSet, WorkerControl
from ferry.controller.schemas.distributor import SchemaReport, SchemaStatus
from ferry.controller.topics.admin import Rebalanced, TopicDeleted
from ferry.controller.topics.progress import NoProgress, OffsetSample
from ferry.controller.topics.reads import Health, Instances, RouteTopic, SourceValidation, TopicView, Validation
from ferry.controller.topics.spec import TopicSpec
from ferry.controller.tree.control import TreeView

TOPIC = "orders"


class FakeClock:
    """A clock tests move by hand: call it for the time; ``sleep`` records the wait and moves it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeMessage:
    _topic: str
    _partition: int
    _offset: int
    _value: bytes = b"v"
    headers_: list[tuple[str, bytes]] | None = None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return [("h", b"1")] if self.headers_ is None else self.headers_

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_700_000_000_000 + self._offset)

    def error(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._value)


def metadata(partitions: int | None, topic: str = TOPIC, replicas: int = 1, brokers: int = 1) -> Any:
    """Metadata of a cluster of ``brokers`` brokers with ``topic`` of ``partitions`` partitions of
    ``replicas`` replicas each (None: no such topic)."""
    layout = {p: SimpleNamespace(id=p, replicas=list(range(1, replicas + 1))) for p in range(partitions or 0)}
    topics = {} if partitions is None else {topic: SimpleNamespace(partitions=layout, error=None)}
    return SimpleNamespace(topics=topics, brokers={b: SimpleNamespace(id=b) for b in range(1, brokers + 1)})


@dataclass
class FakeConsumer:
    calls: list[tuple[str, Any]]
    source_partitions: int | None = 2
    source_replicas: int = 1
    queue: list[FakeMessage] = field(default_factory=list)
    committed_offsets: dict[int, int] = field(default_factory=dict)
    destination: dict[int, list[Any]] = field(default_factory=dict)  # partition -> headers of each record
    reading: list[FakeMessage] | None = None
    read_position: int = -1001  # the look-back reader's: after its last record read (none yet: OFFSET_INVALID)

    def consume(self, num: int, timeout: float) -> list[FakeMessage]:
        if self.reading is not None:  # the look-back reader shares this fake
            batch, self.reading[:] = self.reading[:num], self.reading[num:]
            if batch:
                self.read_position = batch[-1].offset() + 1
            return batch
        batch, self.queue[:] = self.queue[:num], self.queue[num:]
        return batch

    def poll(self, timeout: float) -> FakeMessage | None:
        return self.queue.pop(0) if self.queue else None

    def list_topics(self, topic: str, timeout: float) -> Any:
        return metadata(self.source_partitions, topic=topic or TOPIC, replicas=self.source_replicas)

    def incremental_assign(self, tps: list[Any]) -> None:
        self.calls.append(("assign", sorted((tp.topic, tp.partition) for tp in tps)))

    def incremental_unassign(self, tps: list[Any]) -> None:
        self.calls.append(("unassign", sorted((tp.topic, tp.partition) for tp in tps)))

    def resume(self, tps: list[Any]) -> None:
        self.calls.append(("resume", sorted((tp.topic, tp.partition) for tp in tps)))

    def pause(self, tps: list[Any]) -> None:
        self.calls.append(("pause", sorted((tp.topic, tp.partition) for tp in tps)))

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.calls.append(("commit", sorted((tp.topic, tp.partition, tp.offset) for tp in offsets)))

    def close(self) -> None:
        self.calls.append(("close", None))

    def committed(self, tps: list[Any], timeout: float) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, -1001)) for tp in tps]

    def get_watermark_offsets(self, tp: Any, timeout: float) -> tuple[int, int]:
        # The destination partition, for the look-back: (low, high) of what the test put there.
        records = self.destination.get(tp.partition, [])
        return (0, len(records))

    def assign(self, tps: list[Any]) -> None:
        tp = tps[0]
        self.reading = [
            FakeMessage(tp.topic, tp.partition, o, headers_=h)
            for o, h in enumerate(self.destination.get(tp.partition, []))
            if o >= tp.offset
        ]

    def unassign(self) -> None:
        self.reading = None
        self.read_position = -1001

    def position(self, tps: list[Any]) -> list[Any]:
        return [TopicPartition(tp.topic, tp.partition, self.read_position) for tp in tps]


@dataclass
class FakeProducer:
    """A destination producer as librdkafka is one: a record gets the delivery callback given with it,
    else the default ``on_delivery`` when there is one, else no report; a partition's records land
    at consecutive offsets, in produce order, after whatever another writer put there (``foreign``).

    ``gapless`` (``enable.gapless.guarantee``): a record that fails makes the producer fail for good, as
    librdkafka's fatal error does: every record after it fails with ``_FATAL``, and so does ``produce``."""

    calls: list[tuple[str, Any]]
    on_delivery: Any = None  # the default delivery callback (librdkafka's dr_msg_cb), if any
    # topic, partition, nth, value, timestamp, callback
    pending: list[tuple[str, int, int, bytes, int, Any]] = field(default_factory=list)
    fail: dict[tuple[str, int, int], KafkaError] = field(
        default_factory=dict
    )  # (topic, partition, nth produce) -> error
    # (topic, partition, nth produce) -> the error produce() raises for it (refused locally: not queued).
    refuse: dict[tuple[str, int, int], KafkaError] = field(default_factory=dict)
    # (topic, partition, nth produce) -> how many records another writer puts there just before it lands.
    foreign: dict[tuple[str, int, int], int] = field(default_factory=dict)
    produced: list[tuple[str, int, bytes]] = field(default_factory=list)
    map_writes: list[tuple[bytes, bytes]] = field(default_factory=list)
    delivered: dict[tuple[str, int], int] = field(default_factory=dict)  # next destination offset
    landed: dict[tuple[str, int], dict[int, bytes]] = field(default_factory=dict)  # destination offset -> value
    map_pending: list[Any] = field(default_factory=list)  # offset-map writes' delivery callbacks
    counts: dict[tuple[str, int], int] = field(default_factory=dict)  # records produced per partition
    gapless: bool = False
    fatal: KafkaError | None = None  # set once the producer failed for good

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """confluent-kafka's signature, in its order (the copier calls it positionally)."""
        on_delivery = callback or on_delivery
        if self.fatal is not None:
            raise KafkaException(self.fatal)
        if topic == MAP_TOPIC:
            self.map_writes.append((key, value))
            self.map_pending.append(on_delivery)
            return
        nth = self.counts.get((topic, partition), 0) + 1
        refused = self.refuse.pop((topic, partition, nth), None)
        if refused is not None:
            raise KafkaException(refused)
        self.counts[(topic, partition)] = nth
        self.produced.append((topic, partition, value))
        self.pending.append((topic, partition, nth, value, timestamp, on_delivery or self.on_delivery))

    def poll(self, timeout: float) -> int:
        return self.flush(timeout)

    def flush(self, timeout: float) -> int:
        self.calls.append(("flush", len(self.pending)))
        pending, self.pending = self.pending, []
        map_pending, self.map_pending = self.map_pending, []
        for callback in map_pending:  # the offset map's writes are acknowledged like any record
            callback(None, None)
        for topic, partition, nth, value, timestamp, callback in pending:
            error = self.fail.pop((topic, partition, nth), None)
            if self.fatal is not None:
                error = self.fatal
            elif error is not None and self.gapless:
                self.fatal = KafkaError(KafkaError._FATAL, f"gap-less guarantee: {error.str()}", fatal=True)
            offset = self.delivered.get((topic, partition), 0) + self.foreign.pop((topic, partition, nth), 0)
            if error is None:
                self.delivered[(topic, partition)] = offset + 1
                self.landed.setdefault((topic, partition), {})[offset] = value
            else:
                offset = -1001  # librdkafka's OFFSET_INVALID: a failed record has no offset
                self.failed_in_transaction = True
            if callback is None:
                continue
            # As librdkafka reports it: the timestamp given (CreateTime, 1), or none (0).
            stamped = (1, timestamp) if timestamp else (0, -1)
            callback(
                error,
                SimpleNamespace(
                    topic=lambda t=topic: t,
                    partition=lambda p=partition: p,
                    offset=lambda o=offset: o,
                    timestamp=lambda s=stamped: s,
                ),
            )
        return 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        return metadata(2, topic=topic or TOPIC)

    # A transactional producer's calls, recorded; ``refuse_commit`` makes commit_transaction raise it once,
    # ``refuse_init`` init_transactions.
    refuse_commit: KafkaError | None = None
    refuse_init: KafkaError | None = None
    # A record of the open transaction failed: librdkafka then refuses to commit it (it must be aborted).
    failed_in_transaction: bool = False
    # The destination's transaction coordinator does not answer (its broker restarts, or it loads its
    # state): every init_transactions times out, as librdkafka's does, its registration going on.
    coordinator_away: bool = False
    init_timeouts: list[float] = field(default_factory=list)  # what each init_transactions was given

    def __len__(self) -> int:
        return len(self.pending) + len(self.map_pending)

    def init_transactions(self, timeout: float) -> None:
        self.init_timeouts.append(timeout)
        refused, self.refuse_init = self.refuse_init, None
        if refused is not None:
            raise KafkaException(refused)
        if self.coordinator_away:
            raise KafkaException(
                KafkaError(
                    KafkaError._TIMED_OUT,
                    "Timed out waiting for operation to finish, retry call to resume",
                    retriable=True,
                )
            )
        self.calls.append(("init_transactions", None))

    def begin_transaction(self) -> None:
        self.calls.append(("begin_transaction", None))
        self.failed_in_transaction = False

    def commit_transaction(self, timeout: float) -> None:
        self.flush(timeout)
        refused, self.refuse_commit = self.refuse_commit, None
        if refused is None and self.failed_in_transaction:
            refused = KafkaError(KafkaError._MSG_TIMED_OUT, "a message failed delivery", txn_requires_abort=True)
        if refused is not None:
            raise KafkaException(refused)
        self.calls.append(("commit_transaction", None))

    def abort_transaction(self, timeout: float) -> None:
        self.calls.append(("abort_transaction", None))


class FakeAdmin:
    def __init__(self, destination_partitions: int | None) -> None:
        self.destination_partitions = destination_partitions
        self.max_message_bytes = 1_048_588
        self.brokers = 1
        self.away = 0  # brokers not registered (restarting) that hold replicas of the cluster's existing topics
        self.created: list[tuple[str, int]] = []
        self.replicas: dict[str, int] = {}  # topic -> the replication factor it was created with
        # partition -> the log end (high watermark) ListOffsets answers with; 0 unless set, so no
        # destination partition looks held back by an open transaction.
        self.log_ends: dict[int, int] = {}

    def list_offsets(self, request: dict[Any, Any], **options: Any) -> dict[Any, Any]:
        def answer(end: int) -> Any:
            return SimpleNamespace(result=lambda timeout: SimpleNamespace(offset=end))

        return {tp: answer(self.log_ends.get(tp.partition, 0)) for tp in request}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        # Every destination topic of the route's source topics shares one layout; the offset-map topic is
        # not listed (see create_topics).
        named = TOPIC if topic is None or topic == MAP_TOPIC else topic
        answer = metadata(self.destination_partitions, topic=named, brokers=self.brokers)
        if self.away:  # an existing topic's replicas name the brokers that are away too
            holders = list(range(1, self.brokers + self.away + 1))
            layout = {0: SimpleNamespace(id=0, replicas=holders)}
            answer.topics["__consumer_offsets"] = SimpleNamespace(partitions=layout, error=None)
        return answer

    def describe_configs(self, resources: list[Any]) -> dict[Any, Any]:
        entries = {"max.message.bytes": SimpleNamespace(value=str(self.max_message_bytes))}
        return {r: SimpleNamespace(result=lambda timeout: entries) for r in resources}

    def create_topics(self, topics: list[Any]) -> dict[str, Any]:
        self.replicas.update((t.topic, t.replication_factor) for t in topics)
        if topics[0].topic == MAP_TOPIC:
            self.map_topic_created = True
            return {MAP_TOPIC: SimpleNamespace(result=lambda timeout: None)}
        self.created.extend((t.topic, t.num_partitions) for t in topics)
        self.destination_partitions = topics[0].num_partitions
        return {t.topic: SimpleNamespace(result=lambda timeout: None) for t in topics}


class FakeController:
    """Implements :class:`controller.api.ports.ControllerApi`, every part in one object; records calls,
    raises ``fail`` when set. A topic view names this controller as its route's destination, and a
    schema report as its target, so a test sees which controller answered."""

    def __init__(self, controller_id: str = "c1", leading: bool = True, leader: dict[str, str] | None = None) -> None:
        self.controller_id = controller_id
        self.leading = leading
        self.leader_info = leader
        self.fail: Exception | None = None
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.zookeeper_connected = True  # what health() reports
        self.scheduler_running = True

    # The parts the REST edge asks for (controller.api.ports.ControllerApi): all this one object.
    @property
    def leadership(self) -> FakeController:
        return self

    @property
    def reads(self) -> FakeController:
        return self

    @property
    def topics(self) -> FakeController:
        return self

    @property
    def jobs(self) -> FakeController:
        return self

    @property
    def tree(self) -> FakeController:
        return self

    @property
    def operate(self) -> FakeController:
        return self

    @property
    def failover(self) -> FakeController:
        return self

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if self.fail is not None:
            raise self.fail

    def is_leader(self) -> bool:
        return self.leading

    def leader(self) -> dict[str, str] | None:
        return self.leader_info

    def health(self) -> Health:
        state = ControllerState.LEADING if self.leading else ControllerState.STANDBY
        return Health(
            self.zookeeper_connected,
            self.controller_id,
            state,
            self.leading,
            None,
            None,
            scheduler_running=self.scheduler_running,
        )

    def list_topics(self) -> list[IdealState]:
        self._call("list_topics")
        return [IdealState("src.dst", "orders", 2)]

    def _view(self, topic: str, partitions: int, route: str | None) -> TopicView:
        name = route or "src.dst"
        one = RouteTopic(IdealState(name, topic, partitions), ExternalView(name, topic), self.controller_id, topic)
        return TopicView(topic, {name: one})

    def topic_view(self, topic: str, route: str | None = None) -> TopicView:
        self._call("topic_view", topic, route)
        return self._view(topic, 1, route)

    def add_topic(self, spec: TopicSpec, route: str | None = None) -> TopicView:
        self._call("add_topic", spec, route)
        return self._view(spec.topic, spec.num_partitions or 1, route)

    def add_topics(self, specs: Sequence[TopicSpec], route: str | None = None) -> list[IdealState]:
        self._call("add_topics", list(specs), route)
        return [IdealState(route or "src.dst", spec.topic, spec.num_partitions or 1) for spec in specs]

    def expand_topic(self, topic: str, num_partitions: int, route: str | None = None) -> TopicView:
        self._call("expand_topic", topic, num_partitions, route)
        return self._view(topic, num_partitions, route)

    def delete_topic(self, topic: str, route: str | None = None) -> TopicDeleted:
        self._call("delete_topic", topic, route)
        return TopicDeleted(topic, (route or "src.dst",))

    def instances(self) -> Instances:
        self._call("instances")
        return Instances([], {})

    def rebalance_now(self) -> Rebalanced:
        self._call("rebalance_now")
        return Rebalanced(0)

    def validation(self) -> Validation:
        self._call("validation")
        return Validation([], {}, None)

    def source_validation(self) -> SourceValidation:
        self._call("source_validation")
        return SourceValidation(0, [], None)

    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[PartitionKey, OffsetSample]:
        self._call("offsets", topic, partition)
        return {}

    def destination_topic(self, route: str, topic: str) -> str:
        return topic

    def noprogress(self) -> NoProgress:
        self._call("noprogress")
        return NoProgress({}, {}, 60.0)

    def metrics_text(self) -> bytes:
        return b"# no metrics\n"

    def groups(self, group: str | None = None) -> GroupCheckpoints:
        self._call("groups", group)
        if group == "unknown":
            raise NotFound("group 'unknown' has no checkpoint")
        return GroupCheckpoints({}, {})

    def translate_offset(
        self, route: str | None, topic: str, partition: int, offset: int, reverse: bool = False
    ) -> OffsetTranslation:
        self._call("translate_offset", route, topic, partition, offset, reverse)
        if topic == "unknown":
            raise NotFound("topic 'unknown' does not exist on cluster 'src'")
        return OffsetTranslation(
            route or "src.dst",
            topic,
            topic,
            partition,
            "reverse" if reverse else "forward",
            offset,
            offset + 3,
            "exact",
        )

    def tree_view(self) -> TreeView:
        self._call("tree_view")
        return TreeView("1(a,b)", 60.0, [], [], "DISTRIBUTOR ...")

    def heartbeats(self) -> HeartbeatView:
        self._call("heartbeats")
        return HeartbeatView([], {})

    def switch_target(self, distributor: str, leaf: str, why: str) -> dict[str, str]:
        self._call("switch_target", distributor, leaf)
        return {distributor: leaf}

    def _schema_report(self) -> SchemaReport:
        return SchemaReport("src", [self.controller_id], 0.0, [], True, {}, [], [], [], {})

    def schema_status(self) -> SchemaStatus:
        self._call("schema_status")
        return SchemaStatus(self._schema_report(), None)

    def schema_sync(self) -> SchemaReport:
        self._call("schema_sync")
        return self._schema_report()

    # -- an operator's controls

    def view(self) -> ControlsView:
        return ControlsView(Controls(), True, {})

    def worker(self, worker: str) -> WorkerControl:
        return WorkerControl(worker, None, 3)

    def pause(self, topic: str, partitions: list[int] | None, route: str | None, resume: bool = False) -> PausedTopic:
        self._call("pause", topic, partitions, route, resume)
        return PausedTopic(topic, {})

    def cordon(self, worker: str, how: str | None) -> WorkerControl:
        self._call("cordon", worker, how)
        return WorkerControl(worker, how, 0)

    def set_autobalancing(self, enabled: bool) -> bool:
        self._call("autobalancing", enabled)
        return enabled

    def set_throttle(self, route: str, throttle: Throttle) -> RouteThrottleSet:
        self._call("throttle", route, throttle)
        return RouteThrottleSet(route, throttle)

    # -- failover

    def routes(self) -> list[RouteFailover]:
        self._call("routes")
        return [
            RouteFailover(route="src.dst", source="src", destination="dst", document=FailoverDocument.active("src.dst"))
        ]

    def route(self, name: str) -> RouteFailover:
        self._call("route", name)
        return RouteFailover(route=name, source="src", destination="dst", document=FailoverDocument.active(name))

    def fail_over(
        self, name: str, planned: bool, groups: str | None, topics: str | None, quiet_s: float, timeout_s: float
    ) -> FailoverDocument:
        self._call("fail_over", name, planned, groups, topics, quiet_s, timeout_s)
        return FailoverDocument(route=name, state="FAILED_OVER")

    def plan(self, name: str, planned: bool, groups: str | None, topics: str | None) -> FailoverPlan:
        self._call("plan", name, planned, groups, topics)
        nothing = UnplannedPlan(source_ends_seen_at=None, rpo=[], not_copied=0, groups=[])
        return FailoverPlan(
            route=name,
            source="src",
            destination="dst",
            dry_run=True,
            state="ACTIVE",
            planned=planned,
            phases=["REQUESTED", "SYNCING", "FAILED_OVER"],
            groups=groups,
            topics=topics,
            partitions={},
            plan=nothing,
        )


def as_controller_api(fake: FakeController) -> ControllerApi:
    return fake  # mypy checks that the fake satisfies the Protocol
