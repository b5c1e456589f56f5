"""controller.api.rest over a fake controller: status codes, JSON errors and forwarding to the leader."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask, request
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from ferry.common.core.heartbeat import HeartbeatView
from ferry.common.model import ExternalView, IdealState, PartitionKey
from ferry.common.vocabulary import ControllerState
from ferry.controller.api.rest import FORWARDED_HEADER, ControllerApi, create_app
from ferry.controller.errors import BadRequest, Conflict, ControllerError, NotFound, NotLeader, Unavailable
from ferry.controller.groups.checkpoints import GroupCheckpoints
from ferry.controller.schemas.distributor import SchemaReport, SchemaStatus
from ferry.controller.topics.admin import Rebalanced, TopicDeleted
from ferry.controller.topics.progress import NoProgress, OffsetSample
from ferry.controller.topics.reads import Health, Instances, RouteTopic, SourceValidation, TopicView, Validation
from ferry.controller.tree.control import TreeView


class FakeController:
    """Implements :class:`controller.api.rest.ControllerApi`, every part in one object; records calls,
    raises ``fail`` when set. A topic view names this controller as its route's destination, and a
    schema report as its target, so a test sees which controller answered."""

    def __init__(self, controller_id: str = "c1", leading: bool = True, leader: dict[str, str] | None = None) -> None:
        self.controller_id = controller_id
        self.leading = leading
        self.leader_info = leader
        self.fail: Exception | None = None
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    # The parts the REST layer asks for (controller.api.rest.ControllerApi): all this one object.
    @property
    def leadership(self) -> FakeController:
        return self

    @property
    def reads(self) -> FakeController:
        return self

    @property
    def topics(self) -> FakeController:
        return self

    @property
    def jobs(self) -> FakeController:
        return self

    @property
    def tree(self) -> FakeController:
        return self

    def _call(self, name: str, *args: Any) -> None:
        self.calls.append((name, args))
        if self.fail is not None:
            raise self.fail

    def is_leader(self) -> bool:
        return self.leading

    def leader(self) -> dict[str, str] | None:
        return self.leader_info

    def health(self) -> Health:
        state = ControllerState.LEADING if self.leading else ControllerState.STANDBY
        return Health(True, self.controller_id, state, self.leading, None, None)

    def list_topics(self) -> list[IdealState]:
        self._call("list_topics")
        return [IdealState("src.dst", "orders", 2)]

    def _view(self, topic: str, partitions: int, route: str | None) -> TopicView:
        name = route or "src.dst"
        one = RouteTopic(IdealState(name, topic, partitions), ExternalView(name, topic), self.controller_id, topic)
        return TopicView(topic, {name: one})

    def topic_view(self, topic: str, route: str | None = None) -> TopicView:
        self._call("topic_view", topic, route)
        return self._view(topic, 1, route)

    def add_topic(self, topic: Any, num_partitions: Any = None, route: str | None = None) -> TopicView:
        self._call("add_topic", topic, num_partitions, route)
        return self._view(topic, num_partitions or 1, route)

    def add_topics(self, topics: Any, route: str | None = None) -> list[IdealState]:
        self._call("add_topics", topics, route)
        return [IdealState(route or "src.dst", t["topic"], t["numPartitions"] or 1) for t in topics]

    def expand_topic(self, topic: Any, num_partitions: Any, route: str | None = None) -> TopicView:
        self._call("expand_topic", topic, num_partitions, route)
        return self._view(topic, num_partitions, route)

    def delete_topic(self, topic: str, route: str | None = None) -> TopicDeleted:
        self._call("delete_topic", topic, route)
        return TopicDeleted(topic, (route or "src.dst",))

    def instances(self) -> Instances:
        self._call("instances")
        return Instances([], {})

    def rebalance_now(self) -> Rebalanced:
        self._call("rebalance_now")
        return Rebalanced(0)

    def validation(self) -> Validation:
        self._call("validation")
        return Validation([], {}, None)

    def source_validation(self) -> SourceValidation:
        self._call("source_validation")
        return SourceValidation(0, [], None)

    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[PartitionKey, OffsetSample]:
        self._call("offsets", topic, partition)
        return {}

    def destination_topic(self, route: str, topic: str) -> str:
        return topic

    def noprogress(self) -> NoProgress:
        self._call("noprogress")
        return NoProgress({}, {}, 60.0)

    def metrics_text(self) -> bytes:
        return b"# no metrics\n"

    def groups(self, group: str | None = None) -> GroupCheckpoints:
        self._call("groups", group)
        if group == "unknown":
            raise NotFound("group 'unknown' has no checkpoint")
        return GroupCheckpoints({}, {})

    def tree_view(self) -> TreeView:
        self._call("tree_view")
        return TreeView("1(a,b)", 60.0, [], [], "DISTRIBUTOR ...")

    def heartbeats(self) -> HeartbeatView:
        self._call("heartbeats")
        return HeartbeatView([], {})

    def switch_target(self, distributor: str, leaf: str, why: str) -> dict[str, str]:
        self._call("switch_target", distributor, leaf)
        return {distributor: leaf}

    def _schema_report(self) -> SchemaReport:
        return SchemaReport("src", [self.controller_id], 0.0, [], True, {}, [], [], [], {})

    def schema_status(self) -> SchemaStatus:
        self._call("schema_status")
        return SchemaStatus(self._schema_report(), None)

    def schema_sync(self) -> SchemaReport:
        self._call("schema_sync")
        return self._schema_report()


def _typed(fake: FakeController) -> ControllerApi:
    return fake  # mypy checks that the fake satisfies the Protocol


@pytest.fixture
def fake() -> FakeController:
    return FakeController()


@pytest.fixture
def client(fake: FakeController) -> FlaskClient:
    return create_app(_typed(fake)).test_client()


@pytest.fixture
def serve() -> Iterator[Callable[[Flask], str]]:
    """Serves Flask apps on real local ports (one thread each); yields a function returning the URL."""
    servers = []

    def start(app: Flask) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


def assert_json_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.is_json
    body: dict[str, Any] = response.get_json()
    assert body["status"] == status
    assert isinstance(body["error"], str) and body["error"]
    return body


# -- happy paths ------------------------------------------------------------------------------


def test_post_topics_creates_with_201(client: FlaskClient, fake: FakeController) -> None:
    response = client.post("/topics", json={"topic": "orders", "numPartitions": 8, "route": "src.dst"})
    assert response.status_code == 201
    body = response.get_json()  # the fake's view names the answering controller as destination
    assert (body["topic"], body["partitions"], body["destination"]) == ("orders", 8, "c1")
    assert fake.calls == [("add_topic", ("orders", 8, "src.dst"))]


def test_reads_and_other_writes_answer_200(client: FlaskClient, fake: FakeController) -> None:
    assert client.get("/health").get_json()["status"] == "ok"
    assert client.get("/topics").get_json() == {"topics": [{"topic": "orders", "route": "src.dst", "partitions": 2}]}
    view = client.get("/topics/orders?route=src.dst").get_json()
    assert view["topic"] == "orders" and list(view["routes"]) == ["src.dst"]
    assert client.put("/topics", json={"topic": "orders", "numPartitions": 9}).status_code == 200
    assert client.delete("/topics/orders").get_json() == {"topic": "orders", "deleted": True}
    assert client.get("/instances").status_code == 200
    assert client.post("/instances").get_json() == {"rebalanced": True, "moved": 0}
    assert client.get("/validation").get_json() == {"ok": True, "summary": {}, "mismatches": [], "spark": None}
    assert [name for name, _ in fake.calls] == [
        "list_topics", "topic_view", "expand_topic", "delete_topic", "instances", "rebalance_now", "validation",
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


@pytest.mark.parametrize(("method", "url"), [("PATCH", "/topics"), ("DELETE", "/topics"), ("PUT", "/instances"),
                                             ("POST", "/health"), ("POST", "/topics/orders")])
def test_a_wrong_method_is_a_405_json_answer(client: FlaskClient, method: str, url: str) -> None:
    assert_json_error(client.open(url, method=method, json={}), 405)


# -- standby and forwarding -------------------------------------------------------------------


def test_a_standby_without_a_leader_answers_503_to_writes(fake: FakeController) -> None:
    fake.leading = False
    client = create_app(_typed(fake)).test_client()
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
    assert_json_error(create_app(_typed(fake)).test_client().post("/instances"), 503)


def test_a_standby_forwards_writes_and_relays_the_leaders_answer(serve: Callable[[Flask], str]) -> None:
    leader = FakeController("leader")
    leader_url = serve(create_app(_typed(leader)))
    standby = FakeController("standby", leading=False, leader={"id": "leader", "rest_url": leader_url + "/"})
    client = create_app(_typed(standby), forward_timeout_s=5).test_client()

    created = client.post("/topics?route=src.dst", json={"topic": "orders", "numPartitions": 3})
    assert created.status_code == 201
    body = created.get_json()  # the fake's view names the answering controller as destination
    assert (body["topic"], body["partitions"], body["destination"]) == ("orders", 3, "leader")
    assert leader.calls == [("add_topic", ("orders", 3, "src.dst"))]
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
    response = create_app(_typed(standby)).test_client().post("/instances")
    assert response.status_code == 200 and response.get_json() == {"rebalanced": True, "moved": 2}
    assert seen == ["standby-7"]


def test_a_forwarded_request_to_a_non_leader_is_a_503(fake: FakeController) -> None:
    fake.leading, fake.leader_info = False, {"id": "c2", "rest_url": "http://127.0.0.1:1"}
    client = create_app(_typed(fake)).test_client()
    response = client.post("/topics", json={"topic": "orders"}, headers={FORWARDED_HEADER: "c2"})
    assert_json_error(response, 503)
    assert fake.calls == []


def test_two_standbys_naming_each_other_do_not_loop(serve: Callable[[Flask], str]) -> None:
    # Both believe the other leads (a stale leader node): one hop, then 503, relayed back.
    a = FakeController("a", leading=False)
    b = FakeController("b", leading=False)
    a_url, b_url = serve(create_app(_typed(a), forward_timeout_s=5)), serve(create_app(_typed(b), forward_timeout_s=5))
    a.leader_info, b.leader_info = {"id": "b", "rest_url": b_url}, {"id": "a", "rest_url": a_url}
    response = create_app(_typed(a), forward_timeout_s=5).test_client().post("/topics", json={"topic": "orders"})
    assert_json_error(response, 503)
    assert a.calls == [] and b.calls == []


def test_a_leader_that_does_not_answer_is_a_503(fake: FakeController) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fake.leading, fake.leader_info = False, {"id": "c2", "rest_url": f"http://127.0.0.1:{port}"}
    body = assert_json_error(create_app(_typed(fake), forward_timeout_s=2).test_client().post("/instances"), 503)
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
    for path, body in [("/tree/a.b/target", {"target": "b"}), ("/tree/a.L1/target", {"target": "b/c"}),
                       ("/tree/a.L1/target", {"leaf": "b"}), ("/tree/a.L1/target", ["b"])]:
        response = client.post(path, json=body)
        assert response.status_code == 400, (path, body)
        assert "error" in response.get_json()
    assert len([c for c in fake.calls if c[0] == "switch_target"]) == 1
