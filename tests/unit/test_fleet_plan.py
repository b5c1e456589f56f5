"""The fleet's pure decisions: scaling plans, the rolling order, names and the status table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.fleet import plan
from ferry.fleet.cli import format_status
from ferry.fleet.errors import FleetError
from ferry.fleet.plan import Member


@given(st.sets(st.integers(min_value=1, max_value=40), max_size=15), st.integers(min_value=0, max_value=30))
def test_scale_plan_reaches_the_target_removing_the_newest_and_reusing_free_indices(
    current: set[int], target: int
) -> None:
    decided = plan.scale_plan(current, target)
    after = (current - set(decided.remove)) | set(decided.add)
    assert len(after) == target
    assert not (decided.add and decided.remove)
    assert set(decided.remove) <= current and not (set(decided.add) & current)
    if decided.remove:  # the highest indices go, highest first
        assert list(decided.remove) == sorted(decided.remove, reverse=True)
        assert min(decided.remove) > max(current - set(decided.remove), default=0)
    if decided.add:  # the lowest unused indices come
        free = [i for i in range(1, max(after) + 1) if i not in current]
        assert list(decided.add) == free[: len(decided.add)]


def test_scale_plan_refuses_a_negative_target() -> None:
    with pytest.raises(FleetError):
        plan.scale_plan([1, 2], -1)


def test_rolling_order_is_workers_then_standbys_then_the_leader() -> None:
    members = [Member(f"c{i}", "controller", i, 9000 + i, "running") for i in (1, 2, 3)]
    members += [Member(f"w{i}", "worker", i, 9100 + i, "running") for i in (3, 1, 2)]
    order = [m.name for m in plan.rolling_order(members, leader="c2")]
    assert order == ["w1", "w2", "w3", "c1", "c3", "c2"]
    assert [m.name for m in plan.rolling_order(members, leader=None)][-3:] == ["c1", "c2", "c3"]


@pytest.mark.parametrize("name", ["", "A", "-x", "a b", "x" * 31, "a/b"])
def test_bad_fleet_names_are_refused(name: str) -> None:
    with pytest.raises(FleetError):
        plan.check_fleet_name(name)


def test_names_labels_and_command() -> None:
    name = plan.container_name("prod", "worker", 3)
    assert name == "ferry-prod-worker-3"
    labels = plan.labels("prod", "worker", 3, 9103, "/etc/ferry.yaml")
    assert labels[plan.LABEL_FLEET] == "prod" and labels[plan.LABEL_ROLE] == "worker"
    assert Member.from_labels(name, labels, "running") == Member(name, "worker", 3, 9103, "running")
    assert plan.command("worker", name, 9103)[-2:] == ["--metrics-port", "9103"]
    assert plan.command("controller", "c", 9000)[-2:] == ["--rest-port", "9000"]


def test_status_table() -> None:
    status = {
        "fleet": "prod",
        "leader": "ferry-prod-controller-1",
        "ok": True,
        "summary": {"partitions": 8, "online": 8, "offline": 0, "error": 0},
        "members": [
            {
                "name": "ferry-prod-controller-1",
                "role": "controller",
                "state": "running",
                "port": 9000,
                "health": "ok",
                "leader": "leader",
            },
            {
                "name": "ferry-prod-worker-1",
                "role": "worker",
                "state": "running",
                "port": 9100,
                "health": "RUNNING",
                "partitions": 8,
                "states": {"ONLINE": 8, "ERROR": 0, "OFFLINE": 0},
            },
        ],
    }
    lines = format_status(status).splitlines()
    assert lines[0].split() == ["NAME", "ROLE", "STATE", "PORT", "LEADER", "HEALTH", "PARTITIONS", "REPORTED"]
    assert lines[2].split() == ["ferry-prod-worker-1", "worker", "running", "9100", "-", "RUNNING", "8", "8", "ONLINE"]
    assert lines[-1] == "fleet prod: leader ferry-prod-controller-1; 8 partitions: 8 ONLINE, 0 OFFLINE, 0 ERROR"
