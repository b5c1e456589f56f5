"""The core guarantees across Kafka releases: an older source with the pinned (newest) destination, and the
reverse.

Each older release runs as one extra cluster of the local stack, started once for this module (small
heap) and stopped at its end if this module started it: Kafka 3.9 in KRaft mode and Kafka 2.8 in
ZooKeeper mode (its metadata under a chroot of the stack's ZooKeeper). Each direction is checked for
what an operator moving off an old cluster relies on: every record arrives with its key, value,
headers and timestamp, in order; a worker killed with -9 is replaced without a lost or duplicated
record; a consumer group's committed offset on the source is translated and committed on the
destination. docs/compatibility.md lists the pairs this module covers.

The routes write exactly once (the default), in transactions on whichever cluster is the destination:
records there are counted by reading them read_committed, and a group lands right after the copy of
the last record it read (the route's transaction markers take destination offsets too).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil
import pytest
import requests

from ferry.common.errors import DevStackError
from ferry.common.paths import jars_dir
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import commit_offset, committed_offset
from tests.harness import read_committed
from tests.harness.mirroring import warm_group_coordinator
from tests.harness.processes import Fleet, RecordLedger, wait_until

# The older cluster of each release, on ports of its own (away from every other extra cluster's).
OLDER = {"kafka-3.9": ("old39", 31392), "kafka-2.8": ("old28", 31402)}
PARTITIONS = 4


@dataclass(frozen=True)
class Pair:
    """A route's two clusters as the fleet names them, ``src`` and ``dst``, and what each runs."""

    src: dict[str, str]
    dst: dict[str, str]
    label: str


@pytest.fixture(scope="module", params=list(OLDER))
def older(request: pytest.FixtureRequest, local_stack: devstack.Stack) -> Iterator[tuple[str, dict[str, str]]]:
    """One cluster of an older Kafka release: (release, client properties)."""
    version = request.param
    name, port = OLDER[version]
    with pytest.MonkeyPatch.context() as patch:
        env = "FERRY_DEV_PORT_" + name.upper()
        patch.setenv(env, os.environ.get(env, str(port)))
        stack = local_stack.with_clusters([name], version=version)
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"cluster {name} ({version}) does not start: {exc}", pytrace=False)
    try:
        classpath = f"{jars_dir(version)}/*"
        for node in stack.cluster(name).nodes:
            pid = processes.pid_of(node)
            if pid is None or classpath not in psutil.Process(pid).cmdline():
                pytest.fail(
                    f"cluster {name} runs another Kafka release (started earlier): stop it first", pytrace=False
                )
        warm_group_coordinator(stack, name)
        yield version, {"bootstrap.servers": stack.bootstrap(name)}
    finally:
        if started:
            processes.down(stack, names=started)
            devstack.forget_extra(started)  # `ferry dev status` need not list it any more


@pytest.fixture(params=["older-to-newest", "newest-to-older"])
def pair(request: pytest.FixtureRequest, older: tuple[str, dict[str, str]], local_stack: devstack.Stack) -> Pair:
    version, conf = older
    if request.param == "older-to-newest":
        return Pair(conf, {"bootstrap.servers": local_stack.bootstrap("dst")}, f"{version} -> {devstack.DEFAULT_KAFKA}")
    return Pair({"bootstrap.servers": local_stack.bootstrap("src")}, conf, f"{devstack.DEFAULT_KAFKA} -> {version}")


def _route(fleet: Fleet, pair: Pair, **extra: Any) -> None:
    """Points the fleet's clusters ``src`` and ``dst`` at the pair's."""
    fleet.extra = {"clusters": {"src": pair.src, "dst": pair.dst}, **extra}
    fleet.write_config()


def _ledger(fleet: Fleet, pair: Pair, topic: str, partitions: int = PARTITIONS) -> RecordLedger:
    ledger = RecordLedger(fleet.stack, topic, partitions, src=pair.src, dst=pair.dst, transactional_destination=True)
    ledger.create_source_topic()
    return ledger


