"""A destination topic is not created with fewer replicas while a broker of its cluster restarts: it waits.

An extra cluster of the local stack, ``rwdst``, has three brokers (started for this module, stopped
at its end if it started them); no other test uses it, so this test stops one of its brokers. With
broker 3 away, a route from ``src`` that creates its copies with three replicas leaves the
destination topic (and its offset-map topic) uncreated, and the worker's
``ferry_worker_topics_waiting_for_brokers`` counts them. Once broker 3 is back, the topic is created
with its three replicas and every record arrives. The route is exactly once (the default guarantee):
its copies are written in transactions, so they are read as a ``read_committed`` reader reads them.
"""

from __future__ import annotations

import os
import re
import signal
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.common.core.offset_map import MAP_TOPIC
from ferry.common.errors import DevStackError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from tests.harness.mirroring import warm_group_coordinator
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e

DESTINATION = "rwdst"
PORT = 31892  # away from the other extra clusters' ports (the ACL sync test's end at 31502) and isolated stacks
RECORDS = 20


@pytest.fixture(scope="module")
def cluster(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The local stack with ``rwdst`` of three brokers; stopped again if this module started it."""
    with pytest.MonkeyPatch.context() as patch:
        env = "FERRY_DEV_PORT_" + DESTINATION.upper()
        patch.setenv(env, os.environ.get(env, str(PORT)))
        stack = local_stack.with_clusters([DESTINATION], brokers=3)
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"the cluster of three brokers does not start: {exc}", pytrace=False)
    try:
        warm_group_coordinator(stack, DESTINATION)
        # What tells Ferry the cluster has a third broker while it is away: a replica on it. Kafka's own
        # topics have one replica here, which may sit on any broker; a topic of three replicas is on all.
        admin = kafka_clients.admin({"bootstrap.servers": stack.bootstrap(DESTINATION)})
        create_topics(admin, [NewTopic(f"three-replicas-{uuid.uuid4().hex[:8]}", 1, 3)])
        yield stack
    finally:
        if started:
            processes.down(stack, names=started)
            devstack.forget_extra(started)


def _replicas(admin: Any, topic: str) -> int | None:
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    if meta is None or meta.error is not None or not meta.partitions:
        return None
    return max(len(p.replicas) for p in meta.partitions.values())


def _waiting(worker: Any, route: str) -> float | None:
    text = requests.get(f"{worker.url}/metrics", timeout=5).text
    found = re.search(rf'^ferry_worker_topics_waiting_for_brokers{{route="{re.escape(route)}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else None


def test_a_copy_waits_for_a_restarting_broker_and_gets_every_replica(
    cluster: devstack.Stack, fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("rwait")
    src = {"bootstrap.servers": cluster.bootstrap("src")}
    dst = {"bootstrap.servers": cluster.bootstrap(DESTINATION)}
    create_topics(kafka_clients.admin(src), [NewTopic(topic, 2, 1)])
    producer = kafka_clients.producer(src)
    for i in range(RECORDS):
        producer.produce(topic, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    third = cluster.cluster(DESTINATION).nodes[2]  # a broker, not the controller (the first)
    pid = processes.pid_of(third)
    assert pid is not None, "broker 3 of rwdst is not ours to stop"
    os.kill(pid, signal.SIGTERM)
    admin = kafka_clients.admin(dst)
    wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 2, 60, "rwdst to show two brokers")
    wait_until(lambda: processes.pid_of(third) is None, 60, "broker 3 of rwdst to exit")  # its ports free again

    fleet.extra = {
        "clusters": {"src": src, DESTINATION: dst},
        "routes": [
            {
                "source": "src",
                "destination": DESTINATION,
                "include": [re.escape(topic)],
                "replication_factor": 3,
            }
        ],
        "controller": {"observer_interval_s": 1.0},
    }
    fleet.write_config()
    route = f"src.{DESTINATION}"
    try:
        controller = fleet.wait_for_leader(fleet.start_controller("controller"), timeout=60)
        worker = fleet.start_worker("worker")
        fleet.wait_for_workers(controller, {"worker"}, timeout=60)
        wait_until(lambda: (_waiting(worker, route) or 0) >= 1, 90, "the copy counted as waiting for brokers")
        assert _replicas(admin, topic) is None  # not created with two replicas
    finally:
        processes.up(cluster, deadline_s=180)  # broker 3 back (only what is not running is started)

    wait_until(lambda: _replicas(admin, topic) == 3, 120, f"{topic} created on rwdst with 3 replicas")
    wait_until(lambda: _replicas(admin, MAP_TOPIC) == 3, 60, "the offset-map topic on rwdst with 3 replicas")

    # Read as a reader of an exactly-once destination reads (read_committed): the route writes in
    # transactions, whose commit markers take offsets, so the log-end offsets are not the record count.
    reader = kafka_clients.consumer(dst, group_id=f"reader-{topic}", **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in (0, 1)])
    values: list[bytes] = []

    def arrived() -> bool:
        values.extend(m.value() for m in reader.consume(RECORDS, timeout=1.0) if m.error() is None)
        return len(values) >= RECORDS

    try:
        wait_until(arrived, 90, f"the {RECORDS} records on rwdst")
    finally:
        reader.close()
    assert sorted(values) == sorted(b"%d" % i for i in range(RECORDS))
    wait_until(lambda: _waiting(worker, route) == 0, 30, "no topic waiting any more")
