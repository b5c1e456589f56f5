"""The typed vocabulary (string enums) and the ZooKeeper payload models.

The payloads below are literal bytes written by Ferry before the payloads became pydantic models
(hand-written encoders): the models must read them and write them back byte for byte, so old and
new processes share one ZooKeeper layout with no version field.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionStatus,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
    count_states,
)
from ferry.common.vocabulary import ControllerState, OpKind, PartitionState, Problem, WorkerState
from ferry.controller.lead.store import Op

pytestmark = pytest.mark.unit

P0 = PartitionKey("src.dst", "orders", 0)
P11 = PartitionKey("src.dst", "orders.v2", 11)

# Written by the hand-written encoders common/model.py had before its pydantic models: old and new
# processes share a tree, so the models must read and write exactly these bytes.
OLD_IDEAL = b'{"assignment":{"0":"w1","10":"w1","2":"w2"},"partitions":12,"route":"src.dst","topic":"orders"}'
OLD_ASSIGNMENT = b'{"generation":7,"partitions":["src.dst/orders.v2/11","src.dst/orders/0"]}'
OLD_STATUS = (
    b'{"generation":4,"leaving":true,"partitions":{"src.dst/orders.v2/11":{"reason":"MSG_SIZE_TOO_LARGE",'
    b'"state":"ERROR"},"src.dst/orders/0":{"state":"ONLINE"}}}'
)
OLD_INFO = b'{"host":"host-a","id":"w1","metrics_url":"http://host-a:9100/metrics","pid":1234}'
OLD_INFO_BARE = b'{"host":"host-b","id":"w2","metrics_url":null,"pid":5}'
OLD_VIEW = (
    b'{"partitions":{"0":{"state":"ONLINE","worker":"w1"},"1":{"reason":"x","state":"ERROR","worker":"w2"},'
    b'"2":{"state":"OFFLINE","worker":"w2"}},"route":"src.dst","topic":"orders"}'
)


def test_old_payloads_decode_and_encode_to_the_same_bytes() -> None:
    ideal = IdealState.from_bytes(OLD_IDEAL)
    assert ideal == IdealState("src.dst", "orders", 12, {0: "w1", 2: "w2", 10: "w1"})
    assignment = WorkerAssignment.from_bytes(OLD_ASSIGNMENT)
    assert assignment == WorkerAssignment(7, frozenset({P0, P11}))
    status = WorkerStatus.from_bytes(OLD_STATUS)
    assert status == WorkerStatus(
        4,
        {P0: PartitionStatus(PartitionState.ONLINE), P11: PartitionStatus(PartitionState.ERROR, "MSG_SIZE_TOO_LARGE")},
        leaving=True,
    )
    info = WorkerInfo.from_bytes(OLD_INFO)
    assert info == WorkerInfo("w1", "host-a", 1234, "http://host-a:9100/metrics")
    bare = WorkerInfo.from_bytes(OLD_INFO_BARE)
    assert bare == WorkerInfo("w2", "host-b", 5)
    view = ExternalView.from_bytes(OLD_VIEW)
    assert view.partitions[1] == {"worker": "w2", "state": "ERROR", "reason": "x"}
    for value, old in [
        (ideal, OLD_IDEAL),
        (assignment, OLD_ASSIGNMENT),
        (status, OLD_STATUS),
        (info, OLD_INFO),
        (bare, OLD_INFO_BARE),
        (view, OLD_VIEW),
    ]:
        assert value is not None
        assert value.to_bytes() == old, type(value).__name__


def test_decoded_states_are_the_enum() -> None:
    status = WorkerStatus.from_bytes(OLD_STATUS)
    assert {type(s.state) for s in status.partitions.values()} == {PartitionState}
    view = ExternalView.from_bytes(OLD_VIEW)
    assert view.partitions[0]["state"] is PartitionState.ONLINE


def test_a_newer_payloads_extra_fields_are_ignored() -> None:
    newer = json.loads(OLD_STATUS) | {"zone": "eu-1"}
    assert WorkerStatus.from_bytes(json.dumps(newer).encode()) == WorkerStatus.from_bytes(OLD_STATUS)


@pytest.mark.parametrize(
    ("cls", "data", "field"),
    [
        (IdealState, b'{"route":"r","topic":"t"}', "partitions"),
        (WorkerStatus, b'{"generation":1,"partitions":{"r/t/0":{"state":"ASLEEP"}}}', "state"),
        (WorkerInfo, b'{"id":"w1","host":"h","pid":"many"}', "pid"),
        (ExternalView, b'{"route":"r","topic":"t","partitions":{"x":{"worker":"w","state":"ONLINE"}}}', "partitions"),
    ],
)
def test_a_malformed_payload_names_its_field(cls: type, data: bytes, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        cls.from_bytes(data)
    assert issubclass(ValidationError, ValueError)  # the worker's assignment watch catches ValueError


def test_external_view_counts_states() -> None:
    view = ExternalView.from_bytes(OLD_VIEW)
    assert view.state_counts(4) == {
        "ONLINE": 1,
        "ERROR": 1,
        "OFFLINE": 2,
        "PAUSED": 0,
    }  # partition 3: nobody reports it
    assert count_states([]) == {"ONLINE": 0, "OFFLINE": 0, "ERROR": 0, "PAUSED": 0}
    assert WorkerStatus.from_bytes(OLD_STATUS).state_counts()[PartitionState.ERROR] == 1


@pytest.mark.parametrize("enum", [PartitionState, Problem, ControllerState, WorkerState, OpKind])
def test_enum_members_are_their_words(enum: type) -> None:
    for member in enum:  # type: ignore[attr-defined]
        assert member == member.value and f"{member}" == member.value and str(member) == member.value
        assert json.loads(json.dumps({"x": member})) == {"x": member.value}
        assert enum(member.value) is member


@given(
    st.dictionaries(st.integers(0, 10_000), st.sampled_from(["w1", "w2", "worker-3"])),
    st.sampled_from(list(PartitionState)),
)
def test_payload_round_trips(assignment: dict[int, str], state: PartitionState) -> None:
    ideal = IdealState("a.b", "t", len(assignment), assignment)
    assert IdealState.from_bytes(ideal.to_bytes()) == ideal
    status = WorkerStatus(
        3, {PartitionKey("a.b", "t", p): PartitionStatus(state, "why" if p % 2 else None) for p in assignment}
    )
    assert WorkerStatus.from_bytes(status.to_bytes()) == status


def test_op_kind_accepts_its_word_and_refuses_others() -> None:
    assert Op("set", "/a", b"x").kind is OpKind.SET
    assert Op(OpKind.DELETE, "/a") == Op("delete", "/a")
    with pytest.raises(ValueError, match="remove"):
        Op("remove", "/a")
