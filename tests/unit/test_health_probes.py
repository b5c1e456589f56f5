"""Liveness and readiness: the decisions (common.core.probes) over plain facts and an injected time,
the controller's /health, /health/ready and /health/live over a fake controller, and the worker's
probe endpoints on its metrics port."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from flask.testing import FlaskClient

from ferry.common.core.probes import (
    COPY_LOOP_STALLED_AFTER_S,
    WorkerFacts,
    controller_liveness,
    controller_readiness,
    worker_liveness,
    worker_readiness,
)
from ferry.common.vocabulary import ControllerState, WorkerState
from ferry.devstack.support import free_port
from ferry.worker.metrics import HealthAnswer, WorkerMetrics, serve
from tests.fakes import FakeController

# A worker registered at t=100 whose copy loop passed at t=1000 and applied generation 7.
RUNNING = WorkerFacts(
    state=WorkerState.RUNNING,
    state_since=100.0,
    loop_passed_at=1000.0,
    assigned_generation=7,
    applied_generation=7,
    zookeeper_disconnected_since=None,
    session_lost=False,
)


def test_a_running_worker_whose_loop_passes_and_whose_assignment_is_applied_is_live_and_ready() -> None:
    assert worker_liveness(RUNNING, 1000.5).ok
    assert worker_readiness(RUNNING, 1000.5).ok
    assert worker_readiness(RUNNING, 1000.5).reasons == ()


def test_a_copy_loop_standing_still_too_long_is_not_live_nor_ready() -> None:
    still = 1000.0 + COPY_LOOP_STALLED_AFTER_S
    assert worker_liveness(RUNNING, still).ok  # exactly the limit: still live
    stuck = worker_liveness(RUNNING, still + 30)
    assert not stuck.ok and stuck.reasons == ("the copy loop has not passed for 150 s (stuck after 120 s)",)
    assert worker_readiness(RUNNING, still + 30).reasons == stuck.reasons
    # A limit of its own, and a loop that never passed counts from the state's start.
    assert not worker_liveness(RUNNING, 1011, stalled_after_s=10).ok
    never = replace(RUNNING, loop_passed_at=None)
    assert worker_liveness(never, 150, stalled_after_s=60).ok
    assert not worker_liveness(never, 161, stalled_after_s=60).ok


@pytest.mark.parametrize(
    ("state", "live", "reason"),
    [
        (WorkerState.STARTING, True, "not registered in ZooKeeper yet"),
        (
            WorkerState.SUSPENDED,
            True,
            "ZooKeeper session lost 900 s ago: exactly-once routes copy on, at-least-once routes released "
            "until registered",
        ),
        (WorkerState.DRAINING, True, "draining: leaving the fleet"),
        (WorkerState.STOPPED, False, "stopped"),
    ],
)
def test_a_worker_that_is_not_running_is_not_ready(state: WorkerState, live: bool, reason: str) -> None:
    facts = replace(RUNNING, state=state)
    assert worker_liveness(facts, 1000.5).ok is live
    ready = worker_readiness(facts, 1000.5)
    assert not ready.ok and any(r.startswith(reason) for r in ready.reasons), ready.reasons


def test_starting_and_draining_workers_are_live_however_long_the_loop_stood_still() -> None:
    # Connecting, registering and draining are bounded waits of their own, outside the copy loop.
    for state in (WorkerState.STARTING, WorkerState.DRAINING):
        assert worker_liveness(replace(RUNNING, state=state, loop_passed_at=None), 10_000).ok


def test_a_worker_without_its_zookeeper_session_is_live_but_not_ready() -> None:
    disconnected = replace(RUNNING, zookeeper_disconnected_since=995.0)
    assert worker_liveness(disconnected, 1000.4).ok
    assert worker_readiness(disconnected, 1000.4).reasons == (
        "ZooKeeper connection lost 5 s ago: exactly-once routes copy on, at-least-once routes paused",
    )
    lost = replace(disconnected, session_lost=True)
    assert worker_readiness(lost, 1000.4).reasons == (
        "ZooKeeper session lost: releasing the partitions of at-least-once routes",
    )


def test_a_worker_is_not_ready_until_it_applied_the_newest_assignment_it_took() -> None:
    behind = replace(RUNNING, assigned_generation=8)
    assert worker_readiness(behind, 1000.5).reasons == ("assignment generation 8 not applied yet (applied: 7)",)
    first = replace(RUNNING, assigned_generation=0, applied_generation=None)
    assert worker_readiness(first, 1000.5).reasons == ("assignment generation 0 not applied yet (applied: none)",)
    assert worker_liveness(behind, 1000.5).ok


def test_a_controller_is_live_while_its_scheduler_runs_and_ready_while_zookeeper_answers() -> None:
    for state in (ControllerState.LEADING, ControllerState.STANDBY):
        assert controller_liveness(state, scheduler_running=True).ok
        assert controller_readiness(state, scheduler_running=True, zookeeper_connected=True).ok
        # ZooKeeper unreachable: not ready, but a restart would not help, so live.
        assert controller_liveness(state, scheduler_running=True).ok
        unreachable = controller_readiness(state, scheduler_running=True, zookeeper_connected=False)
        assert unreachable.reasons == ("zookeeper unreachable",)
    stuck = controller_liveness(ControllerState.STANDBY, scheduler_running=False)
    assert stuck.reasons == ("the scheduler is not running",)
    assert controller_readiness(ControllerState.STANDBY, False, False).reasons == (
        "zookeeper unreachable",
        "the scheduler is not running",
    )
    assert controller_liveness(ControllerState.STOPPED, scheduler_running=False).reasons == (
        "stopped",
        "the scheduler is not running",
    )


# -- the controller's endpoints ---------------------------------------------------------------


def test_a_controller_answers_its_probes_200_with_no_reasons(client: FlaskClient) -> None:
    for path in ("/health", "/health/ready", "/health/live"):
        answer = client.get(path)
        assert answer.status_code == 200, path
        body = answer.get_json()
        assert body["status"] == "ok" and body["reasons"] == [] and body["id"] == "c1" and body["leader"] is True


def test_a_controller_without_zookeeper_is_not_ready_but_live(client: FlaskClient, fake: FakeController) -> None:
    fake.zookeeper_connected = False
    for path in ("/health", "/health/ready"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        assert answer.get_json()["status"] == "zookeeper unreachable"
        assert answer.get_json()["reasons"] == ["zookeeper unreachable"]
    live = client.get("/health/live")
    assert live.status_code == 200 and live.get_json()["status"] == "ok"


def test_a_controller_whose_scheduler_stopped_is_neither_live_nor_ready(
    client: FlaskClient, fake: FakeController
) -> None:
    fake.scheduler_running = False
    for path in ("/health", "/health/ready", "/health/live"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        assert answer.get_json()["reasons"] == ["the scheduler is not running"]


def test_the_openapi_document_describes_the_probes_and_their_503(client: FlaskClient) -> None:
    paths = client.get("/openapi.json").get_json()["paths"]
    for path in ("/health", "/health/ready", "/health/live"):
        responses = paths[path]["get"]["responses"]
        assert responses["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Health"}
        assert responses["503"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Health"}


# -- the worker's endpoints -------------------------------------------------------------------


class Answers:
    """What a worker's probes answer, set by the test."""

    def __init__(self) -> None:
        self.live = HealthAnswer(True, {"status": "RUNNING", "live": True, "reasons": []})
        self.ready = HealthAnswer(False, {"status": "STARTING", "ready": False, "reasons": ["not registered"]})


