"""The REST API's wire shapes: every answer validates back through its shape unchanged, request shapes
refuse bad input in one line naming the field, and the OpenAPI document's schemas are the shapes' own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from ferry.common.core import tree
from ferry.common.core.diff import Mismatch
from ferry.common.core.heartbeat import HeartbeatView, Latency
from ferry.common.core.schemas import ConflictReport, Copy, SchemaVersion, StateChange, SubjectStatus, TargetState
from ferry.common.model import ExternalView, IdealState, PartitionKey, WorkerInfo
from ferry.common.vocabulary import ControllerState, PartitionState, Problem
from ferry.controller.api import rest_json, wire, wire_answers, wire_requests
from ferry.controller.api.openapi import openapi_document
from ferry.controller.api.rest import create_app
from ferry.controller.failover.control import RouteFailover
from ferry.controller.failover.document import FailoverDocument, UnplannedReport
from ferry.controller.groups.checkpoints import GroupCheckpoints, GroupOffsetTranslation, SyncResult
from ferry.controller.groups.translate import OffsetTranslation
from ferry.controller.schemas.distributor import SchemaReport, SchemaStatus, SubjectReport
from ferry.controller.topics.admin import Rebalanced, TopicDeleted
from ferry.controller.topics.progress import NoProgress, OffsetSample
from ferry.controller.topics.reads import (
    Health,
    Instance,
    Instances,
    RouteTopic,
    SourceMismatch,
    SourceProblem,
    SourceValidation,
    TopicView,
    Validation,
)
from ferry.controller.tree.control import COPYING, DistributorRow, TreeView
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api

pytestmark = pytest.mark.unit

KEY = PartitionKey("a.b", "orders", 0)


def _destination(route: str, topic: str) -> str:
    return f"b.{topic}"


def _route_topic(route: str, destination: str) -> RouteTopic:
    external = ExternalView(
        route,
        "orders",
        {
            0: {"worker": "w1", "state": PartitionState.ONLINE},
            1: {"worker": "w2", "state": PartitionState.ERROR, "reason": "boom"},
        },
    )
    return RouteTopic(
        IdealState(route, "orders", 2, {0: "w1", 1: "w2"}), external, destination, f"{destination}.orders"
    )


def _schema_report() -> SchemaReport:
    versions = [SchemaVersion("orders-value", 1, 7, "f1"), SchemaVersion("orders-value", 2, 8, "f2")]
    status = SubjectStatus("dst", "dr-orders-value", TargetState.CONFLICT, (1,), (2,), "taken")
    return SchemaReport(
        "src",
        ["dst"],
        12.5,
        [SubjectReport("orders-value", versions, {1: "ENABLED"}, {"dst": status})],
        False,
        {"dst": 1},
        [ConflictReport("dst", "x-value", 1, 9, "dr-x-value", "taken")],
        [Copy("dst", "orders-value", 1, 7, "dr-orders-value")],
        [StateChange("dst", "orders-value", 2, "dr-orders-value", "DISABLED")],
        {"dr": "down"},
    )


def _answers() -> Iterator[tuple[type[BaseModel], Any]]:
    """(shape, an answer rest_json built) for every shape, with its optional parts present and absent."""
    yield wire_answers.ErrorAnswer, wire_answers.ErrorAnswer(error="no", status=400, request_id="r1").to_json()
    health = Health(True, "c1", ControllerState.STANDBY, True, "c1", None, scheduler_running=True)
    yield wire_answers.ControllerHealthAnswer, rest_json.health_json(health, health.readiness())
    down = Health(False, "c1", ControllerState.STANDBY, False, None, None, scheduler_running=False)
    yield wire_answers.ControllerHealthAnswer, rest_json.health_json(down, down.liveness())
    yield wire_answers.TopicListAnswer, rest_json.topics_json([IdealState("a.b", "orders", 3)])
    yield wire_answers.TopicViewAnswer, rest_json.topic_json(TopicView("orders", {"a.b": _route_topic("a.b", "b")}))
    yield (
        wire_answers.TopicViewAnswer,
        rest_json.topic_json(TopicView("orders", {"a.b": _route_topic("a.b", "b"), "a.c": _route_topic("a.c", "c")})),
    )
    yield wire_answers.DeletedAnswer, rest_json.deleted_json(TopicDeleted("orders", ("a.b",)))
    yield wire_answers.RebalancedAnswer, rest_json.rebalanced_json(Rebalanced(3))
    yield (
        wire_answers.InstancesAnswer,
        rest_json.instances_json(
            Instances(
                [Instance("w1", WorkerInfo("w1", "h", 7, "http://h:9"), ["a.b/orders/0"], 1, 0, None, True)],
                {"w9": ["a.b/orders/1"]},
            )
        ),
    )
    mismatches = [Mismatch(KEY, Problem.ERROR, "w1", "w1", "boom"), Mismatch(KEY, Problem.UNASSIGNED, None, None)]
    notice = {"route": "a.b", "topic": "orders", "partition": 0, "worker": None, "reason": "records deleted"}
    yield (
        wire_answers.ValidationAnswer,
        rest_json.validation_json(
            Validation(mismatches, {"ONLINE": 1}, {"checkedAt": 1.0}, {"a.b": "SYNCING"}, [notice])
        ),
    )
    yield wire_answers.ValidationAnswer, rest_json.validation_json(Validation([], {}, None))
    yield (
        wire_answers.SourceValidationAnswer,
        rest_json.source_validation_json(
            SourceValidation(
                1,
                [SourceMismatch("a.b", "gone", 4, None, SourceProblem.MISSING)],
                {"checkedAt": 5.0, "srcKafka": {"ok": True}},
            )
        ),
    )
    yield wire_answers.SourceValidationAnswer, rest_json.source_validation_json(SourceValidation(0, [], None))
    yield wire_answers.OffsetsAnswer, rest_json.offsets_json({KEY: OffsetSample(None, 4)}, _destination)
    yield (
        wire_answers.NoProgressAnswer,
        rest_json.noprogress_json(NoProgress({KEY: 61.0}, {KEY: OffsetSample(1, 4)}, 60.0), _destination),
    )
    yield (
        wire_answers.HeartbeatsAnswer,
        rest_json.heartbeats_json(
            HeartbeatView([Latency("a", "c", 2, 0.5, 1.0)], {"a.b": None, "a.c": Latency("a", "c", 1, 0.1, 0.2)})
        ),
    )
    translation = GroupOffsetTranslation(
        route="a.b",
        group="app",
        topic="orders",
        partition=0,
        source_offset=5,
        source_end=9,
        destination_topic="b.orders",
        destination_offset=7,
        method="exact",
    )
    yield (
        wire_answers.GroupsAnswer,
        rest_json.groups_json(GroupCheckpoints({"app": [translation]}, {("a.b", "app"): 1.5})),
    )
    yield wire_answers.GroupSyncedAnswer, rest_json.sync_json(SyncResult("app", 3))
    yield wire_answers.GroupSyncedAnswer, rest_json.sync_json(SyncResult("app", 0, "busy"))
    yield (
        wire_answers.TranslationAnswer,
        rest_json.offset_translation_json(
            OffsetTranslation("a.b", "orders", "b.orders", 0, "reverse", 5, None, "pending")
        ),
    )
    yield wire_answers.SchemaReportAnswer, rest_json.schema_report_json(_schema_report())
    yield wire_answers.SchemaStatusAnswer, rest_json.schema_status_json(SchemaStatus(_schema_report(), None))
    derived = tree.distributors(tree.parse("1(a,b)"))
    yield (
        wire_answers.TreeViewAnswer,
        rest_json.tree_json(TreeView("1(a,b)", 60.0, [DistributorRow(derived[0], "b", True, COPYING)], ["a"], "TABLE")),
    )
    yield wire_answers.TargetSwitchedAnswer, rest_json.target_switched_json({"a.L1": "b"})
    yield (
        wire_answers.PausedPartitionsAnswer,
        rest_json.paused_json({"topic": "orders", "paused": {"a.b": [0, 2], "a.c": None}}),
    )
    yield wire_answers.WorkerControlAnswer, rest_json.worker_control_json("w1", "drain", 4)
    yield wire_answers.WorkerControlAnswer, rest_json.worker_control_json("w1", None, 0)
    yield wire_requests.AutobalancingRequest, rest_json.autobalancing_json(False)
    yield (
        wire_answers.ThrottleAnswer,
        rest_json.throttle_json({"route": "a.b", "max_bytes_per_s": 1e6, "max_records_per_s": None}),
    )
    yield (
        wire_answers.ControlsAnswer,
        rest_json.controls_json(
            {
                "paused": {"a.b": {"orders": [1], "audit": None}},
                "cordoned": {"w1": "cordon"},
                "autobalancing": True,
                "throttles": {"a.b": {"max_bytes_per_s": None, "max_records_per_s": 10.0, "runtime": True}},
            }
        ),
    )
    planned = {
        "route": "a.b",
        "state": "FAILED_OVER",
        "planned": True,
        "groups": None,
        "topics": None,
        "partitions": {"orders": 2},
        "requestedAt": 1.0,
        "updatedAt": 2.0,
        "drain": {"sourceEnds": {}},
        "report": {"partitions": [], "groups": []},
        "failback": {"reverseRoute": "b.a"},
        "later": 1,
    }
    yield wire_answers.RouteStateAnswer, rest_json.route_state_json(planned)
    yield (
        wire_answers.RoutesAnswer,
        rest_json.routes_json(
            [
                {"route": "a.b", "source": "a", "destination": "b", "state": "ACTIVE"},
                {"route": "b.a", "source": "b", "destination": "a", **planned},
            ]
        ),
    )


def _ordered(value: Any) -> str:
    return json.dumps(value)


@pytest.mark.parametrize(("shape", "shaped"), list(_answers()), ids=lambda value: getattr(value, "__name__", ""))
def test_every_answer_validates_back_through_its_wire_shape_unchanged(shape: type[BaseModel], shaped: Any) -> None:
    assert _ordered(shape.model_validate(shaped).to_json()) == _ordered(shaped)  # type: ignore[attr-defined]


def test_every_answer_shape_has_an_answer_in_the_round_trip() -> None:
    assert set(wire_answers.RESPONSES) - {shape for shape, _ in _answers()} == set()


def test_absent_parts_stay_absent_and_nulls_stay_null() -> None:
    several = rest_json.topic_json(
        TopicView("orders", {"a.b": _route_topic("a.b", "b"), "a.c": _route_topic("a.c", "c")})
    )
    assert list(several) == ["topic", "idealState", "externalView", "workers", "routes"]
    one = rest_json.topic_json(TopicView("orders", {"a.b": _route_topic("a.b", "b")}))
    assert list(one) == [
        "topic",
        "partitions",
        "idealState",
        "externalView",
        "workers",
        "destination",
        "destinationTopic",
        "routes",
    ]
    assert one["externalView"] == {
        "0": {"worker": "w1", "state": "ONLINE"},
        "1": {"worker": "w2", "state": "ERROR", "reason": "boom"},
    }
    assert "lastError" in rest_json.schema_status_json(SchemaStatus(_schema_report(), None))
    assert rest_json.route_state_json({"route": "a.b", "state": "ACTIVE"}) == {"route": "a.b", "state": "ACTIVE"}
    state = rest_json.route_state_json({"route": "a.b", "state": "SYNCING", "planned": False, "groups": None, "x": 1})
    assert _ordered(state) == _ordered({"route": "a.b", "state": "SYNCING", "planned": False, "groups": None, "x": 1})


def test_a_mismatch_has_the_keys_ferry_zk_shows() -> None:
    for mismatch in (Mismatch(KEY, Problem.ERROR, "w1", "w1", "boom"), Mismatch(KEY, Problem.WORKER_DEAD, "w9", None)):
        assert _ordered(rest_json.mismatch(mismatch).to_json()) == _ordered(mismatch.to_json())


def test_a_topic_view_built_as_plain_dicts_is_what_its_wire_shape_writes() -> None:
    for routes in (
        {"a.b": _route_topic("a.b", "b")},
        {"a.b": _route_topic("a.b", "b"), "a.c": _route_topic("a.c", "c")},
    ):
        shaped = rest_json.topic_json(TopicView("orders", routes))
        per_route = {
            name: wire_answers.RouteTopicViewAnswer(
                partitions=one.ideal.partitions,
                ideal_state={str(p): w for p, w in sorted(one.ideal.assignment.items())},
                external_view={
                    str(p): wire_answers.PartitionReportAnswer(**entry)
                    for p, entry in sorted(one.external.partitions.items())
                },
                workers={"w1": [0], "w2": [1]},
                destination=one.destination,
                destination_topic=one.destination_topic,
            )
            for name, one in routes.items()
        }
        if len(routes) == 1:
            (only,) = per_route.values()
            shape = wire_answers.TopicViewAnswer(
                topic="orders",
                partitions=2,
                ideal_state=only.ideal_state,
                external_view=only.external_view,
                workers=only.workers,
                destination=only.destination,
                destination_topic=only.destination_topic,
                routes=per_route,
            )
        else:
            shape = wire_answers.TopicViewAnswer(
                topic="orders",
                ideal_state={f"{n}/{p}": w for n, r in per_route.items() for p, w in r.ideal_state.items()},
                external_view={f"{n}/{p}": e for n, r in per_route.items() for p, e in r.external_view.items()},
                workers={"w1": ["a.b/0", "a.c/0"], "w2": ["a.b/1", "a.c/1"]},
                routes=per_route,
            )
        assert _ordered(shape.to_json()) == _ordered(shaped)


# -- requests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "body", "problem"),
    [
        (wire_requests.PauseRequest, {"partitions": []}, "partitions: List should have at least 1 item"),
        (wire_requests.PauseRequest, {"partitions": [-1]}, "partitions.0: Input should be greater than or equal to 0"),
        (wire_requests.PauseRequest, {"partitions": [True]}, "partitions.0: Input should be a valid integer"),
        (
            wire_requests.PauseRequest,
            {"route": "nodot"},
            "route: must be a route name like source.destination, not 'nodot'",
        ),
        (wire_requests.PauseRequest, {"unknown": 1}, "unknown: unknown field"),
        (wire_requests.AutobalancingRequest, {"enabled": "yes"}, "enabled: Input should be a valid boolean"),
        (wire_requests.AutobalancingRequest, {}, "enabled: is required"),
        (wire_requests.ThrottleRequest, {"max_records_per_s": 0}, "max_records_per_s: Input should be greater than 0"),
        (wire_requests.ThrottleRequest, {"max_bytes_per_s": True}, "max_bytes_per_s: Input should be a valid number"),
        (wire_requests.ThrottleRequest, {"maxBytesPerS": 5}, "maxBytesPerS: unknown field"),
        (wire_requests.FailoverRequest, {"planned": "yes"}, "planned: Input should be a valid boolean"),
        (wire_requests.FailoverRequest, {"groups": "("}, "groups: '(' is not a regular expression"),
        (wire_requests.FailoverRequest, {"quietS": 3601}, "quietS: Input should be less than or equal to 3600"),
        (wire_requests.FailoverRequest, {"timeout_s": 5}, "timeout_s: unknown field"),
        (wire_requests.TopicRequest, {"topic": "orders", "num_partitions": 5}, "num_partitions: unknown field"),
        (
            wire_requests.TranslateRequest,
            {"topic": "orders", "partition": "-1", "offset": "0"},
            "partition: must be a whole number from 0 to 2147483646, not '-1'",
        ),
        (wire_requests.TranslateRequest, {"topic": "orders", "partition": "0"}, "offset: is required"),
        (
            wire_requests.TranslateRequest,
            {"topic": "orders", "partition": "0", "offset": "0", "direction": "up"},
            "direction: Input should be 'forward' or 'reverse'",
        ),
    ],
)
def test_a_bad_request_is_one_line_naming_the_field(
    shape: type[wire.WireRequest], body: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError) as caught:
        wire.parsed(shape, body, "{}")
    assert str(caught.value).startswith(problem) and "\n" not in str(caught.value)


def test_good_requests_keep_their_values_and_defaults() -> None:
    assert wire.parsed(wire_requests.FailoverRequest, {"quietS": 5}, "{}").quiet_s == 5.0
    assert wire.parsed(wire_requests.FailoverRequest, {}, "{}").timeout_s == 300.0
    assert wire.parsed(wire_requests.ThrottleRequest, {"max_bytes_per_s": 10}, "{}").max_bytes_per_s == 10.0
    query = wire.parsed(wire_requests.TranslateRequest, {"topic": "orders", "partition": "3", "offset": "42"}, "{}")
    assert (query.route, query.partition, query.offset, query.direction) == (None, 3, 42, "forward")


# -- the OpenAPI document ---------------------------------------------------------------------------


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "$ref":
                yield inner
            else:
                yield from _refs(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _refs(inner)


def test_every_schema_of_the_document_is_a_wire_shapes_own() -> None:
    document = openapi_document(auth_enabled=True, open_reads=False)
    schemas = document["components"]["schemas"]
    assert schemas == wire.component_schemas(wire_requests.REQUESTS, wire_answers.RESPONSES)
    for shape in (*wire_requests.REQUESTS, *wire_answers.RESPONSES):
        assert shape.model_config.get("title") in schemas
    prefix = "#/components/schemas/"
    assert {ref for ref in _refs(document) if not ref.startswith(prefix)} == set()
    assert {ref.removeprefix(prefix) for ref in _refs(document)} - set(schemas) == set()


# The names clients generate their types from: a wire class may be renamed, these may not.
PUBLISHED_NAMES = [
    "Autobalancing",
    "ControllerState",
    "Controls",
    "Deleted",
    "Departed",
    "Distributor",
    "EndToEnd",
    "Error",
    "FailoverRequest",
    "Figures",
    "GroupPartition",
    "GroupRow",
    "GroupSynced",
    "Groups",
    "Health",
    "Heartbeats",
    "Instance",
    "Instances",
    "Mismatch",
    "NoProgress",
    "NoProgressRow",
    "Notice",
    "OffsetRow",
    "Offsets",
    "PartitionReport",
    "PauseRequest",
    "PausedPartitions",
    "Rebalanced",
    "RouteState",
    "RouteThrottle",
    "RouteTopicView",
    "Routes",
    "SchemaConflict",
    "SchemaCopy",
    "SchemaReport",
    "SchemaStateChange",
    "SchemaStatus",
    "SchemaSubject",
    "SchemaTargetStatus",
    "SourceMismatch",
    "SourceValidation",
    "SparkCheck",
    "SyncRequest",
    "TargetRequest",
    "TargetSwitched",
    "Throttle",
    "ThrottleAnswer",
    "TopicEntry",
    "TopicList",
    "TopicRequest",
    "TopicSummary",
    "TopicView",
    "TopicsRequest",
    "Translation",
    "TreeView",
    "Validation",
    "WorkerControl",
]


def test_the_document_publishes_each_schema_under_its_pinned_name_not_its_class_name() -> None:
    schemas = openapi_document(auth_enabled=False, open_reads=True)["components"]["schemas"]
    assert list(schemas) == PUBLISHED_NAMES
    assert schemas["TopicView"]["title"] == "TopicView"
    assert schemas["Instances"]["properties"]["instances"]["items"] == {"$ref": "#/components/schemas/Instance"}


def test_two_wire_shapes_published_under_one_name_are_refused() -> None:
    class FirstAnswer(wire.WireShape, title="Twice"):
        value: int

    class SecondAnswer(wire.WireShape, title="Twice"):
        value: str

    with pytest.raises(ValueError, match="same name: Twice"):
        wire.component_schemas([], [FirstAnswer, SecondAnswer])


def test_every_json_body_and_answer_of_the_paths_refers_to_a_wire_shape() -> None:
    document = openapi_document(auth_enabled=False, open_reads=True)
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            contents = [response.get("content", {}) for response in operation["responses"].values()]
            contents.append(operation.get("requestBody", {}).get("content", {}))
            for content in contents:
                schema = content.get("application/json", {}).get("schema")
                if schema is None or path == "/openapi.json":
                    continue
                choices = schema.get("oneOf", [schema])
                assert all(set(choice) == {"$ref"} for choice in choices), (method, path, schema)


def test_the_translate_query_is_its_wire_shapes() -> None:
    document = openapi_document(auth_enabled=False, open_reads=True)
    parameters = document["paths"]["/translate"]["get"]["parameters"]
    assert [p["name"] for p in parameters] == list(wire_requests.TranslateRequest.model_fields)
    assert [p["name"] for p in parameters if p["required"]] == ["topic", "partition", "offset"]


# -- the failover body and GET /translate at the edge -------------------------------------------------


class FailoverFake(FakeController):
    """A controller whose ``failover`` part records what it was wire_requests."""

    @property
    def failover(self) -> FailoverFake:
        return self

    def routes(self) -> list[RouteFailover]:
        return [
            RouteFailover(route="src.dst", source="src", destination="dst", document=FailoverDocument.active("src.dst"))
        ]

    def fail_over(
        self, route: str, planned: bool, groups: str | None, topics: str | None, quiet_s: float, timeout_s: float
    ) -> FailoverDocument:
        self._call("fail_over", route, planned, groups, topics, quiet_s, timeout_s)
        report = UnplannedReport(source_ends_seen_at=None, rpo=[], not_copied=0, groups=[])
        return FailoverDocument(route=route, state="FAILED_OVER", planned=planned, groups=groups, report=report)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"planned": 1}, "planned: Input should be a valid boolean"),
        ({"quietS": -1}, "quietS: Input should be greater than or equal to 0"),
        ({"topics": "(("}, "topics: '((' is not a regular expression"),
        ({"quiet_s": 1}, "quiet_s: unknown field"),
        ([1], "the body must be a JSON object"),
    ],
)
def test_a_bad_failover_body_is_a_400_naming_the_field(body: Any, problem: str) -> None:
    fake = FailoverFake()
    response = create_app(as_controller_api(fake)).test_client().post("/routes/src.dst/failover", json=body)
    assert assert_json_error(response, 400)["error"].startswith(problem)
    assert fake.calls == []


def test_a_failover_without_a_body_takes_the_defaults_and_answers_the_routes_state() -> None:
    fake = FailoverFake()
    client = create_app(as_controller_api(fake)).test_client()
    answer = client.post("/routes/src.dst/failover")
    assert answer.status_code == 200
    report: dict[str, Any] = {"sourceEndsSeenAt": None, "rpo": [], "notCopied": 0, "groups": []}
    assert _ordered(answer.get_json()) == _ordered(
        {"route": "src.dst", "state": "FAILED_OVER", "planned": False, "groups": None, "report": report}
    )
    assert fake.calls == [("fail_over", ("src.dst", False, None, None, 5.0, 300.0))]
    assert client.get("/routes").get_json() == {
        "routes": [{"route": "src.dst", "source": "src", "destination": "dst", "state": "ACTIVE"}]
    }


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        (
            "topic=orders&partition=0&offset=abc",
            "offset: must be a whole number from 0 to 9223372036854775807, not 'abc'",
        ),
        ("topic=orders&partition=0&offset=0&group=g", "group: unknown field"),
        ("topic=orders&partition=0&offset=0&route=nodot", "route: must be a route name like source.destination"),
        ("partition=0&offset=0", "topic: is required"),
    ],
)
def test_a_bad_translate_query_is_a_400_naming_the_argument(query: str, problem: str) -> None:
    client = create_app(as_controller_api(FakeController())).test_client()
    assert assert_json_error(client.get(f"/translate?{query}"), 400)["error"].startswith(problem)
