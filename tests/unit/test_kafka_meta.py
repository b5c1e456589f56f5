"""The controller's Kafka metadata calls: a cluster that does not answer is Unavailable (503,
retried by the next job run), never an unexpected exception out of a leader job."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource

from ferry.controller import kafka_meta
from ferry.controller.errors import Unavailable


class _SilentAdmin:
    """An AdminClient whose requests are accepted and never answered (a broker killed with -9)."""

    def describe_configs(self, resources: list[ConfigResource], request_timeout: float) -> dict[Any, Future[Any]]:
        return {resource: Future() for resource in resources}

    def incremental_alter_configs(
        self, resources: list[ConfigResource], request_timeout: float
    ) -> dict[Any, Future[Any]]:
        return {resource: Future() for resource in resources}

    def list_offsets(self, request: dict[Any, Any], request_timeout: float) -> dict[Any, Future[Any]]:
        return {tp: Future() for tp in request}


@pytest.fixture
def metadata(monkeypatch: pytest.MonkeyPatch) -> kafka_meta.ClusterMetadata:
    monkeypatch.setattr(kafka_meta, "TIMEOUT_S", 0.01)
    monkeypatch.setattr(kafka_meta.kafka_clients, "admin", lambda cluster, **settings: _SilentAdmin())
    return kafka_meta.ClusterMetadata({"dst": {"bootstrap.servers": "127.0.0.1:1"}})


def test_topic_configs_of_a_silent_cluster_are_unavailable(metadata: kafka_meta.ClusterMetadata) -> None:
    with pytest.raises(Unavailable, match="'dst' cannot be reached"):
        metadata.topic_configs("dst", ["orders"])


def test_setting_topic_configs_on_a_silent_cluster_is_unavailable(metadata: kafka_meta.ClusterMetadata) -> None:
    with pytest.raises(Unavailable, match="'dst' cannot be reached"):
        metadata.set_topic_configs("dst", "orders", {"retention.ms": "1000"})


def test_end_offsets_of_a_silent_cluster_are_unavailable(metadata: kafka_meta.ClusterMetadata) -> None:
    with pytest.raises(Unavailable, match="'dst' cannot be reached"):
        metadata.end_offsets("dst", [("orders", 0)])
