"""REST for an operator's controls at the edge: bad input is a 400 before anything reaches the
leader, good input reaches the controls, and a standby forwards the writes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, request
from flask.testing import FlaskClient

from ferry.common.core.operate.controls import Controls, Throttle
from ferry.controller.api import rest_json
from ferry.controller.api.rest import create_app
from ferry.controller.operate.control import ControlsView, EffectiveThrottle, PausedTopic, RouteThrottleSet
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/topics/../pause", {}),
        ("/topics/orders/pause", {"partitions": []}),
        ("/topics/orders/pause", {"partitions": [-1]}),
        ("/topics/orders/pause", {"partitions": ["0"]}),
        ("/topics/orders/pause", {"partitions": [True]}),
        ("/topics/orders/resume", {"route": "nodot"}),
        ("/topics/orders/resume", {"unknown": 1}),
        ("/topics/orders/resume", [1]),
        ("/workers/..bad/drain", None),
        ("/workers/%20/cordon", None),
    ],
)
def test_bad_pause_and_worker_requests_are_a_400(
    client: FlaskClient, fake: FakeController, path: str, body: Any
) -> None:
    assert_json_error(client.post(path, json=body), 400)
    assert fake.calls == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "/autobalancing", {"enabled": "yes"}),
        ("PUT", "/autobalancing", {"enabled": True, "more": 1}),
        ("PUT", "/autobalancing", None),
        ("PUT", "/routes/src.dst/throttle", {"max_records_per_s": 0}),
        ("PUT", "/routes/src.dst/throttle", {"max_records_per_s": -5}),
        ("PUT", "/routes/src.dst/throttle", {"max_records_per_s": "5"}),
        ("PUT", "/routes/src.dst/throttle", {"max_bytes_per_s": True}),
        ("PUT", "/routes/src.dst/throttle", {"rate": 5}),
        ("PUT", "/routes/nodot/throttle", {"max_records_per_s": 5}),
    ],
)
def test_bad_switch_and_throttle_requests_are_a_400(
    client: FlaskClient, fake: FakeController, method: str, path: str, body: Any
) -> None:
    assert_json_error(client.open(path, method=method, json=body), 400)
    assert fake.calls == []


def test_good_requests_reach_the_controls(client: FlaskClient, fake: FakeController) -> None:
    assert client.post("/topics/orders/pause", json={"partitions": [0, 2]}).status_code == 200
    assert client.post("/topics/orders/resume").status_code == 200
    assert client.post("/workers/w-1/drain").get_json() == {"worker": "w-1", "cordon": "drain", "partitions": 0}
    assert client.post("/workers/w-1/uncordon").status_code == 200
    assert client.get("/workers/w-1").get_json()["partitions"] == 3
    assert client.put("/autobalancing", json={"enabled": False}).get_json() == {"enabled": False}
    assert client.get("/autobalancing").get_json() == {"enabled": True}
    assert client.put("/routes/src.dst/throttle", json={"max_records_per_s": 100}).status_code == 200
    assert fake.calls == [
        ("pause", ("orders", [0, 2], None, False)),
        ("pause", ("orders", None, None, True)),
        ("cordon", ("w-1", "drain")),
        ("cordon", ("w-1", None)),
        ("autobalancing", (False,)),
        ("throttle", ("src.dst", Throttle(None, 100.0))),
    ]


def test_a_standby_forwards_a_drain_to_the_leader(serve: Callable[[Flask], str]) -> None:
    seen: list[str] = []
    leader = Flask("leader")

    @leader.post("/workers/<worker>/drain")
    def drain(worker: str) -> Any:
        seen.append(request.path)
        return {"worker": worker, "cordon": "drain", "partitions": 4}, 200

    standby = FakeController("standby", leading=False, leader={"id": "l", "rest_url": serve(leader)})
    response = create_app(as_controller_api(standby)).test_client().post("/workers/w1/drain")
    assert response.status_code == 200 and response.get_json()["partitions"] == 4
    assert seen == ["/workers/w1/drain"] and standby.calls == []


def test_the_controls_answer_keeps_its_shape() -> None:
    controls = Controls(
        paused={"a.b": {"orders": frozenset({1}), "audit": None}},
        cordoned={"w1": "cordon"},
        throttles={"a.b": Throttle(None, 10.0)},
    )
    view = ControlsView(
        controls,
        True,
        {"a.b": EffectiveThrottle(Throttle(None, 10.0), True), "a.c": EffectiveThrottle(Throttle(), False)},
    )
    assert json.dumps(rest_json.controls_json(view.to_json())) == json.dumps(
        {
            "paused": {"a.b": {"audit": None, "orders": [1]}},
            "cordoned": {"w1": "cordon"},
            "autobalancing": True,
            "throttles": {
                "a.b": {"max_bytes_per_s": None, "max_records_per_s": 10.0, "runtime": True},
                "a.c": {"max_bytes_per_s": None, "max_records_per_s": None, "runtime": False},
            },
        }
    )
    paused = PausedTopic("orders", {"a.b": [1], "a.c": None})
    assert rest_json.paused_json(paused.to_json()) == {"topic": "orders", "paused": {"a.b": [1], "a.c": None}}
    throttle = RouteThrottleSet("a.b", Throttle(1e6, None))
    assert json.dumps(rest_json.throttle_json(throttle.to_json())) == json.dumps(
        {"route": "a.b", "max_bytes_per_s": 1e6, "max_records_per_s": None}
    )
