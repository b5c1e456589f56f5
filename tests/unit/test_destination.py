"""worker/destination.py: a route's destination topics prepared through fake admin clients."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.common.config import InternalTopicsConfig, RouteConfig
from ferry.common.core.offset_map import MAP_TOPIC
from ferry.worker.destination import DestinationTopics, SourceTopic
from ferry.worker.errors import PartitionDeferred, PartitionStopped
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeAdmin, FakeClock, FakeConsumer, metadata

ROUTE = RouteConfig(source="src", destination="dst")


def _topics(admin: Any, clock: FakeClock | None = None, route: RouteConfig = ROUTE, **kwargs: Any) -> DestinationTopics:
    clock = clock or FakeClock()
    return DestinationTopics(route=route, admin=admin, clock=clock, sleep=clock.sleep, **kwargs)


def _producer(partitions: int) -> Any:
    return SimpleNamespace(list_topics=lambda topic, timeout: metadata(partitions))


def test_the_source_partition_and_replica_counts_or_why_there_are_none() -> None:
    topics = _topics(FakeAdmin(None))
    assert topics.source_topic(FakeConsumer([], source_partitions=3, source_replicas=2), TOPIC) == SourceTopic(3, 2)
    with pytest.raises(PartitionStopped, match="does not exist at the source"):
        topics.source_topic(FakeConsumer([], source_partitions=None), TOPIC)

    def unreachable(topic: str, timeout: float) -> Any:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    consumer = FakeConsumer([])
    consumer.list_topics = unreachable  # type: ignore[method-assign]
    with pytest.raises(PartitionDeferred, match="source cluster unreachable"):
        topics.source_topic(consumer, TOPIC)


def test_a_missing_destination_topic_is_created_with_the_source_count_and_the_map_topic_once() -> None:
    admin = FakeAdmin(destination_partitions=None)
    admin.max_message_bytes = 50_000
    topics, fitted = _topics(admin), []
    topics.prepare(TOPIC, SourceTopic(2, 1), lambda: _producer(2), lambda topic, limit: fitted.append((topic, limit)))
    topics.prepare(TOPIC, SourceTopic(2, 1), lambda: _producer(2), lambda topic, limit: fitted.append((topic, limit)))
    assert admin.created == [(TOPIC, 2)]  # the second time it exists
    assert admin.map_topic_created and fitted == [(TOPIC, 50_000), (TOPIC, 50_000)]


def test_a_smaller_destination_topic_is_expanded() -> None:
    admin = FakeAdmin(destination_partitions=1)
    expanded: list[tuple[str, int]] = []
    admin.create_partitions = lambda new: (
        expanded.extend((n.topic, n.new_total_count) for n in new)  # type: ignore[attr-defined]
        or {n.topic: SimpleNamespace(result=lambda timeout: None) for n in new}
    )
    _topics(admin).prepare(TOPIC, SourceTopic(4, 1), lambda: _producer(4), lambda topic, limit: None)
    assert expanded == [(TOPIC, 4)] and admin.created == []


def test_a_producer_that_never_sees_the_new_partitions_defers_after_the_deadline() -> None:
    clock = FakeClock()
    with pytest.raises(PartitionDeferred, match="does not show 2 partitions"):
        _topics(FakeAdmin(None), clock).prepare(
            TOPIC, SourceTopic(2, 1), lambda: _producer(1), lambda topic, limit: None
        )
    assert clock.now > 10 and set(clock.sleeps) == {0.2}


@pytest.mark.parametrize(
    ("code", "failure"),
    [
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, PartitionStopped),
        (KafkaError.POLICY_VIOLATION, PartitionStopped),
        (KafkaError._TRANSPORT, PartitionDeferred),
    ],
)
def test_a_refused_creation_stops_for_good_or_defers(code: int, failure: type[Exception]) -> None:
    admin = FakeAdmin(None)

    def refuse(new: list[Any]) -> dict[str, Any]:
        def result(timeout: float) -> None:
            raise KafkaException(KafkaError(code))

        return {n.topic: SimpleNamespace(result=result) for n in new}

    admin.create_topics = refuse  # type: ignore[method-assign]
    with pytest.raises(failure):
        _topics(admin).prepare(TOPIC, SourceTopic(2, 1), lambda: _producer(2), lambda topic, limit: None)


def test_an_existing_map_topic_is_no_error() -> None:
    admin = FakeAdmin(None)

    def exists(new: list[Any]) -> dict[str, Any]:
        def result(timeout: float) -> None:
            raise KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))

        return {MAP_TOPIC: SimpleNamespace(result=result)}

    admin.create_topics = exists  # type: ignore[method-assign]
    _topics(admin).ensure_map_topic()


def test_an_unreadable_topic_limit_is_none() -> None:
    admin = FakeAdmin(None)
    admin.describe_configs = lambda resources: {r: SimpleNamespace(result=lambda timeout: {}) for r in resources}  # type: ignore[method-assign]
    assert _topics(admin).max_message_bytes(TOPIC) is None


@pytest.mark.parametrize(
    ("configured", "at_source", "brokers", "replicas"),
    [
        (None, 3, 3, 3),  # the source's replica count
        (None, 1, 3, 1),
        (None, 3, 2, 2),  # capped at the destination's brokers
        (2, 3, 3, 2),  # the route's own
        (3, 1, 5, 3),
        (3, 1, 1, 1),  # capped too
    ],
)
def test_a_created_destination_topic_gets_the_routes_or_the_sources_replicas_capped_at_the_brokers(
    configured: int | None, at_source: int, brokers: int, replicas: int, caplog: pytest.LogCaptureFixture
) -> None:
    admin = FakeAdmin(destination_partitions=None)
    admin.brokers = brokers
    route = RouteConfig(source="src", destination="dst", replication_factor=configured)
    _topics(admin, route=route).prepare(TOPIC, SourceTopic(2, at_source), lambda: _producer(2), lambda t, limit: None)
    assert admin.replicas[TOPIC] == replicas
    capped = [r.message for r in caplog.records if "instead of" in r.message and TOPIC in r.message]
    assert bool(capped) == (replicas < (configured or at_source))


def test_the_map_topic_gets_the_destinations_internal_replication_factor_capped_at_its_brokers() -> None:
    admin = FakeAdmin(None)
    admin.brokers = 5
    _topics(admin).ensure_map_topic()
    assert admin.replicas[MAP_TOPIC] == 3  # the default
    admin = FakeAdmin(None)
    admin.brokers = 2
    _topics(admin).ensure_map_topic()
    assert admin.replicas[MAP_TOPIC] == 2
    admin = FakeAdmin(None)
    admin.brokers = 5
    internal = InternalTopicsConfig(replication_factor=2, clusters={"dst": 4})
    _topics(admin, internal_topics=internal).ensure_map_topic()
    assert admin.replicas[MAP_TOPIC] == 4


def _waiting(metrics: WorkerMetrics) -> float | None:
    return metrics.registry.get_sample_value("ferry_worker_topics_waiting_for_brokers", {"route": "src.dst"})


def _capped(metrics: WorkerMetrics) -> float | None:
    return metrics.registry.get_sample_value("ferry_worker_topics_capped_total", {"route": "src.dst"})


def test_a_topic_waits_while_a_destination_broker_restarts_and_gets_every_replica_when_it_is_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The destination has 3 brokers; broker 3 restarts, so the metadata shows 2 (the replicas of an
    # existing topic still name it). Creating the copy of a 3-replica source topic now would leave it
    # with 2 replicas for good: it waits, counted, and is created with 3 once the broker is back.
    metrics = WorkerMetrics()
    metrics.start_route("src.dst")
    admin = FakeAdmin(destination_partitions=None)
    admin.brokers, admin.away = 2, 1
    topics = _topics(admin, metrics=metrics)
    prepare = lambda: topics.prepare(TOPIC, SourceTopic(2, 3), lambda: _producer(2), lambda t, limit: None)  # noqa: E731
    for _ in range(2):  # tried again while the broker is away: one warning, still one topic waiting
        with pytest.raises(PartitionDeferred, match=r"2 of the cluster's 3 brokers are registered \(missing: \[3\]\)"):
            prepare()
    assert TOPIC not in admin.replicas and _waiting(metrics) == 1
    assert len([r for r in caplog.records if "not created yet" in r.message]) == 1
    admin.brokers, admin.away = 3, 0  # back
    assert prepare() is True
    assert admin.replicas == {TOPIC: 3, MAP_TOPIC: 3}
    assert _waiting(metrics) == 0 and _capped(metrics) == 0


def test_the_map_topic_waits_for_the_brokers_too() -> None:
    metrics = WorkerMetrics()
    admin = FakeAdmin(destination_partitions=2)  # the copy exists already
    admin.brokers, admin.away = 1, 2
    topics = _topics(admin, metrics=metrics)
    with pytest.raises(PartitionDeferred, match="not created yet"):
        topics.prepare(TOPIC, SourceTopic(2, 1), lambda: _producer(2), lambda t, limit: None)
    assert MAP_TOPIC not in admin.replicas and _waiting(metrics) == 1
    admin.brokers, admin.away = 3, 0
    topics.prepare(TOPIC, SourceTopic(2, 1), lambda: _producer(2), lambda t, limit: None)
    assert admin.replicas[MAP_TOPIC] == 3 and _waiting(metrics) == 0


def test_on_a_cluster_smaller_than_wanted_the_topic_is_capped_at_its_size_and_counted() -> None:
    metrics = WorkerMetrics()
    metrics.start_route("src.dst")
    admin = FakeAdmin(destination_partitions=None)
    admin.brokers = 2  # every broker of the cluster is up: it has 2
    _topics(admin, metrics=metrics).prepare(TOPIC, SourceTopic(2, 3), lambda: _producer(2), lambda t, limit: None)
    assert admin.replicas == {TOPIC: 2, MAP_TOPIC: 2}
    assert _capped(metrics) == 2 and _waiting(metrics) == 0
