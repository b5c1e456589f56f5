"""The failover document (controller/failover/document.py): what ``failover/<route>`` holds, typed.

The documents below are kept as their bytes: two written by Ferry 1.0.0's failover workflow and two by
the workflow as it was just before the document had its own type, each run against fakes of Kafka and
ZooKeeper. They read as typed documents, are written back as the same JSON, and ``GET /routes`` answers
them byte for byte as it did when it passed the node's JSON through. The two dry runs' answers, kept the
same way, are what the typed answer writes too."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kazoo.exceptions import NoNodeError

from ferry.common.core.acl_sync import Binding
from ferry.common.model import encode
from ferry.common.zk.layout import ZkLayout
from ferry.controller.api import rest_json
from ferry.controller.errors import ControllerError
from ferry.controller.failover import states as fsm
from ferry.controller.failover.control import RouteFailover
from ferry.controller.failover.document import (
    AclGrants,
    BindingRow,
    FailoverDocument,
    FailoverPlan,
    PlannedPlan,
    PlannedReport,
    RpoRow,
    UnplannedPlan,
    UnplannedReport,
)
from ferry.controller.failover.guard import read_state

pytestmark = pytest.mark.unit

# Ferry 1.0.0: an unplanned failover with ACLs granted, failing back
V1_UNPLANNED_FAILING_BACK = (
    b'{"route": "src.dst", "state": "FAILING_BACK", "planned": false, "groups": null, "topics": null'
    b', "partitions": {"orders": 2}, "requestedAt": 1764300000.75, "updatedAt": 1764300003.75'
    b', "report": {"sourceEndsSeenAt": 1764299990.5, "rpo": [{"topic": "orders", "partition": 0'
    b', "sourceEnd": 100, "copied": 95, "notCopied": 5, "lastCopyMs": 1700000000123}, {"topic": "orders"'
    b', "partition": 1, "sourceEnd": 101, "copied": 101, "notCopied": 0, "lastCopyMs": 1700000000456}]'
    b', "notCopied": 5, "groups": [{"group": "app-1", "partitions": [{"topic": "src.orders"'
    b', "partition": 0, "sourceOffset": null, "destinationOffset": 40, "lag": null}'
    b', {"topic": "src.orders", "partition": 1, "sourceOffset": null, "destinationOffset": 41'
    b', "lag": null}]}], "acls": {"from": "source", "granted": [{"resourceType": "GROUP", "name": "app-1"'
    b', "pattern": "LITERAL", "principal": "User:app", "host": "*", "operation": "READ"'
    b', "permission": "ALLOW"}, {"resourceType": "TOPIC", "name": "src.orders", "pattern": "LITERAL"'
    b', "principal": "User:app", "host": "*", "operation": "WRITE", "permission": "ALLOW"}]'
    b', "alreadyThere": 1, "skipped": [], "errors": []}}, "failback": {"reverseRoute": "dst.src"'
    b', "reverseCommitted": {"orders/0": 100, "orders/1": 101, "src.orders/0": 100, "src.orders/1": 101}'
    b', "rpoKeptAtSource": [{"topic": "orders", "partition": 0, "sourceEnd": 100, "copied": 95'
    b', "notCopied": 5, "lastCopyMs": 1700000000123}, {"topic": "orders", "partition": 1, "sourceEnd": 101'
    b', "copied": 101, "notCopied": 0, "lastCopyMs": 1700000000456}]}}'
)

# Ferry 1.0.0: a planned failover, failed over
V1_PLANNED_FAILED_OVER = (
    b'{"route": "src.dst", "state": "FAILED_OVER", "planned": true, "groups": null, "topics": null'
    b', "partitions": {"orders": 2}, "requestedAt": 1764300004.75, "updatedAt": 1764300008.25'
    b', "drain": {"sourceEnds": {"orders/0": 100, "orders/1": 101}, "committed": {"orders/0": 100'
    b', "orders/1": 101, "src.orders/0": 100, "src.orders/1": 101}}'
    b', "report": {"partitions": [{"topic": "orders", "partition": 0, "sourceEnd": 100, "committed": 100'
    b', "destinationEnd": 100, "lag": 0}, {"topic": "orders", "partition": 1, "sourceEnd": 101'
    b', "committed": 101, "destinationEnd": 101, "lag": 0}], "groups": [{"group": "app-1"'
    b', "partitions": [{"topic": "src.orders", "partition": 0, "sourceOffset": 42, "destinationOffset": 40'
    b', "lag": 58}, {"topic": "src.orders", "partition": 1, "sourceOffset": 43, "destinationOffset": 41'
    b', "lag": 58}]}], "acls": {"from": "source", "granted": [], "alreadyThere": 3, "skipped": []'
    b', "errors": []}}}'
)

# Before the typed document: a planned failover writing down the ACLs it is about to grant
SYNCING_GRANTING = (
    b'{"route": "src.dst", "state": "SYNCING", "planned": true, "groups": null, "topics": null'
    b', "partitions": {"orders": 2}, "requestedAt": 1764300006.25, "updatedAt": 1764300009.75'
    b', "drain": {"sourceEnds": {"orders/0": 100, "orders/1": 101}, "committed": {"orders/0": 100'
    b', "orders/1": 101, "src.orders/0": 100, "src.orders/1": 101}}'
    b', "report": {"partitions": [{"topic": "orders", "partition": 0, "sourceEnd": 100, "committed": 100'
    b', "destinationEnd": 100, "lag": 0}, {"topic": "orders", "partition": 1, "sourceEnd": 101'
    b', "committed": 101, "destinationEnd": 101, "lag": 0}], "groups": [{"group": "app-1"'
    b', "partitions": [{"topic": "src.orders", "partition": 0, "sourceOffset": 42, "destinationOffset": 40'
    b', "lag": 58}, {"topic": "src.orders", "partition": 1, "sourceOffset": 43, "destinationOffset": 41'
    b', "lag": 58}]}]}, "aclsGranting": [{"resourceType": "GROUP", "name": "app-1", "pattern": "LITERAL"'
    b', "principal": "User:app", "host": "*", "operation": "READ", "permission": "ALLOW"}'
    b', {"resourceType": "TOPIC", "name": "src.orders", "pattern": "LITERAL", "principal": "User:app"'
    b', "host": "*", "operation": "WRITE", "permission": "ALLOW"}]}'
)

# Before the typed document: an unplanned failover with the RPO as a range, failing back
UNPLANNED_FAILING_BACK = (
    b'{"route": "src.dst", "state": "FAILING_BACK", "planned": false, "groups": null, "topics": null'
    b', "partitions": {"orders": 2}, "requestedAt": 1764300001.25, "updatedAt": 1764300005.25'
    b', "report": {"sourceEndsSeenAt": 1764299990.5, "sourceUnseenS": 12.2, "rpo": [{"topic": "orders"'
    b', "partition": 0, "sourceEnd": 100, "copied": 95, "notCopied": 5, "notCopiedUpperEstimate": 36'
    b', "produceRate": 2.5, "lastCopyMs": 1700000000123}, {"topic": "orders", "partition": 1'
    b', "sourceEnd": 101, "copied": 101, "notCopied": 0, "notCopiedUpperEstimate": 0, "produceRate": null'
    b', "lastCopyMs": 1700000000456}], "notCopied": 5, "notCopiedUpperEstimate": 36'
    b', "rpoNote": "the produce rate at the source is unknown for 1 partition (source ends kept by an older Ferry'
    b', or seen once): the estimate counts only the records seen there", "groups": [{"group": "app-1"'
    b', "partitions": [{"topic": "src.orders", "partition": 0, "sourceOffset": null'
    b', "destinationOffset": 40, "lag": null}, {"topic": "src.orders", "partition": 1'
    b', "sourceOffset": null, "destinationOffset": 41, "lag": null}]}], "acls": {"destination": "dst"'
    b', "from": "source", "granted": [{"resourceType": "GROUP", "name": "app-1", "pattern": "LITERAL"'
    b', "principal": "User:app", "host": "*", "operation": "READ", "permission": "ALLOW"}'
    b', {"resourceType": "TOPIC", "name": "src.orders", "pattern": "LITERAL", "principal": "User:app"'
    b', "host": "*", "operation": "WRITE", "permission": "ALLOW"}], "alreadyThere": 1, "skipped": []'
    b', "errors": []}}, "failback": {"reverseRoute": "dst.src", "reverseCommitted": {"orders/0": 100'
    b', "orders/1": 101, "src.orders/0": 100, "src.orders/1": 101}, "rpoKeptAtSource": [{"topic": "orders"'
    b', "partition": 0, "sourceEnd": 100, "copied": 95, "notCopied": 5, "notCopiedUpperEstimate": 36'
    b', "produceRate": 2.5, "lastCopyMs": 1700000000123}, {"topic": "orders", "partition": 1'
    b', "sourceEnd": 101, "copied": 101, "notCopied": 0, "notCopiedUpperEstimate": 0, "produceRate": null'
    b', "lastCopyMs": 1700000000456}]}}'
)

# Before the typed answers: an unplanned failover's dry run, as json.dumps wrote the workflow's dict
UNPLANNED_PLAN = (
    b'{"route": "src.dst", "source": "src", "destination": "dst", "dryRun": true, "state": "ACTIVE"'
    b', "planned": false, "phases": ["REQUESTED", "SYNCING", "FAILED_OVER"], "groups": null'
    b', "topics": null, "partitions": {"orders": 2}, "plan": {"sourceEndsSeenAt": 1764299990.5'
    b', "sourceUnseenS": 10.2, "rpo": [{"topic": "orders", "partition": 0, "sourceEnd": 100, "copied": 95'
    b', "notCopied": 5, "notCopiedUpperEstimate": 31, "produceRate": 2.5, "lastCopyMs": 1700000000123}'
    b', {"topic": "orders", "partition": 1, "sourceEnd": 101, "copied": 101, "notCopied": 0'
    b', "notCopiedUpperEstimate": 0, "produceRate": null, "lastCopyMs": 1700000000456}], "notCopied": 5'
    b', "notCopiedUpperEstimate": 31'
    b', "rpoNote": "the produce rate at the source is unknown for 1 partition (source ends kept by an older Ferry'
    b', or seen once): the estimate counts only the records seen there", "groups": [{"group": "app-1"'
    b', "partitions": [{"topic": "src.orders", "partition": 0, "method": "exact", "sourceOffset": 42'
    b', "destinationOffset": 40, "committed": 40}, {"topic": "src.orders", "partition": 1'
    b', "method": "timestamp", "sourceOffset": 43, "destinationOffset": 41, "committed": 41}]}]}}'
)

# Before the typed answers: a planned failover's dry run, as json.dumps wrote the workflow's dict
PLANNED_PLAN = (
    b'{"route": "src.dst", "source": "src", "destination": "dst", "dryRun": true, "state": "ACTIVE"'
    b', "planned": true, "phases": ["REQUESTED", "DRAINING", "SYNCING", "FAILED_OVER"], "groups": null'
    b', "topics": null, "partitions": {"orders": 2}, "plan": {"partitions": [{"topic": "orders"'
    b', "partition": 0, "sourceEnd": 100, "committed": 100, "lag": 0}, {"topic": "orders", "partition": 1'
    b', "sourceEnd": 101, "committed": 101, "lag": 0}], "groups": [{"group": "app-1"'
    b', "partitions": [{"topic": "src.orders", "partition": 0, "method": "exact", "sourceOffset": 42'
    b', "destinationOffset": 40, "committed": 40, "lag": 58}, {"topic": "src.orders", "partition": 1'
    b', "method": "exact", "sourceOffset": 43, "destinationOffset": 41, "committed": 41, "lag": 58}]}]}}'
)

DOCUMENTS = {
    "1.0.0 unplanned, failing back": V1_UNPLANNED_FAILING_BACK,
    "1.0.0 planned, failed over": V1_PLANNED_FAILED_OVER,
    "granting ACLs": SYNCING_GRANTING,
    "unplanned with the RPO's range, failing back": UNPLANNED_FAILING_BACK,
}


@pytest.mark.parametrize("written", DOCUMENTS.values(), ids=list(DOCUMENTS))
def test_a_document_ferry_wrote_reads_typed_and_is_written_back_as_the_same_json(written: bytes) -> None:
    document = FailoverDocument.from_bytes(written)
    assert json.loads(document.to_bytes()) == json.loads(written)
    # Written as every node is (sorted keys, no spaces); its keys in the order Ferry 1.x set them give the
    # very bytes it wrote.
    assert document.to_bytes() == encode(json.loads(written))
    assert json.dumps(document.to_json()).encode() == written
    assert FailoverDocument.from_bytes(document.to_bytes()) == document


@pytest.mark.parametrize("written", DOCUMENTS.values(), ids=list(DOCUMENTS))
def test_get_routes_answers_a_document_as_it_did_with_the_nodes_json(written: bytes) -> None:
    route = RouteFailover(
        route="src.dst", source="src", destination="dst", document=FailoverDocument.from_bytes(written)
    )
    passed_through = {"route": "src.dst", "source": "src", "destination": "dst", **json.loads(written)}
    assert json.dumps(rest_json.route_state_json(route.to_json())) == json.dumps(
        rest_json.route_state_json(passed_through)
    )
    assert json.dumps(rest_json.routes_json([route.to_json()])) == json.dumps(rest_json.routes_json([passed_through]))


@pytest.mark.parametrize(("answered", "kind"), [(UNPLANNED_PLAN, UnplannedPlan), (PLANNED_PLAN, PlannedPlan)])
def test_a_dry_run_answers_what_it_answered_as_a_dict(answered: bytes, kind: type) -> None:
    plan = FailoverPlan.model_validate_json(answered)
    assert isinstance(plan.plan, kind)
    assert json.dumps(plan.to_json()).encode() == answered
    assert json.dumps(rest_json.route_state_json(plan.to_json())) == json.dumps(
        rest_json.route_state_json(json.loads(answered))
    )


def test_a_1x_document_has_its_parts_typed_and_lacks_what_came_later() -> None:
    unplanned = FailoverDocument.from_bytes(V1_UNPLANNED_FAILING_BACK)
    assert (unplanned.state, unplanned.planned, unplanned.partitions) == (fsm.FAILING_BACK, False, {"orders": 2})
    assert isinstance(unplanned.report, UnplannedReport)
    assert unplanned.report.not_copied == 5 and unplanned.report.not_copied_upper_estimate is None
    assert [(row.partition, row.not_copied, row.produce_rate) for row in unplanned.rpo()] == [
        (0, 5, None),
        (1, 0, None),
    ]
    acls = unplanned.acls()
    assert acls is not None and acls.destination is None  # the restore revokes on the route's destination
    assert [row.binding() for row in acls.granted] == [
        Binding("GROUP", "app-1", "LITERAL", "User:app", "*", "READ", "ALLOW"),
        Binding("TOPIC", "src.orders", "LITERAL", "User:app", "*", "WRITE", "ALLOW"),
    ]
    assert unplanned.failback is not None and unplanned.failback.rpo_kept_at_source == unplanned.rpo()
    assert "produceRate" not in json.dumps(unplanned.to_json())  # nothing 1.x lacked is written as null

    planned = FailoverDocument.from_bytes(V1_PLANNED_FAILED_OVER)
    assert isinstance(planned.report, PlannedReport) and planned.drain is not None
    assert planned.drain.source_ends == {"orders/0": 100, "orders/1": 101}
    assert [(p.source_end, p.destination_end, p.lag) for p in planned.report.partitions] == [
        (100, 100, 0),
        (101, 101, 0),
    ]
    assert planned.rpo() == [] and planned.acls() == AclGrants(from_="source", already_there=3)


def test_the_acls_reported_replace_the_ones_written_down_before_granting() -> None:
    granting = FailoverDocument.from_bytes(SYNCING_GRANTING)
    assert granting.acls_granting is not None and len(granting.acls_granting) == 2
    acls = AclGrants(
        destination="dst", from_="source", granted=granting.acls_granting, already_there=1, skipped=[], errors=[]
    )
    reported = granting.with_acls(acls)
    written = reported.to_json()
    assert "aclsGranting" not in written
    assert written["report"]["acls"]["granted"] == [row.to_json() for row in granting.acls_granting]
    assert {k: v for k, v in written.items() if k != "report"} == {
        k: v for k, v in granting.to_json().items() if k not in ("report", "aclsGranting")
    }


def test_a_document_with_only_its_route_and_state_reads_and_stays_so() -> None:
    bare = FailoverDocument.from_bytes(b'{"route":"src.dst","state":"REQUESTED"}')
    assert bare.to_json() == {"route": "src.dst", "state": "REQUESTED"}
    assert (bare.planned, bare.groups, bare.partitions, bare.report) == (False, None, {}, None)
    assert FailoverDocument.active("src.dst").to_json() == {"route": "src.dst", "state": "ACTIVE"}


def test_fields_a_newer_ferry_adds_are_ignored() -> None:
    newer = json.loads(V1_PLANNED_FAILED_OVER)
    newer["later"] = {"x": 1}
    newer["report"]["partitions"][0]["later"] = 2
    document = FailoverDocument.from_bytes(json.dumps(newer).encode())
    assert json.loads(document.to_bytes()) == json.loads(V1_PLANNED_FAILED_OVER)


class _Zk:
    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], SimpleNamespace(version=3)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"route":"src.dst","state":"PAUSED"}', "state: Value error, not a failover state: 'PAUSED'"),
        (b'{"route":"src.dst"}', "state: Field required"),
        (b'{"route":"src.dst","state":"SYNCING","partitions":{"orders":"two"}}', "partitions.orders:"),
        (b"not json", "Invalid JSON"),
    ],
)
def test_a_node_that_is_no_failover_document_is_one_clear_error(data: bytes, problem: str) -> None:
    layout = ZkLayout("/t")
    with pytest.raises(ControllerError) as raised:
        read_state(_Zk({layout.failover("src.dst"): data}), layout, "src.dst")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("/t/failover/src.dst holds no failover document")
    assert problem in message


def test_a_route_without_a_node_is_active() -> None:
    document, version = read_state(_Zk({}), ZkLayout("/t"), "src.dst")
    assert (document, version) == (FailoverDocument.active("src.dst"), -1)
    written = FailoverDocument.from_bytes(V1_PLANNED_FAILED_OVER)
    layout = ZkLayout("/t")
    document, version = read_state(_Zk({layout.failover("src.dst"): V1_PLANNED_FAILED_OVER}), layout, "src.dst")
    assert (document, version) == (written, 3)


_OPTIONAL_RPO_FIELDS = {
    "notCopiedUpperEstimate": st.none() | st.integers(0, 10**6),
    "produceRate": st.none() | st.integers(0, 1000) | st.floats(0, 1e6, allow_nan=False),
}


@given(
    row=st.fixed_dictionaries(
        {
            "topic": st.sampled_from(["orders", "a.b-c_d"]),
            "partition": st.integers(0, 10**4),
            "sourceEnd": st.none() | st.integers(0, 2**62),
            "copied": st.integers(0, 2**62),
            "notCopied": st.none() | st.integers(0, 2**62),
            "lastCopyMs": st.none() | st.integers(0, 2**50),
        },
        optional=_OPTIONAL_RPO_FIELDS,
    )
)
def test_an_rpo_row_is_written_back_with_exactly_the_fields_and_values_it_was_read_with(row: dict[str, Any]) -> None:
    assert json.dumps(RpoRow.model_validate(row).to_json(), sort_keys=True) == json.dumps(row, sort_keys=True)


def test_a_binding_row_is_the_binding_it_names() -> None:
    row = BindingRow.model_validate_json(
        b'{"resourceType": "TOPIC", "name": "src.orders", "pattern": "LITERAL", "principal": "User:app",'
        b' "host": "*", "operation": "WRITE", "permission": "ALLOW"}'
    )
    assert BindingRow.of(row.binding()) == row
