"""Core replication, proven with real `ferry controller` and `ferry worker` processes.

Each test runs its own fleet (own ZooKeeper root, own topic) against the local stack.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import requests

from tests.harness.mirroring import PARTITIONS, add_topic, mirror_with_two_workers
from tests.harness.processes import Fleet, RecordLedger, wait_until


def test_100k_records_arrive_identical_and_in_order(fleet: Fleet, topic_name: Callable[[str], str]) -> None:
    topic = topic_name("bulk")
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS)
    ledger.create_source_topic()
    ledger.produce(100_000)
    controller = fleet.start_controller("c1")
    workers = [fleet.start_worker(f"w{i}") for i in (1, 2)]
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {w.name for w in workers})
    add_topic(fleet, controller.url, topic)

    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    assert result["records"] == 100_000
    owners = fleet.online_by_worker(controller, topic)
    assert sorted(owners) == list(range(PARTITIONS))
    assert sorted(owners.values()).count("w1") == 4  # spread 4/4 over two workers


def test_a_topic_posted_with_a_start_time_is_copied_from_the_first_record_at_or_after_it(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("start")
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS)
    ledger.create_source_topic()
    ledger.produce(2000)  # record n has the CreateTime base_timestamp_ms + n
    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1"})
    response = requests.post(
        f"{controller.url}/topics", json={"topic": topic, "start": ledger.base_timestamp_ms + 1000}, timeout=10
    )
    assert response.status_code == 201, response.text

    def caught_up() -> bool:
        offsets = requests.get(f"{controller.url}/offset/{topic}", timeout=10).json()["offsets"]
        return len(offsets) == PARTITIONS and all(o["lag"] == 0 for o in offsets)

    wait_until(caught_up, 60, "the worker to commit up to the source's log end")
    copied = sorted(
        int(key.decode().removeprefix("key-")) for records in ledger.read(ledger.dst).values() for key, *_ in records
    )
    assert copied == list(range(1000, 2000)), "from the start on, each record once; nothing before it"


def test_kill_9_of_a_worker_loses_nothing_duplicates_nothing_and_fails_over_in_time(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("kill9")
    run = mirror_with_two_workers(fleet, topic)
    ledger, controller, victim, survivor = run.ledger, run.controller, run.w1, run.w2

    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=4000)
    victim.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    bound = fleet.session_timeout_s + fleet.failover_delay_s + 5
    wait_until(
        lambda: (
            set(fleet.online_by_worker(controller, topic).values()) == {"w2"}
            and len(fleet.online_by_worker(controller, topic)) == PARTITIONS
        ),
        bound + 10,
        "the survivor to hold every partition",
    )
    resumed_after = time.monotonic() - killed_at
    ledger.wait_for_progress(30, "the survivor to copy records after its takeover")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    # The survivor resumes from the destination's own record of progress (exact offsets): the records
    # the victim wrote after its last commit are found by the look-back and not copied again.
    result = ledger.check(allow_duplicates=False)
    print(
        f"kill -9: {result['records']} records, {result['duplicates']} duplicates, "
        f"resumed after {resumed_after:.1f}s (bound {bound:.0f}s)"
    )
    assert resumed_after <= bound
    assert survivor.alive()


def test_kill_9_of_the_leading_controller(fleet: Fleet, topic_name: Callable[[str], str]) -> None:
    topic = topic_name("ctlkill")
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS)
    ledger.create_source_topic()
    c1, c2 = fleet.start_controller("c1"), fleet.start_controller("c2")
    fleet.start_worker("w1")
    fleet.start_worker("w2")
    leader = fleet.wait_for_leader(c1, c2)
    standby = c2 if leader is c1 else c1
    wait_until(lambda: requests.get(f"{standby.url}/health", timeout=2).ok, 30, "the standby's REST API")
    fleet.wait_for_workers(leader, {"w1", "w2"})
    add_topic(fleet, standby.url, topic)  # a standby forwards the write to the leader
    wait_until(lambda: len(fleet.online_by_worker(standby, topic)) == PARTITIONS, 30, "all partitions ONLINE")

    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=2000)
    leader.signal(signal.SIGKILL)
    # While no controller leads, the standby keeps answering and the workers keep copying.
    before = ledger.destination_count()

    def standby_answers_and_copying_goes_on() -> bool:
        assert requests.get(f"{standby.url}/health", timeout=2).status_code == 200
        assert requests.get(f"{standby.url}/topics/{topic}", timeout=2).status_code == 200
        return ledger.destination_count() > before

    wait_until(standby_answers_and_copying_goes_on, 10, "replication to go on while no controller leads")
    fleet.wait_for_leader(standby, timeout=fleet.session_timeout_s + 15)
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    ledger.check(allow_duplicates=False)


def test_a_joining_worker_gets_a_fair_share_after_the_rebalance_delay(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("join")
    run = mirror_with_two_workers(fleet, topic)
    ledger, controller = run.ledger, run.controller

    ledger.produce_steadily(rate_per_s=3000)
    fleet.start_worker("w3")
    fleet.wait_for_workers(controller, {"w1", "w2", "w3"})
    joined_at = time.monotonic()

    def fair() -> bool:
        owners = fleet.online_by_worker(controller, topic)
        counts = sorted(list(owners.values()).count(w) for w in ("w1", "w2", "w3"))
        return len(owners) == PARTITIONS and counts == [2, 3, 3]

    wait_until(fair, fleet.rebalance_delay_s + 30, "a 3/3/2 spread after the rebalance")
    assert time.monotonic() - joined_at >= fleet.rebalance_delay_s - 0.5, "rebalanced before the delay"
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    ledger.check(allow_duplicates=False)


def test_sigterm_of_a_worker_moves_its_partitions_with_no_duplicates(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("sigterm")
    run = mirror_with_two_workers(fleet, topic)
    ledger, controller, leaving, staying = run.ledger, run.controller, run.w1, run.w2

    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=4000)
    leaving.signal(signal.SIGTERM)
    assert leaving.wait(30) == 0
    wait_until(
        lambda: (
            set(fleet.online_by_worker(controller, topic).values()) == {"w2"}
            and len(fleet.online_by_worker(controller, topic)) == PARTITIONS
        ),
        15,
        "w2 to hold every partition",
    )
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    ledger.check(allow_duplicates=False)
    assert staying.alive()
