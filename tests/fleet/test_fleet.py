"""``ferry fleet`` on a real Docker engine: up / mirror / down, scaling and a rolling restart while
records flow (nothing lost, nothing duplicated), two fleets side by side, and bad input."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from kazoo.client import KazooClient

from ferry.common.zk.layout import ZkLayout
from ferry.devstack import stack as devstack
from ferry.fleet import plan
from ferry.fleet.manager import FleetManager
from tests.harness.fleet_cli import ferry, mirror
from tests.harness.processes import wait_until

MakeFleet = Callable[[str], FleetManager]


def labelled(client: Any, fleet: str) -> tuple[list[Any], list[Any]]:
    selector = {"label": f"{plan.LABEL_FLEET}={fleet}"}
    return client.containers.list(all=True, filters=selector), client.networks.list(filters=selector)


def test_up_mirrors_100k_records_and_down_leaves_nothing_while_another_fleet_runs(
    engine_url: str,
    ferry_image: str,
    docker_client: Any,
    make_fleet: MakeFleet,
    fleet_config: Callable[..., Path],
    local_stack: devstack.Stack,
    topic_name: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = make_fleet("a"), make_fleet("b")
    assert (
        ferry(
            engine_url,
            "up",
            "--name",
            a.name,
            "--config",
            str(fleet_config("a")),
            "--controllers",
            "2",
            "--workers",
            "3",
            "--image",
            ferry_image,
        )
        == 0
    )
    assert (
        ferry(
            engine_url,
            "up",
            "--name",
            b.name,
            "--config",
            str(fleet_config("b")),
            "--controllers",
            "1",
            "--workers",
            "1",
            "--image",
            ferry_image,
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"fleet {a.name}: leader ferry-{a.name}-controller-" in out and f"fleet {b.name}: leader" in out

    # Every container carries the fleet's labels; each fleet sees only its own.
    containers, _ = labelled(docker_client, a.name)
    assert sorted(c.labels[plan.LABEL_ROLE] for c in containers) == ["controller"] * 2 + ["worker"] * 3
    assert {m.name for m in b.members()} == {f"ferry-{b.name}-controller-1", f"ferry-{b.name}-worker-1"}

    ledger = mirror(a, local_stack, topic_name("fleet"), 8)
    ledger.produce(100_000)
    ledger.wait_for_destination(timeout=240)
    assert ledger.check(allow_duplicates=False)["records"] == 100_000

    status = a.status()
    assert status["leader"] and status["ok"] and status["summary"]["online"] == 8
    assert sum(m.get("partitions") or 0 for m in status["members"]) == 8
    assert ferry(engine_url, "status", "--name", a.name) == 0
    table = capsys.readouterr().out
    assert "RUNNING" in table and "8 partitions: 8 ONLINE" in table

    assert ferry(engine_url, "down", "--name", a.name) == 0
    assert labelled(docker_client, a.name) == ([], [])
    # The other fleet was not touched.
    assert all(m.state == "running" for m in b.members()) and b.leader() is not None
    assert ferry(engine_url, "down", "--name", b.name) == 0
    assert labelled(docker_client, b.name) == ([], [])


def test_bad_input_is_one_line_and_exit_status_2(
    engine_url: str,
    ferry_image: str,
    docker_client: Any,
    make_fleet: MakeFleet,
    fleet_config: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    name = make_fleet("none").name
    config = str(fleet_config("none"))
    cases = [
        (["status", "--name", name], "no fleet named"),
        (["scale", "--name", name, "--workers", "2"], "no fleet named"),
        (["down", "--name", name], "no fleet named"),
        (["logs", f"ferry-{name}-worker-1"], "no container of a Ferry fleet"),
        (["up", "--name", name, "--config", config, "--image", "ferry:no-such-image"], "is not on the engine"),
        (["up", "--name", name, "--config", str(tmp_path / "missing.yaml"), "--image", ferry_image], "missing.yaml"),
        (["up", "--name", "Not A Name", "--config", config, "--image", ferry_image], "is invalid"),
    ]
    for args, message in cases:
        assert ferry(engine_url, *args) == 2, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, (args, err)
    assert ferry("unix:///tmp/ferry-no-engine.sock", "status", "--name", name) == 2
    assert "does not answer" in capsys.readouterr().err
    spark = str(fleet_config("spark", validation_interval_s=60))
    assert ferry(engine_url, "up", "--name", name, "--config", spark, "--image", ferry_image) == 2
    assert "validation_interval_s" in capsys.readouterr().err
    assert labelled(docker_client, name) == ([], [])


def test_scale_to_5_then_2_workers_while_records_flow_loses_and_duplicates_nothing(
    engine_url: str,
    ferry_image: str,
    make_fleet: MakeFleet,
    fleet_config: Callable[..., Path],
    local_stack: devstack.Stack,
    topic_name: Callable[[str], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet = make_fleet("scale")
    fleet.up(fleet_config("scale"), controllers=1, workers=3, image=ferry_image)
    ledger = mirror(fleet, local_stack, topic_name("scale"), 8)
    ledger.produce_steadily(rate_per_s=2000)
    try:
        ledger.wait_for_destination(timeout=60, at_least=2000)
        assert ferry(engine_url, "scale", "--name", fleet.name, "--workers", "5") == 0
        workers = [m for m in fleet.status()["members"] if m["role"] == "worker"]
        assert len(workers) == 5 and all(m["partitions"] >= 1 for m in workers), workers
        at = ledger.produced
        ledger.wait_for_destination(timeout=60, at_least=at)
        capsys.readouterr()
        assert ferry(engine_url, "scale", "--name", fleet.name, "--workers", "2") == 0
        said = capsys.readouterr().err
        for index in (3, 4, 5):  # each removed worker drained (holding nothing) before it was stopped
            name = f"ferry-{fleet.name}-worker-{index}"
            assert f"drained {name}\n" in said and f"stopped {name} (exit status 0)" in said, said
            assert said.index(f"drained {name}\n") < said.index(f"stopped {name} ("), said
    finally:
        ledger.stop_producing()
    assert {m.name for m in fleet.members() if m.role == "worker"} == {
        f"ferry-{fleet.name}-worker-1",
        f"ferry-{fleet.name}-worker-2",
    }
    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    assert result["duplicates"] == 0 and result["records"] == ledger.produced


class LeadershipProbe:
    """Samples, until stopped, the ZooKeeper election (its contenders: the first holds the lead)
    and the controllers' REST ``/health`` (who says it leads), to see whether a controller leads
    at every moment."""

    def __init__(self, fleet: FleetManager, zk_address: str, root: str) -> None:
        self.fleet = fleet
        self.election = ZkLayout(root).election
        self.zk = KazooClient(hosts=zk_address)
        self.zk.start(timeout=15)
        self.election_sizes: list[int] = []
        self.rest: list[tuple[float, str | None]] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._zk_loop, daemon=True),
            threading.Thread(target=self._rest_loop, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _zk_loop(self) -> None:
        while not self._stop.wait(0.02):
            self.election_sizes.append(len(self.zk.get_children(self.election)))

    def _rest_loop(self) -> None:
        members = [m for m in self.fleet.members() if m.role == "controller"]
        while not self._stop.wait(0.05):
            leader = None
            for member in members:
                try:
                    if requests.get(f"{self.fleet.url(member)}/health", timeout=5).json().get("leader"):
                        leader = member.name
                except (requests.RequestException, ValueError):
                    continue
            self.rest.append((time.monotonic(), leader))

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)
        self.zk.stop()
        self.zk.close()

    def leaderless_gaps(self) -> list[float]:
        """Lengths of the REST-level stretches in which no controller said it leads."""
        gaps, since = [], None
        for at, leader in self.rest:
            if leader is None and since is None:
                since = at
            elif leader is not None and since is not None:
                gaps.append(at - since)
                since = None
        if since is not None:
            gaps.append(float("inf"))
        return gaps


def test_rolling_restart_while_records_flow_keeps_a_leader_and_loses_and_duplicates_nothing(
    ferry_image: str,
    make_fleet: MakeFleet,
    fleet_config: Callable[..., Path],
    local_stack: devstack.Stack,
    zk_chroot: str,
    topic_name: Callable[[str], str],
) -> None:
    fleet = make_fleet("roll")
    fleet.up(fleet_config("roll"), controllers=2, workers=2, image=ferry_image)
    ledger = mirror(fleet, local_stack, topic_name("roll"), 8)
    first_leader = fleet.leader()
    assert first_leader is not None
    probe = LeadershipProbe(fleet, local_stack.zookeeper.address, "/" + zk_chroot.split("/", 1)[1] + "/roll")
    ledger.produce_steadily(rate_per_s=2000)
    try:
        ledger.wait_for_destination(timeout=60, at_least=2000)
        order = fleet.restart_rolling()
    finally:
        ledger.stop_producing()
        probe.stop()
    # Workers first, the leader last: the lead moves exactly once.
    assert [n.rsplit("-", 2)[1] for n in order] == ["worker", "worker", "controller", "controller"]
    assert order[-1] == first_leader.name
    # ZooKeeper: the election always had a contender, so the lead passed straight to the next in line.
    assert probe.election_sizes and min(probe.election_sizes) >= 1
    # REST: no controller said it leads only while the lead passed (once), never for good.
    gaps = probe.leaderless_gaps()
    print(
        f"election samples {len(probe.election_sizes)}, min contenders {min(probe.election_sizes)}; "
        f"REST samples {len(probe.rest)}, leaderless stretches {[f'{g:.2f}s' for g in gaps]}"
    )
    assert len(gaps) <= 1 and all(g != float("inf") for g in gaps)
    assert fleet.leader() is not None

    ledger.wait_for_destination(timeout=120)
    result = ledger.check(allow_duplicates=False)
    assert result["duplicates"] == 0 and result["records"] == ledger.produced
    wait_until(lambda: fleet.status()["ok"], 30, "every partition ONLINE")
