"""Zero loss and zero duplicates through faults (exact offsets): a destination outage with producer
timeouts and a worker killed before it handled them, a ZooKeeper outage longer than the session
timeout, and a paused worker whose partitions moved (fenced: what it still sends never commits).

Each test stops and starts servers of the local stack (this worktree's own ports), and puts them
back even when it fails.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import requests

from ferry.devstack import processes
from ferry.devstack import stack as devstack
from tests.harness.mirroring import PARTITIONS, add_topic, mirror_with_two_workers
from tests.harness.processes import FerryProcess, Fleet, RecordLedger, wait_until
from tests.harness.tcp_proxy import TcpProxy


@contextmanager
def _server_down(stack: devstack.Stack, name: str) -> Iterator[None]:
    processes.down(stack, names=[name], echo=lambda _: None)
    try:
        yield
    finally:
        processes.up(stack, deadline_s=180, echo=lambda _: None)


def _all_on(fleet: Fleet, controller: FerryProcess, topic: str, workers: set[str]) -> Callable[[], bool]:
    def check() -> bool:
        owners = fleet.online_by_worker(controller, topic)
        return len(owners) == PARTITIONS and set(owners.values()) <= workers

    return check


@pytest.mark.parametrize(
    "producer",
    [{"message.timeout.ms": 3000}, {"enable.gapless.guarantee": True}],
    ids=["producer-timeouts", "gapless-without-timeouts"],
)
def test_a_destination_outage_with_producer_timeouts_and_a_kill_loses_and_duplicates_nothing(
    fleet: Fleet,
    topic_name: Callable[[str], str],
    producer: dict[str, int],
) -> None:
    """The destination broker is down for 5 s and one worker is killed before it handled what that did.
    With a delivery timeout of 3 s deliveries time out meanwhile, so the idempotent producer may leave
    gaps; gap-less with no delivery timeout (an operator's choice) records wait for the broker instead. Either
    way the resume rule (committed offset + the set already present) copies each record exactly once."""
    fleet.extra = {"worker": {"producer": producer}}
    fleet.write_config()
    topic = topic_name("dstdown")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    ledger.produce_steadily(rate_per_s=2000)
    ledger.wait_for_destination(timeout=30, at_least=2000)
    with _server_down(fleet.stack, "dst"):
        time.sleep(5)  # the fault lasts past message.timeout.ms; not waiting for any logic
        run.w1.signal(signal.SIGKILL)
    wait_until(_all_on(fleet, run.controller, topic, {"w2"}), 120, "w2 to hold every partition after the outage")
    ledger.wait_for_progress(60, "w2 to copy after the outage")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    print(f"destination outage + kill -9: {result['records']} records, {result['duplicates']} duplicates")


def test_a_zookeeper_outage_longer_than_the_session_loses_and_duplicates_nothing(
    fleet: Fleet,
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("zkdown")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    ledger.produce_steadily(rate_per_s=2000)
    ledger.wait_for_destination(timeout=30, at_least=2000)
    with _server_down(fleet.stack, "zookeeper"):
        time.sleep(fleet.session_timeout_s * 2 + 2)  # the fault outlasts the session timeout
    wait_until(_all_on(fleet, run.controller, topic, {"w1", "w2"}), 120, "every partition ONLINE again")
    ledger.wait_for_progress(60, "copying after the outage")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    print(f"ZooKeeper outage: {result['records']} records, {result['duplicates']} duplicates")


def test_exactly_once_routes_copy_on_through_a_zookeeper_outage_far_longer_than_every_deadline(
    fleet: Fleet,
    topic_name: Callable[[str], str],
) -> None:
    """ZooKeeper stopped for many times the session timeout and ``retry_deadline_s`` under a steady
    stream: the destination keeps growing throughout (sampled every few seconds), no worker exits and
    each says since when ZooKeeper is unreachable; once it is back, the fleet registers again and
    ``/validation`` is clean, with 0 lost and 0 duplicated for a read_committed consumer. Controllers
    are not in the data path: one that gave ZooKeeper up is started again, as its supervisor would.
    FERRY_TEST_ZK_OUTAGE_S sets the outage (30 s by default: 7 session timeouts, 3 retry deadlines)."""
    outage_s = float(os.environ.get("FERRY_TEST_ZK_OUTAGE_S", "30"))
    fleet.extra = {"zookeeper": {"retry_deadline_s": 10}}
    topic = topic_name("zkaway")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    ledger.produce_steadily(rate_per_s=2000)
    ledger.wait_for_destination(timeout=30, at_least=2000)
    samples: list[int] = []
    with _server_down(fleet.stack, "zookeeper"):
        ends = time.monotonic() + outage_s
        samples.append(ledger.destination_count())
        while time.monotonic() < ends:  # the fault's length: each sample waits for the destination to grow
            last = samples[-1]
            samples.append(
                wait_until(
                    lambda last=last: (count := ledger.destination_count()) > last and count,
                    15,
                    "the destination to grow while ZooKeeper is away",
                    interval=2,
                )
            )
        for worker in (run.w1, run.w2):
            assert worker.alive(), worker.log_tail()
            health = requests.get(f"{worker.url}/health", timeout=5).json()
            assert health.get("zookeeper", "").startswith("unreachable since"), health
    stalled = [(i, a, b) for i, (a, b) in enumerate(itertools.pairwise(samples)) if b <= a]
    assert not stalled, f"the destination stopped growing during the outage: {samples}"
    controller = run.controller if run.controller.alive() else fleet.start_controller("c2")
    fleet.wait_for_leader(controller, timeout=60)
    fleet.wait_for_workers(controller, {"w1", "w2"}, timeout=90)
    wait_until(_all_on(fleet, controller, topic, {"w1", "w2"}), 120, "every partition ONLINE again")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    assert run.w1.alive() and run.w2.alive()
    wait_until(
        lambda: requests.get(f"{controller.url}/validation", timeout=10).json()["ok"] is True,
        60,
        "a clean /validation",
    )
    print(f"ZooKeeper away {outage_s:.0f} s: destination samples {samples}; {result['records']} records, 0 duplicates")


def test_a_worker_cut_off_from_zookeeper_only_is_fenced_before_its_partitions_move(
    fleet: Fleet,
    topic_name: Callable[[str], str],
) -> None:
    """w1 reaches ZooKeeper through a proxy the test cuts, while its Kafka traffic goes on: it copies on
    until its session expired and the leader fenced its writer and gave its partitions to w2. What it
    wrote meanwhile never commits: a read_committed consumer sees every record once. When it reaches
    ZooKeeper again it registers again and takes part."""
    topic = topic_name("cutoff")
    fleet.extra = {"routes": [{"source": "src", "destination": "dst"}]}  # exactly once: the default
    fleet.write_config()
    ledger = RecordLedger(fleet.stack, topic, PARTITIONS, transactional_destination=True)
    ledger.create_source_topic()
    zookeeper = fleet.stack.zookeeper.address
    host, port = zookeeper.rsplit(":", 1)
    proxy = TcpProxy(host, int(port))
    try:
        controller = fleet.start_controller("c1")
        w1 = fleet.start_worker("w1", zookeeper=proxy.address)
        fleet.start_worker("w2")
        fleet.wait_for_leader(controller)
        fleet.wait_for_workers(controller, {"w1", "w2"})
        add_topic(fleet, controller.url, topic)
        wait_until(_all_on(fleet, controller, topic, {"w1", "w2"}), 60, "every partition ONLINE")
        wait_until(lambda: "w1" in fleet.online_by_worker(controller, topic).values(), 30, "w1 to hold partitions")
        ledger.produce_steadily(rate_per_s=2000)
        ledger.wait_for_destination(timeout=30, at_least=2000)
        proxy.cut()
        wait_until(_all_on(fleet, controller, topic, {"w2"}), 90, "w2 to hold every partition")
        wait_until(lambda: "fenced" in w1.log.read_text(), 60, "w1 to report that it was fenced")
        ledger.wait_for_progress(30, "w2 to copy w1's partitions")
        assert w1.alive(), w1.log_tail()
        proxy.restore()
        fleet.wait_for_workers(controller, {"w1", "w2"}, timeout=90)
        ledger.stop_producing()
        ledger.wait_for_destination(timeout=120)
        result = ledger.check(allow_duplicates=False)  # read_committed: nothing lost, nothing twice
        print(f"worker cut off from ZooKeeper: {result['records']} records, 0 duplicates")
    finally:
        proxy.close()


def test_a_busy_worker_killed_on_an_exactly_once_route_leaves_every_record_once(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    """kill -9 of a worker in the middle of its transactions: the leader fences its writer (its open
    transaction is aborted) before w2 takes its partitions and resumes from what the destination
    committed. A read_committed consumer sees every record once."""
    topic = topic_name("killed")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=4000)
    run.w1.signal(signal.SIGKILL)
    wait_until(_all_on(fleet, run.controller, topic, {"w2"}), 90, "w2 to hold every partition")
    ledger.wait_for_progress(30, "w2 to copy w1's partitions")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    print(f"kill -9 on an exactly-once route: {result['records']} records, 0 duplicates")


def test_a_worker_paused_twice_is_fenced_and_a_read_committed_consumer_sees_every_record_once(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    """SIGSTOP past the session timeout, partitions moved, SIGCONT, twice: librdkafka's threads may send
    what was queued before Python notices anything, but the leader fenced the paused worker's
    transactional writer before it moved the partitions, so none of that ever commits. Each time the
    paused worker says it was fenced and takes part again (the rebalance gives it partitions back), and
    the second pause hits whichever worker then holds more. A read_committed consumer of the destination
    sees every record exactly once."""
    topic = topic_name("paused")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    workers = {"w1": run.w1, "w2": run.w2}
    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=4000)
    for _ in range(2):
        owners = fleet.online_by_worker(run.controller, topic)
        paused = max(workers, key=lambda name: sum(1 for owner in owners.values() if owner == name))
        other = next(name for name in workers if name != paused)
        fenced_before = workers[paused].log.read_text().count("fenced:")
        workers[paused].signal(signal.SIGSTOP)
        try:
            wait_until(_all_on(fleet, run.controller, topic, {other}), 60, f"{other} to hold every partition")
            ledger.wait_for_progress(30, f"{other} to copy {paused}'s partitions")
        finally:
            workers[paused].signal(signal.SIGCONT)
        wait_until(
            lambda paused=paused, before=fenced_before: workers[paused].log.read_text().count("fenced:") > before,
            60,
            f"{paused} to report that it was fenced",
        )
        fleet.wait_for_workers(run.controller, {"w1", "w2"}, timeout=60)
        wait_until(
            lambda: set(fleet.online_by_worker(run.controller, topic).values()) == {"w1", "w2"},
            60,
            "both workers to hold partitions again",
        )
        ledger.wait_for_progress(30, f"copying after {paused} came back")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)  # read_committed: nothing lost, nothing twice, in order
    print(f"worker paused twice: {result['records']} records, {result['duplicates']} duplicates")
