"""common/core/topics/replicas.py: the replicas of the topics Ferry creates, and min.insync.replicas that fits them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.topics.replicas import (
    Replicas,
    capped_configs,
    mirrored_replicas,
    replica_count,
    replicas_for,
    replicas_now,
)


@pytest.mark.parametrize(
    ("configured", "at_source", "brokers", "expected"),
    [
        (None, 3, 3, Replicas(3, 3)),
        (None, 3, 1, Replicas(1, 3)),
        (None, 1, 3, Replicas(1, 1)),
        (2, 3, 5, Replicas(2, 2)),
        (4, 1, 3, Replicas(3, 4)),
        (None, 0, 3, Replicas(1, 1)),  # no replica seen: still one
    ],
)
def test_a_mirrored_topic_gets_the_routes_or_the_sources_replicas_at_most_one_per_broker(
    configured: int | None, at_source: int, brokers: int, expected: Replicas
) -> None:
    assert mirrored_replicas(configured, at_source, brokers) == expected


def test_capped_says_whether_the_brokers_lowered_the_factor() -> None:
    assert replicas_for(3, 1).capped and not replicas_for(3, 3).capped and not replicas_for(1, 3).capped
    assert replicas_for(3, 0) == Replicas(1, 3)  # a cluster that lists no broker: Kafka answers for itself


def test_a_topics_replica_count_is_its_widest_partitions() -> None:
    assert replica_count([3, 3, 2]) == 3 and replica_count([]) == 0


def test_min_insync_replicas_is_lowered_to_the_replicas_and_nothing_else_changes() -> None:
    configs = {"min.insync.replicas": "3", "retention.ms": "100"}
    assert capped_configs(configs, 2) == {"min.insync.replicas": "2", "retention.ms": "100"}
    assert capped_configs(configs, 3) == configs
    assert capped_configs(configs, 0) == configs  # unknown replicas: left alone
    assert capped_configs({"min.insync.replicas": "two"}, 1) == {"min.insync.replicas": "two"}
    assert capped_configs({"retention.ms": "1"}, 1) == {"retention.ms": "1"}


def test_a_topic_is_capped_only_at_the_clusters_size_and_waits_for_a_broker_that_is_away() -> None:
    assert replicas_now(3, registered=3, known=3) == Replicas(3, 3)
    assert replicas_now(3, registered=2, known=3) is None  # one broker restarts: wait, never 2 for good
    assert replicas_now(3, registered=1, known=1) == Replicas(1, 3)  # a one-broker cluster: capped
    assert replicas_now(5, registered=3, known=4) is None  # 4 when the fourth is back
    assert replicas_now(5, registered=4, known=4) == Replicas(4, 5)
    assert replicas_now(2, registered=2, known=5) == Replicas(2, 2)  # enough are up: no wait
    assert replicas_now(1, registered=0, known=3) is None  # nothing registered: nothing to create on


@given(st.integers(1, 9), st.integers(0, 9), st.integers(0, 9))
def test_created_now_means_as_many_replicas_as_the_whole_cluster_can_give_and_the_registered_can_hold(
    wanted: int, registered: int, known: int
) -> None:
    known = max(known, registered)  # the registered brokers are known ones
    replicas = replicas_now(wanted, registered, known)
    whole = min(wanted, max(1, known))  # what the cluster gives once every known broker is up
    if replicas is None:
        assert registered < whole  # waiting only while brokers it needs are away
    else:
        assert replicas == Replicas(whole, wanted) and replicas.factor <= registered
        assert replicas.capped == (known < wanted)
