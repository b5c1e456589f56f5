"""REST for routes' failover at the edge: any controller answers the routes' states, a bad route name or
body is a 400 before anything reaches the leader, and a good failover request reaches the failover part."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from ferry.controller.api.rest import create_app
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api

pytestmark = pytest.mark.unit


def test_the_routes_states_are_read_on_any_controller() -> None:
    standby = FakeController("standby", leading=False)
    client = create_app(as_controller_api(standby)).test_client()
    routes = client.get("/routes")
    assert routes.status_code == 200
    assert [row["route"] for row in routes.get_json()["routes"]] == ["src.dst"]
    one = client.get("/routes/src.dst")
    assert one.status_code == 200 and one.get_json()["state"] == "ACTIVE"
    assert standby.calls == [("routes", ()), ("route", ("src.dst",))]


@pytest.mark.parametrize(
    ("path", "body", "problem"),
    [
        ("/routes/nodot/failover", None, "the path's route must be a route name"),
        ("/routes/src.dst/failover", {"quietS": -1}, "quietS: Input should be greater than or equal to 0"),
        ("/routes/src.dst/failover", {"groups": "("}, "groups: '(' is not a regular expression"),
        ("/routes/src.dst/failover", {"planned": "yes"}, "planned: Input should be a valid boolean"),
        ("/routes/src.dst/failover", {"unknown": 1}, "unknown: unknown field"),
        ("/routes/src.dst/failover", {"dryRun": 1}, "dryRun: Input should be a valid boolean"),
    ],
)
def test_a_bad_failover_request_is_a_400(
    client: FlaskClient, fake: FakeController, path: str, body: object, problem: str
) -> None:
    response = client.post(path, json=body) if body is not None else client.post(path)
    assert problem in assert_json_error(response, 400)["error"]
    assert fake.calls == []


def test_a_bad_route_name_to_read_is_a_400(client: FlaskClient, fake: FakeController) -> None:
    assert "route must be a route name" in assert_json_error(client.get("/routes/nodot"), 400)["error"]
    assert fake.calls == []


def test_a_failover_request_reaches_the_failover_part_with_its_defaults(
    client: FlaskClient, fake: FakeController
) -> None:
    response = client.post("/routes/src.dst/failover")
    assert response.status_code == 200 and response.get_json()["state"] == "FAILED_OVER"
    planned = client.post("/routes/src.dst/failover", json={"planned": True, "quietS": 2, "topics": "^orders$"})
    assert planned.status_code == 200
    assert fake.calls == [
        ("fail_over", ("src.dst", False, None, None, 5.0, 300.0)),
        ("fail_over", ("src.dst", True, None, "^orders$", 2.0, 300.0)),
    ]


def test_a_dry_run_asks_the_failover_part_for_its_plan_only(client: FlaskClient, fake: FakeController) -> None:
    response = client.post("/routes/src.dst/failover", json={"dryRun": True, "groups": "app-.*"})
    assert response.status_code == 200
    body = response.get_json()
    assert (body["dryRun"], body["state"], body["phases"]) == (True, "ACTIVE", ["REQUESTED", "SYNCING", "FAILED_OVER"])
    assert fake.calls == [("plan", ("src.dst", False, "app-.*", None))]
