"""``ferry validate`` on real Spark (local mode) against the local stack.

Each test writes its own state into its chrooted ZooKeeper with :mod:`common.model` classes and
creates its own topics, then validates: problems must be found exactly, a consistent state clean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from ferry import cli
from ferry.common.config import FerryConfig, parse_config
from ferry.common.core.diff import Problem
from ferry.common.model import ExternalView, IdealState, PartitionState, WorkerInfo
from ferry.common.zk.layout import ZkLayout
from ferry.pipeline import validate
from ferry.pipeline.spark import get_session
from ferry.pipeline.validate import TopicProblem, run_validation, store_result

ROUTE = "src.dst"
LAYOUT = ZkLayout("/")  # the zk fixture is chrooted, so the config's root is "/"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # One JVM for the module; left running because the audit tests in the same process reuse it
    # (getOrCreate), and a JVM restart costs several seconds. It ends with the test process.
    yield get_session("local[2]", app_name="ferry-tests")


def _config_data(zk_chroot: str, cluster_conf: Callable[[str], dict[str, str]]) -> dict[str, Any]:
    return {
        "zookeeper": {"connect": zk_chroot, "root": "/", "retry_deadline_s": 15},
        "clusters": {"src": cluster_conf("src"), "dst": cluster_conf("dst")},
        "routes": [{"source": "src", "destination": "dst"}],
    }


@pytest.fixture
def config(zk_chroot: str, cluster_conf: Callable[[str], dict[str, str]]) -> FerryConfig:
    return parse_config(_config_data(zk_chroot, cluster_conf))


@pytest.fixture
def config_file(tmp_path: Path, zk_chroot: str, cluster_conf: Callable[[str], dict[str, str]]) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(_config_data(zk_chroot, cluster_conf)))
    return path


def write_state(zk: KazooClient, ideal: list[IdealState], views: list[ExternalView], live: list[str]) -> None:
    for worker in live:
        zk.create(LAYOUT.live_worker(worker), WorkerInfo(worker, "localhost", 1).to_bytes(), makepath=True)
    for state in ideal:
        zk.create(LAYOUT.topic(state.route, state.topic), state.to_bytes(), makepath=True)
    for view in views:
        zk.create(LAYOUT.external_topic(view.route, view.topic), view.to_bytes(), makepath=True)


def online(topic: str, partitions: int, worker: str = "w1") -> tuple[IdealState, ExternalView]:
    """A topic every partition of which is ONLINE on its ideal worker."""
    return (
        IdealState(ROUTE, topic, partitions, dict.fromkeys(range(partitions), worker)),
        ExternalView(ROUTE, topic, {p: {"worker": worker, "state": PartitionState.ONLINE} for p in range(partitions)}),
    )


def problems_of(result: dict[str, Any]) -> set[tuple[str, int | None, str]]:
    return {(p["topic"], p["partition"], p["problem"]) for p in result["problems"]}


def test_a_consistent_state_is_clean(
    spark: Any,
    zk: KazooClient,
    config: FerryConfig,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
) -> None:
    topic = topic_name("clean")
    create_topic("src", topic, 3)
    create_topic("dst", topic, 3)
    ideal, view = online(topic, 3)
    view.partitions[2] = {"worker": "w1", "state": PartitionState.PAUSED}  # an operator's pause is no problem
    write_state(zk, [ideal], [view], ["w1", "w2"])

    result = run_validation(config, spark=spark)

    assert result["ok"] is True, result["problems"]
    assert result["problems"] == [] and result["srcKafka"] == []
    assert result["counts"]["partitions"] == 3 and result["counts"]["online"] == 3
    assert result["counts"]["liveWorkers"] == 2


def test_partition_problems_are_each_found(
    spark: Any,
    zk: KazooClient,
    config: FerryConfig,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
) -> None:
    topic = topic_name("broken")
    create_topic("src", topic, 6)
    create_topic("dst", topic, 6)
    ideal = IdealState(ROUTE, topic, 6, {0: "w1", 1: "w1", 2: "gone", 4: "w1", 5: "w1"})  # 3: unassigned
    view = ExternalView(
        ROUTE,
        topic,
        {
            0: {"worker": "w1", "state": PartitionState.ONLINE},
            1: {"worker": "w1", "state": PartitionState.ERROR, "reason": "MSG_SIZE_TOO_LARGE"},
            2: {"worker": "gone", "state": PartitionState.ONLINE},
            4: {"worker": "w2", "state": PartitionState.ONLINE},
            5: {"worker": "w1", "state": PartitionState.OFFLINE},
        },
    )
    write_state(zk, [ideal], [view], ["w1", "w2"])

    result = run_validation(config, spark=spark)

    assert result["ok"] is False
    assert problems_of(result) == {
        (topic, 1, Problem.ERROR),
        (topic, 2, Problem.WORKER_DEAD),
        (topic, 3, Problem.UNASSIGNED),
        (topic, 4, Problem.WRONG_WORKER),
        (topic, 5, Problem.NOT_ONLINE),
    }
    error = next(p for p in result["problems"] if p["problem"] == Problem.ERROR)
    assert "MSG_SIZE_TOO_LARGE" in error["detail"] and error["route"] == ROUTE
    counts = result["counts"]
    assert (counts["partitions"], counts["online"], counts["problems"]) == (6, 1, 5)
    assert counts[Problem.UNASSIGNED] == counts[Problem.WORKER_DEAD] == counts[Problem.ERROR] == 1
    # Sorted by partition within the topic.
    assert [p["partition"] for p in result["problems"]] == [1, 2, 3, 4, 5]


def test_partition_count_mismatches_between_source_destination_and_ideal_state(
    spark: Any,
    zk: KazooClient,
    config: FerryConfig,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
) -> None:
    shrunk_dst, grown_src, absent = topic_name("dst-fewer"), topic_name("src-more"), topic_name("absent")
    create_topic("src", shrunk_dst, 2)
    create_topic("dst", shrunk_dst, 1)
    create_topic("src", grown_src, 3)  # the source grew to 3; the ideal state still says 2
    create_topic("dst", grown_src, 3)
    states = [online(shrunk_dst, 2), online(grown_src, 2), online(absent, 1)]  # absent: on neither cluster
    write_state(zk, [i for i, _ in states], [v for _, v in states], ["w1"])

    result = run_validation(config, spark=spark)

    assert result["ok"] is False
    assert problems_of(result) == {
        (shrunk_dst, None, TopicProblem.DESTINATION_PARTITIONS),
        (grown_src, None, TopicProblem.SOURCE_PARTITIONS),
        (absent, None, TopicProblem.SOURCE_TOPIC_MISSING),
        (absent, None, TopicProblem.DESTINATION_TOPIC_MISSING),
    }
    assert sorted(result["srcKafka"], key=lambda r: r["topic"]) == sorted(
        [
            {"route": ROUTE, "topic": grown_src, "sourcePartitions": 3, "idealPartitions": 2},
            {"route": ROUTE, "topic": absent, "sourcePartitions": None, "idealPartitions": 1},
        ],
        key=lambda r: r["topic"],
    )
    detail = next(p["detail"] for p in result["problems"] if p["topic"] == shrunk_dst)
    assert "destination has 1" in detail and "source 2" in detail


def test_store_creates_then_replaces_the_validation_node(
    spark: Any,
    zk: KazooClient,
    config: FerryConfig,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
) -> None:
    topic = topic_name("stored")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    ideal, view = online(topic, 1)
    write_state(zk, [ideal], [view], [])  # w1 is not live: worker_dead

    first = store_result(config, run_validation(config, spark=spark), now=1000)
    stored = json.loads(zk.get(LAYOUT.validation)[0])
    assert stored == first and stored["checkedAt"] == 1000 and stored["ok"] is False

    zk.create(LAYOUT.live_worker("w1"), b"{}", makepath=True)
    store_result(config, run_validation(config, spark=spark), now=2000)
    stored = json.loads(zk.get(LAYOUT.validation)[0])
    assert stored["checkedAt"] == 2000 and stored["ok"] is True


def test_store_keeps_a_large_result_under_the_node_limit(
    zk: KazooClient,
    config: FerryConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(validate, "MAX_STORED_BYTES", 2_000)
    problems = [
        {"route": ROUTE, "topic": "t", "partition": p, "problem": Problem.UNASSIGNED, "detail": "no worker"}
        for p in range(100)
    ]
    store_result(config, {"ok": False, "problems": problems, "counts": {}, "srcKafka": []}, now=1)
    data = zk.get(LAYOUT.validation)[0]
    stored = json.loads(data)
    assert len(data) <= 2_000 and stored["problemsTruncated"] == 100
    assert 0 < len(stored["problems"]) < 100 and stored["problems"] == problems[: len(stored["problems"])]


def test_cli_exit_status_and_json(
    spark: Any,
    zk: KazooClient,
    config_file: Path,
    topic_name: Callable[[str], str],
    create_topic: Callable[..., None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic = topic_name("cli")
    create_topic("src", topic, 2)
    create_topic("dst", topic, 2)
    ideal, view = online(topic, 2)
    write_state(zk, [ideal], [view], ["w1"])

    # In-process first (reuses this module's JVM): consistent -> 0, table printed.
    assert cli.main(["validate", "--config", str(config_file)]) == 0
    assert "consistent" in capsys.readouterr().out

    # Then a real `ferry validate` process on a broken state: exit 1 and the JSON contract.
    zk.delete(LAYOUT.live_worker("w1"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "validate", "--config", str(config_file), "--json", "--master", "local[1]"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] is False
    assert {(p["partition"], p["problem"]) for p in result["problems"]} == {
        (0, Problem.WORKER_DEAD),
        (1, Problem.WORKER_DEAD),
    }
    assert set(result) == {"ok", "problems", "counts", "srcKafka"}
    assert all(set(p) == {"route", "topic", "partition", "problem", "detail"} for p in result["problems"])
