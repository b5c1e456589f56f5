"""Replica counts on clusters of three brokers: a copy is as durable as what it copies.

Two extra clusters of the local stack, ``rfsrc`` and ``rfdst``, have three brokers each (started
once for this module, stopped at its end if it started them) and, like every cluster of the local
stack, ``default.replication.factor=1``. A controller and a worker mirror ``rfsrc`` to ``rfdst``:
a source topic of three replicas gets a copy of three replicas, one of one replica gets one, Ferry's
own topics (the offset map, the checkpoints, the heartbeats) get three, and ``min.insync.replicas``
follows the source's, never above the copy's replicas. ``ferry check --connect`` warns about a
route to the single-broker ``dst``, where a copy of three replicas would get one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import ConfigResource, NewTopic

from ferry import cli
from ferry.common.core import heartbeat
from ferry.common.core.offset_map import CHECKPOINT_TOPIC, MAP_TOPIC
from ferry.common.errors import DevStackError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import commit_offset, create_topics
from tests.harness import read_committed
from tests.harness.mirroring import warm_group_coordinator
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e

SOURCE, DESTINATION = "rfsrc", "rfdst"
# Away from the other extra clusters' ports (theirs start at 30092, the ACL test's at 31092).
PORTS = {SOURCE: 31192, DESTINATION: 31202}
RECORDS = 50


@pytest.fixture(scope="module")
def clusters(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The local stack with ``rfsrc`` and ``rfdst`` of three brokers each; stopped again if this module started them."""
    with pytest.MonkeyPatch.context() as patch:
        for name, port in PORTS.items():
            env = "FERRY_DEV_PORT_" + name.upper()
            patch.setenv(env, os.environ.get(env, str(port)))
        stack = local_stack.with_clusters([SOURCE, DESTINATION], brokers=3)
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"the clusters of three brokers do not start: {exc}", pytrace=False)
    try:
        for name in (SOURCE, DESTINATION):
            warm_group_coordinator(stack, name)
        yield stack
    finally:
        if started:
            processes.down(stack, names=started)
            devstack.forget_extra(started)  # `ferry dev status` need not list them any more


def _conf(stack: devstack.Stack, name: str) -> dict[str, str]:
    return {"bootstrap.servers": stack.bootstrap(name)}


def _replicas(admin: Any, topic: str) -> int | None:
    """The replica count of ``topic`` (its widest partition), None while it does not exist."""
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return None
    return max(len(p.replicas) for p in meta.partitions.values())


def _config(admin: Any, topic: str, name: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(10)
    entry = entries.get(name)
    return None if entry is None else str(entry.value)


def test_copies_and_ferrys_own_topics_get_the_replicas_of_what_they_copy(
    clusters: devstack.Stack, fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    wide, narrow = topic_name("rf3"), topic_name("rf1")
    group = f"app-{wide[-8:]}"
    source_admin = kafka_clients.admin(_conf(clusters, SOURCE))
    create_topics(
        source_admin,
        [
            NewTopic(wide, 2, 3, config={"min.insync.replicas": "2"}),
            # More in-sync replicas asked for than there are: its copy gets what its one replica allows.
            NewTopic(narrow, 1, 1, config={"min.insync.replicas": "2"}),
        ],
    )
    producer = kafka_clients.producer({**_conf(clusters, SOURCE), "acks": "1", "enable.idempotence": False})
    for i in range(RECORDS):
        producer.produce(wide, value=f"w{i}".encode(), partition=i % 2)
        producer.produce(narrow, value=f"n{i}".encode())
    assert producer.flush(30) == 0
    commit_offset(_conf(clusters, SOURCE), group, wide, RECORDS // 4)

    fleet.extra = {
        "clusters": {name: _conf(clusters, name) for name in (SOURCE, DESTINATION)},
        "routes": [
            {"source": SOURCE, "destination": DESTINATION, "include": [wide, narrow], "groups": [group]},
        ],
        "controller": {"observer_interval_s": 1.0, "checkpoint_interval_s": 1.0},
        "heartbeats": {"interval_s": 1.0},
    }
    fleet.write_config()
    controller = fleet.start_controller("controller")
    fleet.start_worker("worker")
    fleet.wait_for_leader(controller, timeout=60)

    destination_admin = kafka_clients.admin(_conf(clusters, DESTINATION))
    wait_until(lambda: _replicas(destination_admin, wide) is not None, 120, f"{wide} on {DESTINATION}")
    wait_until(lambda: _replicas(destination_admin, narrow) is not None, 60, f"{narrow} on {DESTINATION}")
    assert _replicas(destination_admin, wide) == 3
    assert _replicas(destination_admin, narrow) == 1
    for topic in (MAP_TOPIC, CHECKPOINT_TOPIC, heartbeat.TOPIC):
        wait_until(lambda t=topic: _replicas(destination_admin, t) is not None, 60, f"{topic} on {DESTINATION}")
        assert _replicas(destination_admin, topic) == 3, topic
    wait_until(lambda: _replicas(source_admin, heartbeat.TOPIC) is not None, 60, f"heartbeats on {SOURCE}")
    assert _replicas(source_admin, heartbeat.TOPIC) == 3

    # min.insync.replicas follows the source (the leader's observer), never above the copy's replicas.
    wait_until(lambda: _config(destination_admin, wide, "min.insync.replicas") == "2", 60, f"{wide}'s min ISR")
    wait_until(lambda: _config(destination_admin, narrow, "min.insync.replicas") == "1", 60, f"{narrow}'s min ISR")

    # And the copies are written (acks=all, two of three replicas in sync at least), counted by reading
    # them: the default route writes exactly once, and its transaction markers take offsets.
    def copied() -> bool:
        conf = _conf(clusters, DESTINATION)
        read = [records for topic in (wide, narrow) for records in read_committed.read(conf, topic).values()]
        return sum(len(records) for records in read) == 2 * RECORDS

    wait_until(copied, 120, f"{2 * RECORDS} records on {DESTINATION}")


def test_check_connect_warns_where_a_copy_would_get_fewer_replicas_than_its_source(
    clusters: devstack.Stack, topic_name: Callable[[str], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wide = topic_name("rf3")
    create_topics(kafka_clients.admin(_conf(clusters, SOURCE)), [NewTopic(wide, 1, 3)])
    config = {
        "zookeeper": {"connect": clusters.zookeeper.address, "root": "/ferry-tests/rf-check"},
        "clusters": {name: _conf(clusters, name) for name in (SOURCE, DESTINATION, "dst")},
        "routes": [  # dst has one broker: the copy would have one replica; rfdst has three
            {"source": SOURCE, "destination": "dst", "include": [wide]},
            {"source": SOURCE, "destination": DESTINATION, "include": [wide]},
        ],
    }
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(config))
    status = cli.main(["check", "--config", str(path), "--connect", "--timeout", "10"])
    lines = capsys.readouterr().out.splitlines()
    assert status == 0, lines  # a warning is no failure
    warnings = [line for line in lines if line.startswith("WARN")]
    assert len(warnings) == 1, lines
    assert warnings[0].startswith(f"WARN  route {SOURCE}.dst replicas: ") and f"{wide} (1 < 3)" in warnings[0]
