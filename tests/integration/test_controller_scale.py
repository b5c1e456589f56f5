"""The controller at a small scale (2,000 partitions, 50 fake workers): invariants only, no timings.

The real :class:`controller.service.Controller` in-process and :mod:`bench.fake_workers` (the
worker's ZooKeeper protocol, every assigned partition reported ONLINE) on this test's chroot.
Whitelisting (bulk and single), a worker's failover and a rebalance onto a joining worker must
leave every partition assigned exactly once, live workers balanced within one, no job skipped
(and the observer and lag jobs run), and no transaction over the byte bound.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from ferry.bench.fake_workers import FakeWorker, start_all
from ferry.common.config import parse_config
from ferry.common.model import PartitionKey, WorkerAssignment
from ferry.common.zk.layout import ZkLayout
from ferry.common.zk.state import StateReader
from ferry.controller.api.rest_json import validation_json
from ferry.controller.lead.store import MAX_BYTES_PER_TRANSACTION, Store
from ferry.controller.service import Controller
from ferry.controller.topics.spec import TopicSpec
from ferry.devstack.stack import Stack
from ferry.devstack.support import poll_until

ROUTE = "src.dst"
LAYOUT = ZkLayout("/")
TOPICS, PER_TOPIC, WORKERS = 250, 8, 50
PARTITIONS = TOPICS * PER_TOPIC


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    return poll_until(condition, timeout_s, what, interval=0.05)


class Fleet:
    def __init__(self, chroot: str) -> None:
        self.chroot = chroot
        self.online: dict[str, int] = {}
        self.workers: dict[str, FakeWorker] = {}
        self._lock = threading.Lock()

    def _report(self, worker: str, online: int, at: float) -> None:
        with self._lock:
            self.online[worker] = online

    def start(self, ids: list[str]) -> None:
        new = [
            FakeWorker(connect=self.chroot, layout=LAYOUT, worker_id=w, report=self._report, session_timeout_s=6.0)
            for w in ids
        ]
        self.workers.update({w.worker_id: w for w in new})
        start_all(new)

    def kill(self, worker: str) -> None:
        self.workers.pop(worker).kill()

    def total(self) -> int:
        with self._lock:
            return sum(self.online.values())

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.kill()


@pytest.fixture
def fleet(zk_chroot: str) -> Iterator[Fleet]:
    running = Fleet(zk_chroot)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def controller(zk_chroot: str, local_stack: Stack) -> Iterator[Controller]:
    config = parse_config(
        {
            "zookeeper": {"connect": zk_chroot, "root": "/", "session_timeout_s": 6.0},
            "clusters": {name: {"bootstrap.servers": local_stack.bootstrap(name)} for name in ("src", "dst")},
            "routes": [{"source": "src", "destination": "dst"}],
            "controller": {
                "failover_delay_s": 1.0,
                "rebalance_delay_s": 1.0,
                "observer_interval_s": 1.0,
                "lag_interval_s": 1.0,
                "check_source_topics": False,
            },
        }
    )
    running = Controller(config=config, controller_id="c1", rest_url="http://c1.invalid:9000")
    running.start()
    try:
        wait_for(running.leadership.is_leader, 15, "the controller to lead")
        yield running
    finally:
        running.stop()


def check_invariants(zk_chroot: str, live: set[str]) -> None:
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=15)
    try:
        reader = StateReader(client, LAYOUT)
        ideal, _ = reader.ideal_states()
        wanted = {PartitionKey(k.route, k.topic, p) for k, s in ideal.items() for p in range(s.partitions)}
        assert len(wanted) == PARTITIONS
        owner = {PartitionKey(k.route, k.topic, p): w for k, s in ideal.items() for p, w in s.assignment.items()}
        assert set(owner) == wanted and set(owner.values()) <= live  # every partition has one live worker
        assigned: Counter[PartitionKey] = Counter()
        for worker in reader.children(LAYOUT.assignments):
            got = reader.data(LAYOUT.assignment(worker))
            assert got is not None
            assignment = WorkerAssignment.from_bytes(got[0])
            assert all(owner[p] == worker for p in assignment.partitions)
            assigned.update(assignment.partitions)
        assert set(assigned) == wanted and set(assigned.values()) == {1}  # in exactly one assignment
        loads = Counter(owner.values())
        assert max(loads[w] for w in live) - min(loads[w] for w in live) <= 1  # balanced within one
    finally:
        client.stop()
        client.close()


def test_two_thousand_partitions_on_fifty_workers_keep_the_invariants(
    zk_chroot: str, controller: Controller, fleet: Fleet
) -> None:
    ids = [f"fake-{i:03d}" for i in range(WORKERS)]
    fleet.start(ids)
    names = [f"scale-{i:04d}" for i in range(TOPICS)]
    for start in range(0, TOPICS - 10, 60):  # bulk, as the bench does, then single topics
        batch = names[start : min(start + 60, TOPICS - 10)]
        controller.topics.add_topics([TopicSpec(t, PER_TOPIC) for t in batch])
    for topic in names[TOPICS - 10 :]:
        controller.topics.add_topic(TopicSpec(topic, PER_TOPIC))
    wait_for(lambda: fleet.total() == PARTITIONS, 120, "every partition ONLINE")

    fleet.kill(ids[0])  # a worker's failover
    wait_for(lambda: fleet.total() == PARTITIONS, 120, "the dead worker's partitions ONLINE elsewhere")

    fleet.start(["fake-joiner"])  # a rebalance onto a joining worker
    wait_for(
        lambda: fleet.online.get("fake-joiner", 0) >= PARTITIONS // WORKERS and fleet.total() == PARTITIONS,
        120,
        "the joiner's share ONLINE",
    )
    live = set(ids[1:]) | {"fake-joiner"}
    wait_for(lambda: validation_json(controller.reads.validation())["ok"], 60, "the validation to be clean")
    check_invariants(zk_chroot, live)

    wait_for(
        lambda: all(controller.metrics.job_counts().get(j, {}).get("runs", 0) >= 2 for j in ("observe", "lag")),
        30,
        "the observer and lag jobs to run",
    )
    counts = controller.metrics.job_counts()
    assert all(c["skips"] == 0 and c["failures"] == 0 for c in counts.values()), counts
    store: Store = controller.store
    assert 0 < store.max_transaction_bytes <= MAX_BYTES_PER_TRANSACTION
