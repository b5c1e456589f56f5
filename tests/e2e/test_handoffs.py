"""Partitions moved between live workers faster than they acknowledge: nothing lost, nothing twice.

Three workers copy an 8-partition topic on a route as README configures it (no ``delivery_guarantee``
key) with a transaction every 4 s, under a steady stream of 2,000 records/s. For 90 s the test moves
partitions between the live workers every half second to two seconds: it drains a worker and
uncordons it again, chains drains between two workers less than a second apart (a partition moves
again before its new owner could acknowledge it), cordons and uncordons, and starts a fourth worker
and stops it again (SIGTERM: it drains). A read_committed consumer of the destination then sees every
source record once, in source order per partition, and the leader never saw a partition held by two
live workers.
"""

from __future__ import annotations

import random
import re
import signal
import time
from collections.abc import Callable

import requests

from tests.harness.processes import FerryProcess, Fleet, RecordLedger, wait_until

PARTITIONS = 8
RATE_PER_S = 2_000
NEMESIS_S = 90.0
SEED = 20261128


def _post(url: str, path: str) -> None:
    response = requests.post(f"{url}{path}", timeout=30)
    assert response.status_code == 200, response.text


def _held_twice(controller: FerryProcess) -> float:
    """The leader's ``ferry_controller_partitions_held_twice`` (its REST port also serves /metrics)."""
    text = requests.get(f"{controller.url}/metrics", timeout=5).text
    found = re.search(r"^ferry_controller_partitions_held_twice (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_moves_between_live_workers_faster_than_they_acknowledge_lose_and_duplicate_nothing(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("handoffs")
    fleet.rebalance_delay_s = 0.5  # uncordons and joins rebalance at once: more moves
    fleet.extra = {"worker": {"transaction_interval_s": 4}, "routes": [{"source": "src", "destination": "dst"}]}
    fleet.write_config()
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS, transactional_destination=True)
    ledger.create_source_topic()
    controller = fleet.start_controller("c1")
    workers = {name: fleet.start_worker(name) for name in ("w1", "w2", "w3")}
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, set(workers))
    response = requests.post(f"{controller.url}/topics", json={"topic": topic, "numPartitions": PARTITIONS}, timeout=10)
    assert response.status_code == 201, response.text
    wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == PARTITIONS, 60, "all partitions ONLINE")

    ledger.produce_steadily(RATE_PER_S)
    ledger.wait_for_destination(60, at_least=RATE_PER_S)
    rng = random.Random(SEED)
    url = controller.url
    fourth: FerryProcess | None = None
    done: list[str] = []
    ends = time.monotonic() + NEMESIS_S
    while time.monotonic() < ends:
        a, b = rng.sample(sorted(workers), 2)
        move = rng.choice(["drain", "chain", "cordon", "join" if fourth is None else "leave"])
        if move == "drain":
            _post(url, f"/workers/{a}/drain")
            time.sleep(rng.uniform(0.5, 2.0))  # the nemesis's own pace, not a wait for logic
            _post(url, f"/workers/{a}/uncordon")
        elif move == "chain":  # a's partitions go to b and c; within a second b's go too, a takes them
            _post(url, f"/workers/{a}/drain")
            time.sleep(rng.uniform(0.2, 0.9))
            _post(url, f"/workers/{b}/drain")
            _post(url, f"/workers/{a}/uncordon")
            time.sleep(rng.uniform(0.2, 0.9))
            _post(url, f"/workers/{b}/uncordon")
        elif move == "cordon":
            _post(url, f"/workers/{a}/cordon")
            time.sleep(rng.uniform(0.5, 2.0))
            _post(url, f"/workers/{a}/uncordon")
        elif move == "join":
            fourth = fleet.start_worker(f"w4-{len(done)}")
        else:
            assert fourth is not None
            fourth.signal(signal.SIGTERM)  # it drains and leaves
            fourth = None
        done.append(move)
        time.sleep(rng.uniform(0.5, 2.0))
    if fourth is not None:
        fourth.signal(signal.SIGTERM)
    for name in workers:
        _post(url, f"/workers/{name}/uncordon")

    ledger.stop_producing()
    wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == PARTITIONS, 90, "all partitions ONLINE again")
    ledger.wait_for_destination(120)
    result = ledger.check(allow_duplicates=True)
    print(
        f"\nhandoffs: {len(done)} moves ({', '.join(f'{m} x{done.count(m)}' for m in sorted(set(done)))}), "
        f"{result['records']} records, {result['duplicates']} duplicates"
    )
    assert result["duplicates"] == 0, f"{result['duplicates']} records copied twice"
    assert _held_twice(controller) == 0
    dead = [p.name for p in workers.values() if not p.alive()]
    assert not dead, f"workers died: {dead}"
