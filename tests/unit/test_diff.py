from __future__ import annotations

import pytest

from ferry.common.core.diff import Mismatch, Problem, compare, external_views, summarize
from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    TopicKey,
    WorkerStatus,
)

pytestmark = pytest.mark.unit

T = TopicKey("src.dst", "orders")
ONLINE, OFFLINE, ERROR = PartitionState.ONLINE, PartitionState.OFFLINE, PartitionState.ERROR


def key(p: int, topic: TopicKey = T) -> PartitionKey:
    return PartitionKey(topic.route, topic.topic, p)


def ideal(partitions: int, **assignment: str) -> dict[TopicKey, IdealState]:
    return {T: IdealState(T.route, T.topic, partitions, {int(k[1:]): w for k, w in assignment.items()})}


def view(topic: TopicKey = T, **entries: tuple[str, str] | tuple[str, str, str]) -> dict[TopicKey, ExternalView]:
    parts: dict[int, dict[str, str]] = {}
    for name, entry in entries.items():
        parts[int(name[1:])] = {
            "worker": entry[0],
            "state": entry[1],
            **({"reason": entry[2]} if len(entry) > 2 else {}),
        }
    return {topic: ExternalView(topic.route, topic.topic, parts)}


def one(found: list[Mismatch]) -> Mismatch:
    assert len(found) == 1
    return found[0]


def test_agreement_has_no_mismatch() -> None:
    assert compare(ideal(2, p0="w1", p1="w2"), view(p0=("w1", ONLINE), p1=("w2", ONLINE)), {"w1", "w2"}) == []


def test_unassigned() -> None:
    found = one(compare(ideal(1), {}, {"w1"}))
    assert found == Mismatch(key(0), Problem.UNASSIGNED, None, None)


def test_worker_dead() -> None:
    found = one(compare(ideal(1, p0="w9"), view(p0=("w9", ONLINE)), {"w1"}))
    assert (found.problem, found.ideal_worker, found.reported_worker) == (Problem.WORKER_DEAD, "w9", "w9")


def test_missing_when_nobody_holds_it() -> None:
    assert one(compare(ideal(1, p0="w1"), {}, {"w1"})).problem == Problem.MISSING
    assert one(compare(ideal(1, p0="w1"), view(p0=("w2", OFFLINE)), {"w1", "w2"})).problem == Problem.MISSING


def test_wrong_worker() -> None:
    found = one(compare(ideal(1, p0="w1"), view(p0=("w2", ONLINE)), {"w1", "w2"}))
    assert (found.problem, found.ideal_worker, found.reported_worker) == (Problem.WRONG_WORKER, "w1", "w2")


def test_not_online() -> None:
    found = one(compare(ideal(1, p0="w1"), view(p0=("w1", OFFLINE)), {"w1"}))
    assert found.problem == Problem.NOT_ONLINE


def test_error_comes_first_and_carries_the_reason() -> None:
    found = one(compare(ideal(1, p0="w1"), view(p0=("w2", ERROR, "topic authorization failed")), {"w2"}))
    assert found == Mismatch(key(0), Problem.ERROR, "w1", "w2", "topic authorization failed")
    assert found.to_json() == {
        "partition": "src.dst/orders/0",
        "problem": "error",
        "idealWorker": "w1",
        "reportedWorker": "w2",
        "reason": "topic authorization failed",
    }


def test_to_json_omits_a_missing_reason() -> None:
    assert Mismatch(key(3), Problem.MISSING, "w1", None).to_json() == {
        "partition": "src.dst/orders/3",
        "problem": "missing",
        "idealWorker": "w1",
        "reportedWorker": None,
    }


def test_unexpected_partitions_and_topics() -> None:
    other = TopicKey("src.dst", "gone")
    external = {**view(p0=("w1", ONLINE), p5=("w1", ONLINE)), **view(other, p0=("w2", ERROR, "x"), p1=("w2", OFFLINE))}
    found = compare(ideal(1, p0="w1"), external, {"w1", "w2"})
    assert found == [
        Mismatch(key(0, other), Problem.UNEXPECTED, None, "w2", "x"),
        Mismatch(key(5), Problem.UNEXPECTED, None, "w1"),
    ]


def test_results_are_sorted_one_per_partition() -> None:
    found = compare(ideal(4, p1="w1", p2="w9", p3="w1"), view(p3=("w1", OFFLINE), p2=("w1", ONLINE)), {"w1"})
    assert [(m.partition.partition, m.problem) for m in found] == [
        (0, Problem.UNASSIGNED),
        (1, Problem.MISSING),
        (2, Problem.WORKER_DEAD),
        (3, Problem.NOT_ONLINE),
    ]


def test_external_views_prefer_holders_over_offline_reports() -> None:
    p0, p1 = key(0), key(1)
    other = PartitionKey("dst.src", "orders", 0)
    statuses = {
        "w1": WorkerStatus(3, {p0: PartitionStatus(OFFLINE), p1: PartitionStatus(ERROR, "boom")}),
        "w2": WorkerStatus(
            3, {p0: PartitionStatus(ONLINE), p1: PartitionStatus(OFFLINE), other: PartitionStatus(OFFLINE)}
        ),
    }
    views = external_views(statuses)
    assert views == {
        T: ExternalView(
            T.route,
            T.topic,
            {
                0: {"worker": "w2", "state": ONLINE},
                1: {"worker": "w1", "state": ERROR, "reason": "boom"},
            },
        ),
        TopicKey("dst.src", "orders"): ExternalView("dst.src", "orders", {0: {"worker": "w2", "state": OFFLINE}}),
    }
    assert ExternalView.from_bytes(views[T].to_bytes()) == views[T]


def test_external_views_of_no_workers() -> None:
    assert external_views({}) == {}
    assert external_views({"w1": WorkerStatus(0)}) == {}


def test_summarize_counts_only_online_on_the_ideal_worker() -> None:
    external = view(p0=("w1", ONLINE), p1=("w2", ONLINE), p2=("w1", ERROR, "x"), p3=("w1", OFFLINE))
    counts = summarize(ideal(5, p0="w1", p1="w1", p2="w1", p3="w1"), external)
    assert counts == {"partitions": 5, "online": 1, "offline": 3, "error": 1, "paused": 0}
