"""The observer's decisions and the progress tracker: pure, no servers."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import RouteConfig
from ferry.common.config.routes import DEFAULT_EXCLUDE_INTERNAL
from ferry.common.model import IdealState, PartitionKey, TopicKey
from ferry.controller.topics.observer import config_changes, decide, is_internal
from ferry.controller.topics.progress import OffsetSample, ProgressTracker

ROUTE = RouteConfig(source="src", destination="dst", include=[r"orders\..*", "payments"], exclude=[r"orders\.tmp\..*"])
PLAIN = RouteConfig(source="src", destination="dr")


def test_matching_topics_are_whitelisted_with_the_source_partition_count() -> None:
    source = {"src.dst": {"orders.eu": 8, "orders.tmp.x": 2, "payments": 3, "payments2": 1, "__consumer_offsets": 50}}
    decisions = decide([ROUTE], source, ideal={}, removed=set())
    assert decisions.add == {TopicKey("src.dst", "orders.eu"): 8, TopicKey("src.dst", "payments"): 3}
    assert decisions.expand == {}


def test_internal_and_removed_topics_are_never_whitelisted() -> None:
    route = RouteConfig(source="src", destination="dst", include=[".*"])
    source = {"src.dst": {"__consumer_offsets": 50, "__transaction_state": 50, "gone": 1, "kept": 1}}
    decisions = decide([route], source, ideal={}, removed={TopicKey("src.dst", "gone")})
    assert decisions.add == {TopicKey("src.dst", "kept"): 1}
    assert is_internal("__consumer_offsets") and not is_internal("_schemas")


# Other systems' internal topics, each as its system names it by default.
OTHER_SYSTEMS = [
    "_schemas",  # Schema Registry
    "connect-configs",  # Kafka Connect's config.storage.topic, offset.storage.topic, status.storage.topic
    "connect-offsets",
    "connect-status",
    "mm2-offsets.src.internal",  # MirrorMaker 2 (Connect in dedicated mode), its checkpoints and syncs
    "src.checkpoints.internal",
    "mm2-offset-syncs.dst.internal",
    "mm2-status.src-internal",
    "orders.replica",  # MirrorMaker 2's .*\.replica
    "_confluent-ksql-default__command_topic",  # ksqlDB
    "_confluent-metrics",  # Confluent's components
    "_confluent_balancer_api_state",
    "__consumer_offsets",
]


def test_other_systems_internal_topics_are_not_whitelisted_by_default() -> None:
    route = RouteConfig(source="src", destination="dst", include=[".*"])
    ordinary = ["orders", "orders-changelog", "app-store-repartition", "connect-orders", "schemas", "ferry.heartbeats"]
    decisions = decide([route], {"src.dst": dict.fromkeys([*OTHER_SYSTEMS, *ordinary], 1)}, ideal={}, removed=set())
    # Kafka Streams' changelogs and repartition topics are the application's: mirrored unless excluded.
    assert decisions.add == {TopicKey("src.dst", topic): 1 for topic in ordinary}


def test_exclude_internal_changes_the_list_and_kafkas_own_topics_stay_out() -> None:
    none = RouteConfig(source="src", destination="dst", include=[".*"], exclude_internal=[])
    decisions = decide([none], {"src.dst": dict.fromkeys(OTHER_SYSTEMS, 1)}, ideal={}, removed=set())
    assert set(decisions.add) == {TopicKey("src.dst", t) for t in OTHER_SYSTEMS if not t.startswith("__")}
    own = RouteConfig(source="src", destination="dst", include=[".*"], exclude_internal=[".*-changelog"])
    assert not own.wants("app-store-changelog") and own.wants("_schemas") and not own.wants("__consumer_offsets")


@given(st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True))
def test_a_topic_is_mirrored_by_include_only_when_no_exclusion_matches(topic: str) -> None:
    route = RouteConfig(source="src", destination="dst", include=[".*"])
    internal = topic.startswith("__") or any(re.fullmatch(p, topic) for p in DEFAULT_EXCLUDE_INTERNAL)
    assert route.wants(topic) == (not internal)
    assert route.is_internal(topic) == internal


def test_other_systems_groups_are_not_checkpointed_by_default() -> None:
    route = RouteConfig(source="src", destination="dst", groups=[".*"])
    assert [
        g
        for g in ("console-consumer-4711", "connect-sink", "__ksql", "orders-app", "ferry.src.dst")
        if route.wants_group(g)
    ] == ["orders-app"]
    assert RouteConfig(source="src", destination="dst", groups=[".*"], groups_exclude_internal=[]).wants_group(
        "connect-sink"
    )


def test_a_route_without_include_whitelists_nothing_but_still_expands() -> None:
    ideal = {TopicKey("src.dr", "orders"): IdealState("src.dr", "orders", 4)}
    decisions = decide([PLAIN], {"src.dr": {"orders": 6, "other": 1}}, ideal=ideal, removed=set())
    assert decisions.add == {}
    assert decisions.expand == {TopicKey("src.dr", "orders"): 6}


def test_a_topic_never_shrinks() -> None:
    ideal = {TopicKey("src.dst", "orders.eu"): IdealState("src.dst", "orders.eu", 8)}
    assert decide([ROUTE], {"src.dst": {"orders.eu": 4}}, ideal=ideal, removed=set()).expand == {}


def test_destination_configs_follow_the_source_except_excluded_keys() -> None:
    source = {"retention.ms": "100", "cleanup.policy": "compact", "max.message.bytes": "5000"}
    destination = {"retention.ms": "100", "cleanup.policy": "delete"}
    assert config_changes(source, destination, exclude=["max.message.bytes"]) == {"cleanup.policy": "compact"}
    assert config_changes(source, source, exclude=[]) == {}


def test_min_insync_replicas_follows_the_source_but_never_above_the_destination_replicas() -> None:
    source = {"min.insync.replicas": "2", "retention.ms": "100"}
    assert config_changes(source, {}, exclude=[], replicas=3) == source
    assert config_changes(source, {}, exclude=[], replicas=1) == {"min.insync.replicas": "1", "retention.ms": "100"}
    assert config_changes(source, {"min.insync.replicas": "1", "retention.ms": "100"}, exclude=[], replicas=1) == {}
    assert config_changes(source, {}, exclude=["min.insync.replicas"], replicas=1) == {"retention.ms": "100"}


KEY = PartitionKey("src.dst", "orders", 0)
OTHER = PartitionKey("src.dst", "orders", 1)


def test_a_lagging_partition_whose_commit_does_not_move_is_stalled_after_the_threshold() -> None:
    tracker = ProgressTracker(noprogress_after_s=60)
    tracker.update({KEY: OffsetSample(100, 500), OTHER: OffsetSample(10, 10)}, now=0)
    tracker.update({KEY: OffsetSample(100, 600), OTHER: OffsetSample(10, 10)}, now=59)
    assert tracker.stalled(now=59) == {}
    assert tracker.stalled(now=61) == {KEY: 61}  # OTHER does not lag: never stalled


def test_a_moving_commit_resets_the_clock_and_absent_partitions_are_forgotten() -> None:
    tracker = ProgressTracker(noprogress_after_s=10)
    tracker.update({KEY: OffsetSample(None, 50)}, now=0)
    tracker.update({KEY: OffsetSample(20, 50)}, now=8)
    assert tracker.stalled(now=15) == {}
    assert tracker.stalled(now=18) == {KEY: 10}
    tracker.update({}, now=19)
    assert tracker.stalled(now=100) == {} and tracker.latest() == {}
    assert OffsetSample(None, 7).lag == 7
