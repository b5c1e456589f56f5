"""An operator's controls on a running fleet against the local stack: pause and resume a partition
and drain a busy worker in a stream (nothing lost, nothing twice), autobalancing off, and a route
throttle held across two workers and raised at run time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from tests.harness.mirroring import PARTITIONS, add_topic, mirror_with_two_workers
from tests.harness.processes import Fleet, RecordLedger, wait_until

pytestmark = pytest.mark.e2e

ROUTE = "src.dst"


def _states(fleet: Fleet, url: str, topic: str) -> dict[int, tuple[str, str]]:
    view = requests.get(f"{url}/topics/{topic}", timeout=5).json()
    return {int(p): (e.get("worker"), e.get("state")) for p, e in view["externalView"].items()}


def _post(url: str, path: str, body: Any = None) -> Any:
    response = requests.post(f"{url}{path}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_pause_resume_and_drain_in_a_stream_lose_and_duplicate_nothing(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    started = time.monotonic()
    mirroring = mirror_with_two_workers(fleet, topic_name("controls"))
    ledger, url, topic = mirroring.ledger, mirroring.controller.url, mirroring.ledger.topic
    ledger.produce_steadily(400)
    ledger.wait_for_destination(60, at_least=200)

    owner = _states(fleet, url, topic)[0][0]
    _post(url, f"/topics/{topic}/pause", {"partitions": [0]})
    wait_until(lambda: _states(fleet, url, topic)[0] == (owner, "PAUSED"), 30, "partition 0 PAUSED on its owner")
    validation = requests.get(f"{url}/validation", timeout=10).json()
    assert validation["ok"], validation
    assert validation["summary"]["paused"] == 1
    paused_dst = ledger.end_offsets(ledger.dst)[0]
    paused_src = ledger.end_offsets(ledger.src)[0]
    wait_until(
        lambda: ledger.end_offsets(ledger.src)[0] >= paused_src + 100, 30, "the paused partition's source to grow"
    )
    assert ledger.end_offsets(ledger.dst)[0] == paused_dst  # the destination did not move
    assert all(state == "ONLINE" for p, (_, state) in _states(fleet, url, topic).items() if p != 0)

    _post(url, f"/topics/{topic}/resume", {"partitions": [0]})
    wait_until(lambda: _states(fleet, url, topic)[0] == (owner, "ONLINE"), 30, "partition 0 ONLINE again")
    wait_until(lambda: ledger.end_offsets(ledger.dst)[0] > paused_src, 30, "partition 0 copied on")

    busy = _post(url, "/workers/w1/drain")
    assert busy["cordon"] == "drain"
    wait_until(lambda: requests.get(f"{url}/workers/w1", timeout=5).json()["partitions"] == 0, 60, "w1 drained")
    wait_until(
        lambda: (
            set(fleet.online_by_worker(mirroring.controller, topic).values()) == {"w2"}
            and len(fleet.online_by_worker(mirroring.controller, topic)) == PARTITIONS
        ),
        60,
        "every partition ONLINE on w2",
    )

    ledger.stop_producing()
    ledger.wait_for_destination(60)
    result = ledger.check(allow_duplicates=False)
    assert result["duplicates"] == 0
    print(f"pause/resume/drain: {result['records']} records in {time.monotonic() - started:.1f}s")


def test_autobalancing_off_leaves_a_joining_worker_idle_but_new_topics_are_placed(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    mirroring = mirror_with_two_workers(fleet, topic_name("autobal"))
    url = mirroring.controller.url
    assert requests.put(f"{url}/autobalancing", json={"enabled": False}, timeout=10).json() == {"enabled": False}
    assert requests.get(f"{url}/autobalancing", timeout=10).json() == {"enabled": False}
    before = fleet.online_by_worker(mirroring.controller, mirroring.ledger.topic)
    fleet.start_worker("w3")
    fleet.wait_for_workers(mirroring.controller, {"w3"})
    wait_until(
        lambda: "autobalancing is off: no rebalance" in mirroring.controller.log.read_text(),
        30,
        "the rebalance after w3 joined to be skipped",
    )
    assert fleet.online_by_worker(mirroring.controller, mirroring.ledger.topic) == before
    assert requests.get(f"{url}/workers/w3", timeout=5).json()["partitions"] == 0

    second = RecordLedger(fleet.stack, topic_name("autobal-new"), PARTITIONS)
    second.create_source_topic()
    add_topic(fleet, url, second.topic)
    wait_until(
        lambda: len(fleet.online_by_worker(mirroring.controller, second.topic)) == PARTITIONS,
        30,
        "the new topic ONLINE",
    )
    assert "w3" in set(fleet.online_by_worker(mirroring.controller, second.topic).values())


def test_a_throttled_route_holds_its_rate_across_two_workers_and_a_raise_takes_effect(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    started = time.monotonic()
    fleet.extra = {"routes": [{"source": "src", "destination": "dst", "max_records_per_s": 200}]}
    fleet.write_config()
    mirroring = mirror_with_two_workers(fleet, topic_name("throttle"))
    ledger, url = mirroring.ledger, mirroring.controller.url
    ledger.produce(12_000)  # a backlog: the source could go much faster than the throttle

    def copied() -> int:
        return ledger.destination_count()

    wait_until(lambda: copied() > 0, 30, "copying to start")
    first, at = copied(), time.monotonic()
    wait_until(lambda: time.monotonic() - at >= 30, 40, "30 s")
    rate = (copied() - first) / (time.monotonic() - at)
    print(f"throttled to 200 records/s: {rate:.1f} records/s over 30 s")
    assert 180 <= rate <= 220

    answer = requests.put(f"{url}/routes/{ROUTE}/throttle", json={"max_records_per_s": 1000}, timeout=10)
    assert answer.status_code == 200, answer.text
    first, at = copied(), time.monotonic()
    # At 200 records/s, 2,500 more would take 12.5 s: within 6 s only the raised limit copies them.
    wait_until(lambda: copied() >= first + 2500, 6, "2,500 records at the raised rate")
    print(f"raised to 1000 records/s: 2,500 records in {time.monotonic() - at:.1f}s")
    ledger.wait_for_destination(60)
    assert ledger.check(allow_duplicates=False)["duplicates"] == 0
    print(f"throttle test took {time.monotonic() - started:.1f}s")