def _start(fleet: Fleet, topic: str, workers: tuple[str, ...], partitions: int = PARTITIONS) -> Any:
    """A controller and ``workers``, ``topic`` added and every partition ONLINE; returns the controller."""
    controller = fleet.start_controller("c1")
    for worker in workers:
        fleet.start_worker(worker)
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, set(workers))
    response = requests.post(f"{controller.url}/topics", json={"topic": topic, "numPartitions": partitions}, timeout=10)
    assert response.status_code == 201, response.text
    wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == partitions, 60, "all partitions ONLINE")
    return controller


def test_records_arrive_with_their_keys_headers_and_timestamps_in_order(
    fleet: Fleet, pair: Pair, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("records")
    _route(fleet, pair)
    ledger = _ledger(fleet, pair, topic)
    ledger.produce(5_000)
    _start(fleet, topic, ("w1",))
    ledger.produce(5_000)  # some copied from the log, some as they arrive
    ledger.wait_for_destination(timeout=90)
    result = ledger.check(allow_duplicates=False)
    assert result == {"records": 10_000, "duplicates": 0}, pair.label


def test_a_worker_killed_with_minus_9_is_replaced_with_nothing_lost_or_copied_twice(
    fleet: Fleet, pair: Pair, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("kill9")
    _route(fleet, pair)
    ledger = _ledger(fleet, pair, topic)
    controller = _start(fleet, topic, ("w1", "w2"))
    victim = next(p for p in fleet.processes if p.name == "w1")
    ledger.produce_steadily(rate_per_s=2_000)
    ledger.wait_for_destination(timeout=30, at_least=2_000)
    victim.signal(signal.SIGKILL)
    wait_until(
        lambda: fleet.online_by_worker(controller, topic) == dict.fromkeys(range(PARTITIONS), "w2"),
        fleet.session_timeout_s + fleet.failover_delay_s + 20,
        "the survivor to hold every partition",
    )
    ledger.wait_for_progress(30, "the survivor to copy records after its takeover")
    ledger.stop_producing()
    ledger.wait_for_destination(timeout=60)
    # The survivor resumes from the destination's own record of progress: exact offsets, no duplicates.
    result = ledger.check(allow_duplicates=False)
    assert result["duplicates"] == 0 and result["records"] == ledger.produced, pair.label


def test_a_groups_committed_offset_is_translated_and_committed_on_the_destination(
    fleet: Fleet, pair: Pair, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("groups")
    group = f"app-{topic[-8:]}"
    _route(
        fleet,
        pair,
        routes=[{"source": "src", "destination": "dst", "groups": [f"{group}.*"]}],
        controller={"checkpoint_interval_s": 1, "lag_interval_s": 1},
    )
    ledger = _ledger(fleet, pair, topic, partitions=1)
    ledger.produce(3_000)
    controller = _start(fleet, topic, ("w1",), partitions=1)

    def committed_to_the_end() -> bool:
        offsets = requests.get(f"{controller.url}/offset/{topic}", timeout=5).json()["offsets"]
        return len(offsets) == 1 and offsets[0]["lag"] == 0

    # The offset map reaches the destination with the worker's commits: once they reach the source's
    # end, the map covers every record, and the group's offset translates exactly.
    wait_until(committed_to_the_end, 60, "the worker to commit up to the source's log end")
    commit_offset(pair.src, group, topic, 2_000)

    def translated() -> dict[str, Any] | None:
        body = requests.get(f"{controller.url}/groups/{group}", timeout=5).json()
        return next((p for g in body["groups"] for p in g["partitions"] if p["topic"] == topic), None)

    entry = wait_until(translated, 60, f"the checkpoint job to translate group {group}")
    landing = (
        read_committed.copy_offsets(pair.dst, topic, "src", source_cluster=pair.src)[1_999] + 1
    )  # right after the last record it read
    assert (entry["method"], entry["sourceOffset"], entry["destinationOffset"]) == ("exact", 2_000, landing), entry
    wait_until(
        lambda: committed_offset(pair.dst, group, topic) == landing,
        30,
        f"the checkpoint job to commit group {group} on the destination ({pair.label})",
    )
