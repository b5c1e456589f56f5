"""controller.api.rest_json: the parts' typed answers shaped as the REST API's JSON (keys, values, order)."""

from __future__ import annotations

import json

from ferry.common.core import tree
from ferry.common.core.diff import Mismatch
from ferry.common.core.heartbeat import HeartbeatView, Latency
from ferry.common.core.schemas import ConflictReport, Copy, SchemaVersion, StateChange, SubjectStatus, TargetState
from ferry.common.model import ExternalView, IdealState, PartitionKey, WorkerInfo
from ferry.common.vocabulary import ControllerState, PartitionState, Problem
from ferry.controller.api import rest_json, wire_answers
from ferry.controller.groups.checkpoints import GroupCheckpoints, GroupOffsetTranslation, SyncResult
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


def _ordered(value: object) -> str:
    """The JSON text as Flask writes it here (``sort_keys`` off): key order included."""
    return json.dumps(value)


def _route_topic(route: str, assignment: dict[int, str], destination: str) -> RouteTopic:
    external = ExternalView(route, "orders", {0: {"worker": "w1", "state": PartitionState.ONLINE}})
    return RouteTopic(IdealState(route, "orders", 2, assignment), external, destination, f"{destination}.orders")


def test_a_topic_on_one_route_is_flat_and_on_several_is_keyed_by_route() -> None:
    one = rest_json.topic_json(TopicView("orders", {"a.b": _route_topic("a.b", {1: "w2", 0: "w1"}, "b")}))
    route = {
        "partitions": 2,
        "idealState": {"0": "w1", "1": "w2"},
        "externalView": {"0": {"worker": "w1", "state": "ONLINE"}},
        "workers": {"w1": [0], "w2": [1]},
        "destination": "b",
        "destinationTopic": "b.orders",
    }
    assert _ordered(one) == _ordered({"topic": "orders", **route, "routes": {"a.b": route}})

    two = rest_json.topic_json(
        TopicView(
            "orders", {"a.b": _route_topic("a.b", {0: "w1"}, "b"), "a.c": _route_topic("a.c", {0: "w1", 1: "w1"}, "c")}
        )
    )
    assert _ordered({k: v for k, v in two.items() if k != "routes"}) == _ordered(
        {
            "topic": "orders",
            "idealState": {"a.b/0": "w1", "a.c/0": "w1", "a.c/1": "w1"},
            "externalView": {
                "a.b/0": {"worker": "w1", "state": "ONLINE"},
                "a.c/0": {"worker": "w1", "state": "ONLINE"},
            },
            "workers": {"w1": ["a.b/0", "a.c/0", "a.c/1"]},
        }
    )
    assert list(two["routes"]) == ["a.b", "a.c"] and two["routes"]["a.c"]["destination"] == "c"


def test_reads_keep_their_keys_and_order() -> None:
    health = Health(False, "c1", ControllerState.STANDBY, False, "c2", "http://c2:9000", scheduler_running=True)
    assert _ordered(rest_json.health_json(health, health.readiness())) == _ordered(
        {
            "status": "zookeeper unreachable",
            "id": "c1",
            "state": "STANDBY",
            "leader": False,
            "leaderId": "c2",
            "leaderUrl": "http://c2:9000",
            "reasons": ["zookeeper unreachable"],
        }
    )
    instances = Instances(
        [Instance("w1", WorkerInfo("w1", "h", 7, None), ["a.b/orders/0"], 1, 0, 3, False)], {"w9": ["a.b/orders/1"]}
    )
    assert _ordered(rest_json.instances_json(instances)) == _ordered(
        {
            "instances": [
                {
                    "id": "w1",
                    "host": "h",
                    "pid": 7,
                    "metricsUrl": None,
                    "partitions": ["a.b/orders/0"],
                    "online": 1,
                    "error": 0,
                    "generation": 3,
                    "leaving": False,
                }
            ],
            "departed": [{"id": "w9", "partitions": ["a.b/orders/1"]}],
        }
    )
    mismatch = Mismatch(PartitionKey("a.b", "orders", 1), Problem.WORKER_DEAD, "w9", None)
    spark = {"checkedAt": 5.0, "problems": [], "srcKafka": {"ok": True}}
    assert _ordered(rest_json.validation_json(Validation([mismatch], {"partitions": 2}, spark))) == _ordered(
        {
            "ok": False,
            "summary": {"partitions": 2},
            "mismatches": [mismatch.to_json()],
            "spark": spark,
            "failover": {},
            "notices": [],
        }
    )
    source = SourceValidation(2, [SourceMismatch("a.b", "gone", 4, None, SourceProblem.MISSING)], spark)
    assert _ordered(rest_json.source_validation_json(source)) == _ordered(
        {
            "ok": False,
            "topics": 2,
            "mismatches": [
                {
                    "route": "a.b",
                    "topic": "gone",
                    "idealPartitions": 4,
                    "sourcePartitions": None,
                    "problem": "missing at source",
                }
            ],
            "spark": {"checkedAt": 5.0, "srcKafka": {"ok": True}},
        }
    )
    assert rest_json.source_validation_json(SourceValidation(0, [], None)) == {
        "ok": True,
        "topics": 0,
        "mismatches": [],
        "spark": None,
    }