@pytest.fixture
def worker_probes() -> Iterator[tuple[Answers, str]]:
    answers = Answers()
    port = free_port()
    server = serve(WorkerMetrics(), lambda: answers.live, lambda: answers.ready, "127.0.0.1", port)
    try:
        yield answers, f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_worker_serves_readiness_on_health_and_health_ready_and_liveness_apart(
    worker_probes: tuple[Answers, str],
) -> None:
    answers, url = worker_probes
    for path in ("/health", "/health/ready"):
        assert _get(url + path) == (503, {"status": "STARTING", "ready": False, "reasons": ["not registered"]})
    assert _get(url + "/health/live") == (200, {"status": "RUNNING", "live": True, "reasons": []})
    answers.ready = HealthAnswer(True, {"status": "RUNNING", "ready": True, "reasons": []})
    answers.live = HealthAnswer(False, {"status": "RUNNING", "live": False, "reasons": ["stuck"]})
    assert _get(url + "/health") == (200, {"status": "RUNNING", "ready": True, "reasons": []})
    assert _get(url + "/health/live") == (503, {"status": "RUNNING", "live": False, "reasons": ["stuck"]})
    with urllib.request.urlopen(url + "/metrics", timeout=5) as response:
        assert b"ferry_worker_in_flight" in response.read()
