"""Zero loss and zero duplicates through faults (exact offsets): a destination outage with producer
timeouts and a worker killed before it handled them, a ZooKeeper outage longer than the session
timeout, and (measured, not asserted) what a paused worker still writes after its partitions moved.

Each test stops and starts servers of the local stack (this worktree's own ports), and puts them
back even when it fails.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ferry.devstack import stack as devstack
from tests.harness.mirroring import PARTITIONS, mirror_with_two_workers
from tests.harness.processes import FerryProcess, Fleet, wait_until


@contextmanager
def _server_down(stack: devstack.Stack, name: str) -> Iterator[None]:
    devstack.down(stack, names=[name], echo=lambda _: None)
    try:
        yield
    finally:
        devstack.up(stack, deadline_s=180, echo=lambda _: None)


def _all_on(fleet: Fleet, controller: FerryProcess, topic: str, workers: set[str]) -> Callable[[], bool]:
    def check() -> bool:
        owners = fleet.online_by_worker(controller, topic)
        return len(owners) == PARTITIONS and set(owners.values()) <= workers

    return check


def test_a_destination_outage_with_producer_timeouts_and_a_kill_loses_and_duplicates_nothing(
    fleet: Fleet,
    topic_name: Callable[[str], str],
) -> None:
    """Deliveries time out (message.timeout.ms 3 s) while the destination broker is down, so the
    idempotent producer may leave gaps; one worker is killed before it handled its failures. The
    resume rule (committed offset + the set already present) copies each record exactly once."""
    fleet.extra = {"worker": {"producer": {"message.timeout.ms": 3000}}}
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


def test_a_paused_worker_loses_nothing_and_writes_again_only_records_from_before_its_pause(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    """SIGSTOP past the session timeout, partitions moved, SIGCONT: librdkafka's threads may send
    what was queued before Python notices the lost session and purges; only broker-side fencing
    (transactions, KIP-618) would stop that. Nothing may be lost, and what is written twice can
    only be records the paused worker had fetched, so produced before it stopped."""
    topic = topic_name("paused")
    run = mirror_with_two_workers(fleet, topic)
    ledger = run.ledger
    ledger.produce_steadily(rate_per_s=4000)
    ledger.wait_for_destination(timeout=30, at_least=4000)
    run.w1.signal(signal.SIGSTOP)
    produced_before_the_pause = ledger.produced
    try:
        wait_until(_all_on(fleet, run.controller, topic, {"w2"}), 60, "w2 to hold every partition")
        time.sleep(2)  # the fault: w1 stays stopped a while after its partitions moved
    finally:
        run.w1.signal(signal.SIGCONT)
    # w1 finds its session lost, purges what its producers still hold and registers again; whatever it
    # sent before the purge is at the destination by then.
    fleet.wait_for_workers(run.controller, {"w1", "w2"}, timeout=60)
    ledger.wait_for_progress(30, "copying after w1 came back")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=True)  # asserts that nothing is lost and the order holds
    assert result["duplicates"] <= produced_before_the_pause, result