def test_commands_offsets_and_jobs_keep_their_keys_and_order() -> None:
    assert _ordered(rest_json.topics_json([IdealState("a.b", "orders", 3, {0: "w1"})])) == _ordered(
        {"topics": [{"topic": "orders", "route": "a.b", "partitions": 3}]}
    )
    assert rest_json.deleted_json(TopicDeleted("orders", ("a.b",))) == {"topic": "orders", "deleted": True}
    assert _ordered(rest_json.rebalanced_json(Rebalanced(4))) == _ordered({"rebalanced": True, "moved": 4})

    key = PartitionKey("a.b", "orders", 0)
    stalled = NoProgress({key: 61.26}, {key: OffsetSample(5, 9)}, 60.0)
    assert _ordered(rest_json.noprogress_json(stalled, lambda route, topic: f"b.{topic}")) == _ordered(
        {
            "noprogress": [
                {
                    "partition": str(key),
                    "route": "a.b",
                    "topic": "orders",
                    "destinationTopic": "b.orders",
                    "partitionId": 0,
                    "committed": 5,
                    "logEnd": 9,
                    "lag": 4,
                    "stalledForS": 61.3,
                }
            ],
            "thresholdS": 60.0,
        }
    )

    view = HeartbeatView([Latency("a", "c", 2, 0.60004, 2.0)], {"a.b": None})
    assert _ordered(rest_json.heartbeats_json(view)) == _ordered(
        {
            "endToEnd": [{"origin": "a", "cluster": "c", "hops": 2, "latencyS": 0.6, "sinceLastS": 2.0}],
            "routes": {"a.b": {"latencyS": None, "sinceLastS": None}},
        }
    )

    t = GroupOffsetTranslation(
        route="a.b",
        group="app",
        topic="orders",
        partition=0,
        source_offset=5,
        source_end=9,
        destination_topic="b.orders",
        destination_offset=None,
        method="pending",
    )
    assert _ordered(
        rest_json.groups_json(GroupCheckpoints({"app": [t]}, {("a.b", "app"): 1.23456, ("a.b", "x"): 2.0}))
    ) == _ordered(
        {
            "groups": [
                {
                    "group": "app",
                    "checkpointAgeS": {"a.b": 1.235},
                    "partitions": [
                        {
                            "route": "a.b",
                            "group": "app",
                            "topic": "orders",
                            "partition": 0,
                            "sourceOffset": 5,
                            "sourceLogEnd": 9,
                            "lag": 4,
                            "destinationTopic": "b.orders",
                            "destinationOffset": None,
                            "method": "pending",
                        }
                    ],
                }
            ]
        }
    )
    assert rest_json.sync_json(SyncResult("app", 3)) == {"group": "app", "synced": 3}
    assert rest_json.sync_json(SyncResult("app", 0, "busy")) == {"group": "app", "synced": 0, "skipped": "busy"}


