"""`ferry validate`, `ferry audit` and `ferry zk` against secured servers: Kafka over SASL_SSL
(SCRAM-SHA-512, the local stack's CA) and ZooKeeper with digest authentication and ACLs that let
nobody else read.

Regression: `ferry audit` handed Spark only `bootstrap.servers`, so it could not read
a secured cluster.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from ferry import cli
from ferry.common.config import parse_config
from ferry.common.kafka import clients as kafka_clients
from ferry.common.model import ExternalView, IdealState, PartitionState, WorkerInfo
from ferry.common.zk.layout import ZkLayout, make_client
from ferry.devstack import security
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from ferry.pipeline.spark import get_session

PARTITIONS = 2
RECORDS = 40


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # Started here so that the CLI calls below reuse it (getOrCreate) instead of starting a JVM each.
    yield get_session("local[2]", app_name="ferry-tests")


@pytest.fixture
def secured_config(
    zk_chroot: str, local_stack: devstack.Stack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    connect, chroot = zk_chroot.split("/", 1)
    monkeypatch.setenv("FERRY_TEST_ZK_DIGEST", "ferry:zk-s3cret")
    monkeypatch.setenv("FERRY_TEST_KAFKA_PASSWORD", security.SASL_PASSWORD)
    from_env = {"sasl.password": "${env:FERRY_TEST_KAFKA_PASSWORD}"}
    data = {
        "zookeeper": {
            "connect": connect,
            "root": f"/{chroot}/ferry",
            "retry_deadline_s": 15,
            "auth": {"digest": "${env:FERRY_TEST_ZK_DIGEST}", "others": "none"},
        },
        "clusters": {
            "src": {**local_stack.secured("src"), **from_env},
            "dst": {**local_stack.secured("dst"), **from_env},
        },
        "routes": [{"source": "src", "destination": "dst"}],
    }
    (tmp_path / "ferry.yaml").write_text(yaml.safe_dump(data))
    yield data
    ferry = make_client(parse_config(data).zookeeper)  # the chroot fixture's anonymous cleanup may not
    ferry.start(timeout=15)
    ferry.delete(data["zookeeper"]["root"], recursive=True)
    ferry.stop()
    ferry.close()


def test_validate_audit_and_zk_with_sasl_ssl_kafka_and_zookeeper_acls(
    spark: Any,
    secured_config: dict[str, Any],
    tmp_path: Path,
    topic_name: Callable[[str], str],
    zk_chroot: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config = parse_config(secured_config)
    config_file = str(tmp_path / "ferry.yaml")
    src, dst = (dict(config.clusters[name]) for name in ("src", "dst"))
    topic = topic_name("secured")
    for cluster in (src, dst):
        create_topics(kafka_clients.admin(cluster), [NewTopic(topic, PARTITIONS, 1)])
    # Every record on both sides, written over SASL_SSL: what a faithful mirror leaves. Recent
    # timestamps: the brokers' retention would delete records older than 7 days.
    base_ms = int(time.time() * 1000) - 3_600_000
    for cluster in (src, dst):
        producer = kafka_clients.producer(cluster)
        for i in range(RECORDS):
            producer.produce(
                topic,
                key=f"k{i}".encode(),
                value=f"v{i}".encode(),
                partition=i % PARTITIONS,
                timestamp=base_ms + i,
                headers=[("h", str(i).encode())],
            )
        assert producer.flush(30) == 0
    # Ferry's state, written with Ferry's credentials: ideal = external, one live worker.
    layout = ZkLayout(config.zookeeper.root)
    ferry = make_client(config.zookeeper)
    ferry.start(timeout=15)
    try:
        route = "src.dst"
        ferry.create(layout.live_worker("w1"), WorkerInfo("w1", "localhost", 1).to_bytes(), makepath=True)
        ferry.create(
            layout.topic(route, topic),
            IdealState(route, topic, PARTITIONS, dict.fromkeys(range(PARTITIONS), "w1")).to_bytes(),
            makepath=True,
        )
        view = {p: {"worker": "w1", "state": PartitionState.ONLINE} for p in range(PARTITIONS)}
        ferry.create(layout.external_topic(route, topic), ExternalView(route, topic, view).to_bytes(), makepath=True)
    finally:
        ferry.stop()
        ferry.close()
    anonymous = KazooClient(hosts=zk_chroot.split("/", 1)[0])
    anonymous.start(timeout=15)
    try:
        with pytest.raises(NoAuthError):  # others: none
            anonymous.get(layout.topic(route, topic))
    finally:
        anonymous.stop()
        anonymous.close()

    assert cli.main(["zk", "external", topic, "--config", config_file, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["external"]["1"]["state"] == "ONLINE"

    assert cli.main(["validate", "--config", config_file, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is True and result["counts"]["partitions"] == PARTITIONS

    assert cli.main(["audit", "--config", config_file, "--topic", topic, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["source"], report["destination"]) == (True, RECORDS, RECORDS)
    # The Kafka password came from ${env:...}: no log record and no output shows it.
    assert security.SASL_PASSWORD not in caplog.text and "zk-s3cret" not in caplog.text
    assert security.SASL_PASSWORD not in "".join(capsys.readouterr())
