"""The controller's metrics for what an operator chose, on a running fleet against the local stack:
the series the monitoring kit's alerts use to leave paused partitions and drained workers out
(deploy/monitoring/alerts.yml)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.mirroring import PARTITIONS, mirror_with_two_workers
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e


def _samples(url: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = requests.get(f"{url}/metrics", timeout=5).text
    family = next((f for f in text_string_to_metric_families(text) if f.name == name), None)
    return {} if family is None else {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def _post(url: str, path: str, body: Any = None) -> None:
    response = requests.post(f"{url}{path}", json=body, timeout=30)
    assert response.status_code == 200, response.text


def test_paused_partitions_and_partitions_drains_leave_unassigned_are_in_the_leaders_metrics(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    fleet.extra = {"controller": {"lag_interval_s": 1, "noprogress_after_s": 2}}
    fleet.write_config()
    mirroring = mirror_with_two_workers(fleet, topic_name("opmetrics"))
    url, ledger, topic = mirroring.controller.url, mirroring.ledger, mirroring.ledger.topic
    paused = "ferry_controller_partition_paused"
    noprogress = "ferry_controller_partition_noprogress_seconds"
    unassigned = "ferry_controller_cordoned_unassigned_partitions"
    assert _samples(url, paused) == {}
    assert _samples(url, unassigned) == {(): 0.0}

    # Paused partitions lag and make no progress while records arrive: both gauges name them, so the
    # alerts can leave them out.
    _post(url, f"/topics/{topic}/pause", {"partitions": [0, 3]})
    labels = {p: (("partition", str(p)), ("route", "src.dst"), ("topic", topic)) for p in (0, 3)}
    wait_until(lambda: _samples(url, paused) == dict.fromkeys(labels.values(), 1.0), 30, "0 and 3 paused")
    ledger.produce_steadily(200)
    try:
        wait_until(lambda: set(labels.values()) <= set(_samples(url, noprogress)), 30, "0 and 3 without progress")
    finally:
        ledger.stop_producing()
    _post(url, f"/topics/{topic}/resume", {"partitions": [0, 3]})
    wait_until(lambda: _samples(url, paused) == {}, 30, "the paused gauge empty after the resume")
    wait_until(lambda: _samples(url, noprogress) == {}, 30, "every partition copied on")

    # Every live worker drained: no worker may take the partitions, and that is the operator's choice.
    _post(url, "/workers/w1/drain")
    _post(url, "/workers/w2/drain")
    wait_until(lambda: _samples(url, unassigned) == {(): float(PARTITIONS)}, 60, "every partition unassigned")
    _post(url, "/workers/w2/uncordon")
    wait_until(lambda: _samples(url, unassigned) == {(): 0.0}, 60, "w2 takes them")
    wait_until(
        lambda: len(fleet.online_by_worker(mirroring.controller, topic)) == PARTITIONS, 60, "every partition ONLINE"
    )
