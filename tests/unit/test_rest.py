"""The REST API over a fake controller: status codes, JSON errors and forwarding to the leader."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, request
from flask.testing import FlaskClient
from kazoo.exceptions import ConnectionLoss

from ferry.controller.api.rest import FORWARDED_HEADER, create_app
from ferry.controller.errors import BadRequest, Conflict, ControllerError, NotFound, NotLeader, Unavailable
from ferry.controller.topics.spec import TopicSpec
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api

# -- happy paths ------------------------------------------------------------------------------


def test_post_topics_creates_with_201(client: FlaskClient, fake: FakeController) -> None:
    response = client.post("/topics", json={"topic": "orders", "numPartitions": 8, "route": "src.dst"})
    assert response.status_code == 201
    body = response.get_json()  # the fake's view names the answering controller as destination
    assert (body["topic"], body["partitions"], body["destination"]) == ("orders", 8, "c1")
    assert fake.calls == [("add_topic", (TopicSpec("orders", 8), "src.dst"))]


def test_post_topics_passes_a_topics_own_start_and_put_refuses_one(client: FlaskClient, fake: FakeController) -> None:
    response = client.post("/topics", json={"topic": "orders", "start": "2026-01-31T12:00:00Z"})
    assert response.status_code == 201, response.get_json()
    bulk = client.post("/topics", json={"topics": [{"topic": "a", "start": "latest"}, {"topic": "b"}]})
    assert bulk.status_code == 201, bulk.get_json()
    assert fake.calls == [
        ("add_topic", (TopicSpec("orders", None, 1769860800000), None)),
        ("add_topics", ([TopicSpec("a", None, "latest"), TopicSpec("b")], None)),
    ]
    for body, wrong in (
        ({"topic": "orders", "start": "soon"}, "start: must be earliest, latest"),
        ({"topic": "orders", "start": True}, "start"),
        ({"topics": [{"topic": "a", "start": -5.5}]}, "topics.0.start"),
    ):
        answer = client.post("/topics", json=body)
        assert answer.status_code == 400 and wrong in answer.get_json()["error"], answer.get_json()
    refused = client.put("/topics", json={"topic": "orders", "numPartitions": 9, "start": "latest"})
    assert refused.status_code == 400 and "only when a topic is added" in refused.get_json()["error"]


def test_reads_and_other_writes_answer_200(client: FlaskClient, fake: FakeController) -> None:
    assert client.get("/health").get_json()["status"] == "ok"
    assert client.get("/topics").get_json() == {"topics": [{"topic": "orders", "route": "src.dst", "partitions": 2}]}
    view = client.get("/topics/orders?route=src.dst").get_json()
    assert view["topic"] == "orders" and list(view["routes"]) == ["src.dst"]
    assert client.put("/topics", json={"topic": "orders", "numPartitions": 9}).status_code == 200
    assert client.delete("/topics/orders").get_json() == {"topic": "orders", "deleted": True}
    assert client.get("/instances").status_code == 200
    assert client.post("/instances").get_json() == {"rebalanced": True, "moved": 0}
    assert client.get("/validation").get_json() == {
        "ok": True,
        "summary": {},
        "mismatches": [],
        "spark": None,
        "failover": {},
        "notices": [],
    }
    assert [name for name, _ in fake.calls] == [
        "list_topics",
        "topic_view",
        "expand_topic",
        "delete_topic",
        "instances",
        "rebalance_now",
        "validation",
    ]


# -- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "content_type"),
    [
        ("{not json", "application/json"),
        ("", "application/json"),
        ('["orders"]', "application/json"),
        ('"orders"', "application/json"),
        ("null", "application/json"),
        ('{"topic": "orders"}', "text/plain"),
    ],
    ids=["malformed", "empty", "array", "string", "null", "not-json-content-type"],
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_body_that_is_not_a_json_object_is_a_400(
    client: FlaskClient, fake: FakeController, method: str, data: str, content_type: str
) -> None:
    response = client.open("/topics", method=method, data=data, content_type=content_type)
    assert "JSON object" in assert_json_error(response, 400)["error"]
    assert fake.calls == []


def test_a_non_string_route_is_a_400(client: FlaskClient, fake: FakeController) -> None:
    assert_json_error(client.post("/topics", json={"topic": "orders", "route": 5}), 400)
    assert fake.calls == []


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (BadRequest("numPartitions must be positive"), 400),
        (NotFound("topic 'x' is not mirrored by Ferry"), 404),
        (Conflict("topic 'x' is already mirrored"), 409),
        (Unavailable("ZooKeeper cannot be reached"), 503),
        (NotLeader("controller c1 does not lead"), 503),
        (ControllerError("something odd"), 500),
    ],
)
def test_controller_errors_map_to_their_status(
    client: FlaskClient, fake: FakeController, error: ControllerError, status: int
) -> None:
    fake.fail = error
    for response in (
        client.post("/topics", json={"topic": "x"}),
        client.put("/topics", json={"topic": "x", "numPartitions": 1}),
        client.delete("/topics/x"),
        client.get("/topics/x"),
        client.get("/topics"),
        client.post("/instances"),
    ):
        assert assert_json_error(response, status)["error"] == str(error)


def test_an_unreachable_zookeeper_is_a_503_on_every_path(client: FlaskClient, fake: FakeController) -> None:
    fake.fail = ConnectionLoss()
    for response in (client.get("/topics/x"), client.get("/topics"), client.post("/topics", json={"topic": "x"})):
        assert assert_json_error(response, 503)["error"] == "ZooKeeper cannot be reached: ConnectionLoss"


def test_a_bug_is_a_500_json_answer_whose_request_id_is_in_the_log(
    client: FlaskClient, fake: FakeController, caplog: pytest.LogCaptureFixture
) -> None:
    fake.fail = RuntimeError("boom")
    response = client.get("/topics", headers={"X-Request-Id": "trace-42"})
    body = assert_json_error(response, 500)
    assert body["requestId"] == response.headers["X-Request-Id"] == "trace-42"
    assert "trace-42" in body["error"] and "boom" not in body["error"]  # internals stay in the log
    logged = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(logged) == 1 and "trace-42" in logged[0].getMessage()
    assert logged[0].exc_info is not None and "boom" in str(logged[0].exc_info[1])


def test_an_unknown_url_is_a_404_json_answer(client: FlaskClient) -> None:
    assert_json_error(client.get("/no/such/thing"), 404)


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("PATCH", "/topics"),
        ("DELETE", "/topics"),
        ("PUT", "/instances"),
        ("POST", "/health"),
        ("POST", "/topics/orders"),
    ],
)
def test_a_wrong_method_is_a_405_json_answer(client: FlaskClient, method: str, url: str) -> None:
    assert_json_error(client.open(url, method=method, json={}), 405)


# -- standby and forwarding -------------------------------------------------------------------


def test_a_standby_without_a_leader_answers_503_to_writes(fake: FakeController) -> None:
    fake.leading = False
    client = create_app(as_controller_api(fake)).test_client()
    for response in (
        client.post("/topics", json={"topic": "orders"}),
        client.put("/topics", json={"topic": "orders", "numPartitions": 2}),
        client.delete("/topics/orders"),
        client.post("/instances"),
    ):
        assert_json_error(response, 503)
    assert fake.calls == []
    # Reads are answered by any controller.
    assert client.get("/topics").status_code == 200


def test_a_standby_whose_leader_has_no_url_answers_503(fake: FakeController) -> None:
    fake.leading, fake.leader_info = False, {"id": "c9"}
    assert_json_error(create_app(as_controller_api(fake)).test_client().post("/instances"), 503)


def test_a_standby_forwards_writes_and_relays_the_leaders_answer(serve: Callable[[Flask], str]) -> None:
    leader = FakeController("leader")
    leader_url = serve(create_app(as_controller_api(leader)))
    standby = FakeController("standby", leading=False, leader={"id": "leader", "rest_url": leader_url + "/"})
    client = create_app(as_controller_api(standby), forward_timeout_s=5).test_client()

    created = client.post("/topics?route=src.dst", json={"topic": "orders", "numPartitions": 3})
    assert created.status_code == 201
    body = created.get_json()  # the fake's view names the answering controller as destination
    assert (body["topic"], body["partitions"], body["destination"]) == ("orders", 3, "leader")
    assert leader.calls == [("add_topic", (TopicSpec("orders", 3), "src.dst"))]
    assert standby.calls == []

    assert client.delete("/topics/orders?route=src.dst").get_json() == {"topic": "orders", "deleted": True}
    assert leader.calls[-1] == ("delete_topic", ("orders", "src.dst"))

    leader.fail = Conflict("topic 'orders' is already mirrored on route src.dst")
    conflict = client.post("/topics", json={"topic": "orders"})
    assert_json_error(conflict, 409)
    assert conflict.get_json()["error"] == "topic 'orders' is already mirrored on route src.dst"

    leader.fail = BadRequest("numPartitions must be positive, not 0")
    assert_json_error(client.put("/topics", json={"topic": "orders", "numPartitions": 0}), 400)
    assert standby.calls == []


def test_the_forwarded_request_names_the_standby(serve: Callable[[Flask], str]) -> None:
    seen: list[str | None] = []
    recorder = Flask("recorder")

    @recorder.post("/instances")
    def record() -> Any:
        seen.append(request.headers.get(FORWARDED_HEADER))
        return {"rebalanced": True, "moved": 2}, 200

    standby = FakeController("standby-7", leading=False, leader={"id": "l", "rest_url": serve(recorder)})
    response = create_app(as_controller_api(standby)).test_client().post("/instances")
    assert response.status_code == 200 and response.get_json() == {"rebalanced": True, "moved": 2}
    assert seen == ["standby-7"]


def test_a_forwarded_request_to_a_non_leader_is_a_503(fake: FakeController) -> None:
    fake.leading, fake.leader_info = False, {"id": "c2", "rest_url": "http://127.0.0.1:1"}
    client = create_app(as_controller_api(fake)).test_client()
    response = client.post("/topics", json={"topic": "orders"}, headers={FORWARDED_HEADER: "c2"})
    assert_json_error(response, 503)
    assert fake.calls == []


def test_two_standbys_naming_each_other_do_not_loop(serve: Callable[[Flask], str]) -> None:
    # Both believe the other leads (a stale leader node): one hop, then 503, relayed back.
    a = FakeController("a", leading=False)
    b = FakeController("b", leading=False)
    a_url, b_url = (
        serve(create_app(as_controller_api(a), forward_timeout_s=5)),
        serve(create_app(as_controller_api(b), forward_timeout_s=5)),
    )
    a.leader_info, b.leader_info = {"id": "b", "rest_url": b_url}, {"id": "a", "rest_url": a_url}
    response = (
        create_app(as_controller_api(a), forward_timeout_s=5).test_client().post("/topics", json={"topic": "orders"})
    )
    assert_json_error(response, 503)
    assert a.calls == [] and b.calls == []


def test_a_leader_that_does_not_answer_is_a_503(fake: FakeController) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake.leading, fake.leader_info = False, {"id": "c2", "rest_url": f"http://127.0.0.1:{port}"}
    body = assert_json_error(
        create_app(as_controller_api(fake), forward_timeout_s=2).test_client().post("/instances"), 503
    )
    assert "c2" in body["error"]


def test_groups_checks_the_group_id_and_answers_json(client: Any, fake: FakeController) -> None:
    assert client.get("/groups").get_json() == {"groups": []}
    assert client.get("/groups/app-1").status_code == 200
    assert fake.calls[-1] == ("groups", ("app-1",))
    assert client.get("/groups/unknown").status_code == 404
    assert client.get("/groups/..").status_code in (400, 404)  # never reaches the controller as a group id
    assert ("groups", ("..",)) not in fake.calls


def test_tree_view_as_json_and_as_a_table(client: FlaskClient, fake: FakeController) -> None:
    assert client.get("/tree").get_json()["layout"] == "1(a,b)"
    text = client.get("/tree?format=text")
    assert text.status_code == 200 and text.mimetype == "text/plain" and text.data == b"DISTRIBUTOR ...\n"
    assert client.get("/tree?format=xml").status_code == 400


def test_switching_a_target_is_checked_at_the_edge(client: FlaskClient, fake: FakeController) -> None:
    answer = client.post("/tree/a.L1/target", json={"target": "b"})
    assert answer.status_code == 200 and answer.get_json() == {"a.L1": "b"}
    assert fake.calls[-1] == ("switch_target", ("a.L1", "b"))
    for path, body in [
        ("/tree/a.b/target", {"target": "b"}),
        ("/tree/a.L1/target", {"target": "b/c"}),
        ("/tree/a.L1/target", {"leaf": "b"}),
        ("/tree/a.L1/target", ["b"]),
    ]:
        response = client.post(path, json=body)
        assert response.status_code == 400, (path, body)
        assert "error" in response.get_json()
    assert len([c for c in fake.calls if c[0] == "switch_target"]) == 1


# -- GET /translate -----------------------------------------------------------------------------


def test_translate_answers_on_any_controller_both_ways(fake: FakeController) -> None:
    standby = create_app(as_controller_api(FakeController("c2", leading=False))).test_client()
    body = standby.get("/translate?route=src.dst&topic=orders&partition=1&offset=5").get_json()
    assert body == {
        "route": "src.dst",
        "topic": "orders",
        "destinationTopic": "orders",
        "partition": 1,
        "direction": "forward",
        "offset": 5,
        "translatedOffset": 8,
        "exact": True,
        "method": "exact",
    }
    client = create_app(as_controller_api(fake)).test_client()
    assert (
        client.get("/translate?topic=orders&partition=0&offset=8&direction=reverse").get_json()["direction"]
        == "reverse"
    )
    assert fake.calls == [("translate_offset", (None, "orders", 0, 8, True))]


@pytest.mark.parametrize(
    "query",
    [
        "topic=orders&partition=0",  # no offset
        "topic=orders&partition=-1&offset=0",
        "topic=orders&partition=0&offset=abc",
        "topic=orders&partition=0&offset=99999999999999999999",
        "topic=orders&partition=2147483647&offset=0",
        "topic=..&partition=0&offset=0",
        "topic=orders&partition=0&offset=0&direction=sideways",
        "topic=orders&partition=0&offset=0&route=nodot",
        "topic=orders&partition=0&offset=0&group=g",
    ],
)
def test_translate_refuses_bad_input_with_a_400(client: FlaskClient, fake: FakeController, query: str) -> None:
    assert_json_error(client.get(f"/translate?{query}"), 400)
    assert fake.calls == []


def test_translate_of_an_unknown_topic_is_a_404(client: FlaskClient) -> None:
    assert_json_error(client.get("/translate?topic=unknown&partition=0&offset=0"), 404)
