"""A topic mirrored by a small fleet (one controller, two workers), and a fresh cluster's group coordinator warmed
up."""

from __future__ import annotations

from dataclasses import dataclass

import requests
from confluent_kafka import TopicPartition

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack
from tests.harness.processes import FerryProcess, Fleet, RecordLedger, wait_until

PARTITIONS = 8


def add_topic(fleet: Fleet, controller_url: str, topic: str) -> None:
    response = requests.post(f"{controller_url}/topics", json={"topic": topic, "numPartitions": PARTITIONS}, timeout=10)
    assert response.status_code == 201, response.text


@dataclass
class Mirroring:
    ledger: RecordLedger
    controller: FerryProcess
    w1: FerryProcess
    w2: FerryProcess


def mirror_with_two_workers(fleet: Fleet, topic: str, delivery_guarantee: str | None = None) -> Mirroring:
    """A source topic, one controller, workers w1 and w2, the topic added and every partition ONLINE.

    ``delivery_guarantee``: the route's key; None leaves it out, as README's route does (exactly once)."""
    if delivery_guarantee is not None:
        fleet.extra = {
            **fleet.extra,
            "routes": [{"source": "src", "destination": "dst", "delivery_guarantee": delivery_guarantee}],
        }
        fleet.write_config()
    transactional = delivery_guarantee != "at_least_once"
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS, transactional_destination=transactional)
    ledger.create_source_topic()
    controller = fleet.start_controller("c1")
    w1, w2 = fleet.start_worker("w1"), fleet.start_worker("w2")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1", "w2"})
    add_topic(fleet, controller.url, topic)
    wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == PARTITIONS, 30, "all partitions ONLINE")
    return Mirroring(ledger, controller, w1, w2)


def warm_group_coordinator(stack: devstack.Stack, name: str) -> None:
    """Waits until a fresh cluster's group coordinator answers (``__consumer_offsets`` created and loaded).

    librdkafka bug (confluentinc/librdkafka#5586, open): an ``assign()`` without an offset whose
    committed-offset fetch gets a request-level NOT_COORDINATOR never starts fetching. The worker
    does not depend on this warm-up (it assigns explicit offsets, worker/position/start_offsets.py, and
    tests/integration/test_worker.py copies with a fresh group and no warm-up); it is here so that a
    brand-new coordinator's first "not available" answers do not defer partitions and slow the tests.
    """
    consumer = kafka_clients.consumer({"bootstrap.servers": stack.bootstrap(name)}, group_id="ferry-tests-warmup")
    try:
        wait_until(
            lambda: consumer.committed([TopicPartition("ferry-tests-warmup", 0)], timeout=5) is not None,
            120,
            f"the group coordinator of {name}",
        )
    finally:
        consumer.close()
