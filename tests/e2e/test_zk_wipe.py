"""Ferry's whole ZooKeeper root deleted under a running fleet (docs/upgrading.md, "Ferry's ZooKeeper state").

Records and offsets live in Kafka, so a fleet whose root is gone rebuilds its control state by itself:
the controllers campaign again, the workers register again, the observer whitelists the topics that
the route's ``include`` matches, and copying resumes where it stopped.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import requests
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NotEmptyError

from tests.harness.mirroring import PARTITIONS
from tests.harness.processes import FerryProcess, Fleet, RecordLedger, wait_until


def _wipe(zk: KazooClient, root: str) -> int:
    """Deletes ``root`` recursively; running processes re-create nodes meanwhile, so it tries again
    until one delete went through. Returns the number of attempts."""
    attempts = 0

    def deleted() -> bool:
        nonlocal attempts
        attempts += 1
        try:
            zk.delete(root, recursive=True)
        except (NotEmptyError, NoNodeError):  # a node came back, or went while deleting: again
            return False
        return True

    wait_until(deleted, 30, f"{root} deleted", interval=0)
    return attempts


def _leading(controllers: list[FerryProcess]) -> FerryProcess | None:
    for controller in controllers:
        if requests.get(f"{controller.url}/health", timeout=2).json().get("leader"):
            return controller
    return None


def _all_online_at(controllers: list[FerryProcess], fleet: Fleet, topic: str) -> bool:
    leader = _leading(controllers)
    if leader is None:
        return False
    owners = fleet.online_by_worker(leader, topic)
    return sorted(owners) == list(range(PARTITIONS)) and set(owners.values()) == {"w1", "w2"}


def test_a_fleet_whose_zookeeper_root_is_deleted_recovers_by_itself_and_loses_no_record(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("wipe")
    fleet.extra = {
        # Other tests' topics live on the same cluster: include only this test's.
        "routes": [{"source": "src", "destination": "dst", "include": [re.escape(topic)]}],
        "controller": {"observer_interval_s": 1.0},
    }
    fleet.write_config()
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS)
    ledger.create_source_topic()
    controllers = [fleet.start_controller("c1"), fleet.start_controller("c2")]
    fleet.start_worker("w1")
    fleet.start_worker("w2")
    first = fleet.wait_for_leader(*controllers)
    fleet.wait_for_workers(first, {"w1", "w2"})
    wait_until(lambda: _all_online_at(controllers, fleet, topic), 60, "every partition ONLINE on w1 and w2")
    ledger.produce_steadily(rate_per_s=2000)
    ledger.wait_for_destination(timeout=30, at_least=2000)

    zk = KazooClient(hosts=fleet.stack.zookeeper.address)
    zk.start(timeout=15)
    try:
        attempts = _wipe(zk, fleet.zk_root)
    finally:
        zk.stop()
        zk.close()

    # The leader finds its election node gone and campaigns again, the workers register again, the
    # observer whitelists the topic again and the leader assigns it: copying resumes.
    wait_until(lambda: _all_online_at(controllers, fleet, topic), 90, "every partition ONLINE again after the wipe")
    ledger.wait_for_progress(30, "copying after the wipe")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    result = ledger.check(allow_duplicates=True)
    print(f"wiped in {attempts} attempts; {result['records']} records, {result['duplicates']} duplicates")
    assert result["records"] == ledger.produced
    assert all(p.alive() for p in fleet.processes), "no process exited"