def test_the_tree_view_keeps_its_keys_and_order() -> None:
    derived = tree.distributors(tree.parse("1(a,b)"))
    rows = [DistributorRow(d, d.subtree[-1], False, COPYING) for d in derived]
    shaped = rest_json.tree_json(TreeView("1(a,b)", 60.0, rows, [], "TABLE"))
    assert list(shaped) == ["layout", "switchAfterS", "distributors", "unreachable", "table"]
    d = derived[0]
    assert _ordered(shaped["distributors"][0]) == _ordered(
        {
            "name": d.name,
            "cluster": d.cluster,
            "level": d.level,
            "mask": tree.format_flags(d.mask),
            "bit": tree.format_flags(d.bit),
            "subtree": list(d.subtree),
            "subtreeLayout": d.subtree_layout,
            "target": d.subtree[-1],
            "switched": False,
            "state": "copying",
        }
    )


def test_a_schema_report_keeps_its_keys_and_order() -> None:
    versions = [SchemaVersion("orders-value", 1, 7, "f1"), SchemaVersion("orders-value", 2, 8, "f2")]
    status = SubjectStatus("dst", "dr-orders-value", TargetState.PENDING, (1,), (2,))
    report = SchemaReport(
        "src",
        ["dst"],
        12.5,
        [SubjectReport("orders-value", versions, {1: "ENABLED", 2: "DISABLED"}, {"dst": status})],
        False,
        {"dst": 1},
        [ConflictReport("dst", "x-value", 1, 9, "dr-x-value", "taken")],
        [Copy("dst", "orders-value", 1, 7, "dr-orders-value")],
        [StateChange("dst", "orders-value", 2, "dr-orders-value", "DISABLED")],
        {"dr": "down"},
    )
    shaped = rest_json.schema_status_json(SchemaStatus(report, "12: down"))
    assert _ordered(shaped) == _ordered(
        {
            "primary": "src",
            "targets": ["dst"],
            "checkedAt": 12.5,
            "subjects": [
                {
                    "subject": "orders-value",
                    "version": 2,
                    "id": 8,
                    "versions": {"1": 7, "2": 8},
                    "states": {"1": "ENABLED", "2": "DISABLED"},
                    "targets": {
                        "dst": {
                            "subject": "dr-orders-value",
                            "state": "pending",
                            "syncedVersions": [1],
                            "missingVersions": [2],
                            "conflict": None,
                        }
                    },
                }
            ],
            "inSync": False,
            "outOfSync": {"dst": 1},
            "conflicts": [
                {
                    "target": "dst",
                    "subject": "x-value",
                    "version": 1,
                    "id": 9,
                    "targetSubject": "dr-x-value",
                    "reason": "taken",
                }
            ],
            "copied": [
                {"target": "dst", "subject": "orders-value", "version": 1, "id": 7, "targetSubject": "dr-orders-value"}
            ],
            "stateChanged": [
                {
                    "target": "dst",
                    "subject": "orders-value",
                    "version": 2,
                    "targetSubject": "dr-orders-value",
                    "state": "DISABLED",
                }
            ],
            "unreachable": {"dr": "down"},
            "lastError": "12: down",
        }
    )
    assert "lastError" not in rest_json.schema_report_json(report)  # POST /schemas/sync: the pass only


def test_the_bulk_listings_built_as_plain_dicts_are_what_their_models_write() -> None:
    shaped = rest_json.topics_json([IdealState("a.b", "orders", 3), IdealState("a.b", "audit", 1)])
    summaries = [
        wire_answers.TopicSummaryAnswer(topic=t, route="a.b", partitions=n) for t, n in (("orders", 3), ("audit", 1))
    ]
    assert _ordered(wire_answers.TopicListAnswer(topics=summaries).to_json()) == _ordered(shaped)

    samples = {
        PartitionKey("a.b", "orders", 1): OffsetSample(None, 9),
        PartitionKey("a.b", "orders", 0): OffsetSample(5, 9),
    }
    offsets = rest_json.offsets_json(samples, lambda route, topic: f"b.{topic}")
    rows = [
        rest_json.offset_row(key, sample, lambda route, topic: f"b.{topic}") for key, sample in sorted(samples.items())
    ]
    assert _ordered(wire_answers.OffsetsAnswer(offsets=rows).to_json()) == _ordered(offsets)
    assert offsets["offsets"][1]["committed"] is None and offsets["offsets"][1]["lag"] == 9
