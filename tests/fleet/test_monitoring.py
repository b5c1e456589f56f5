"""The monitoring kit (deploy/monitoring) against a real Prometheus (Debian's package) scraping a
running fleet: the config and alert rules load (promtool), the rules' own unit tests pass, and
every PromQL expression of the Grafana dashboard returns data (the fleet has heartbeats, a
checkpointed consumer group and schema distribution, so that every panel has something to show).
The kit's config scrapes a controller whose reads need a token (controller.auth) with the token
file it names, and, with its authorization block deleted, a fleet without controller.auth. The
running Prometheus calls its scrape jobs otherwise than the kit (as a Kubernetes scrape does): the
rules and the dashboard hold without Ferry's job names."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from ferry.devstack import stack as devstack
from ferry.devstack.support import Spawned, commit_offset, free_port, spawn, stop_all
from ferry.fleet.manager import FleetManager
from tests.harness.fleet_cli import ferry, mirror
from tests.harness.processes import Fleet, wait_until

KIT = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"
TOKEN = "prometheus-read-token-0123456789abcdef"
# The kit's job names -> those of the running Prometheus, which no rule or panel may rely on.
JOB_NAMES = {"ferry-controller": "pods-rest", "ferry-worker": "pods-metrics"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not installed (Debian's prometheus package; `make setup` installs it as root)", pytrace=False
        )
    return path


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((KIT / "grafana-dashboard.json").read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]


def alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((KIT / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _expr(alert: str) -> str:
    return str(next(rule["expr"] for rule in alert_rules() if rule["alert"] == alert))


def kit_config(directory: Path, token: str | None) -> dict[str, Any]:
    """The kit's prometheus.yml and alerts.yml in ``directory``, as an operator sets them up: with
    ``token`` in the file the controller job's credentials_file names (relative to the config),
    or, for controllers without controller.auth (token None), with that authorization block deleted."""
    config: dict[str, Any] = yaml.safe_load((KIT / "prometheus.yml").read_text())
    controller_job = next(job for job in config["scrape_configs"] if job["job_name"] == "ferry-controller")
    if token is None:
        del controller_job["authorization"]
    else:
        token_file = directory / controller_job["authorization"]["credentials_file"]
        token_file.parent.mkdir(parents=True, exist_ok=True)
        token_file.write_text(token + "\n")
    shutil.copy(KIT / "alerts.yml", directory / "alerts.yml")
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    return config


def _promtool(promtool: str, args: list[str], cwd: Path) -> None:
    result = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


def test_promtool_accepts_the_config_and_rules_and_the_rules_tests_pass(tmp_path: Path) -> None:
    promtool = _tool("promtool")
    for variant, token in (("with-token", TOKEN), ("without-token", None)):
        (tmp_path / variant).mkdir()
        kit_config(tmp_path / variant, token)
        _promtool(promtool, ["check", "config", "prometheus.yml"], tmp_path / variant)
    _promtool(promtool, ["check", "rules", "alerts.yml"], KIT)
    _promtool(promtool, ["test", "rules", "alerts_test.yml"], KIT)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[..., str]]:
    """``start(token=None)`` starts Prometheus on the kit's config (:func:`kit_config`, scraping
    every second) in tmp_path, once the targets are written to tmp_path/targets."""
    binary = _tool("prometheus")
    procs: list[Spawned] = []

    def start(token: str | None = None) -> str:
        config = kit_config(tmp_path, token)
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        for job in config["scrape_configs"]:
            job["job_name"] = JOB_NAMES[job["job_name"]]
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        procs.append(
            spawn(
                "prometheus",
                [
                    binary,
                    f"--config.file={tmp_path / 'prometheus.yml'}",
                    f"--storage.tsdb.path={tmp_path / 'data'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                tmp_path / "prometheus.log",
            )
        )
        return f"http://127.0.0.1:{port}"

    yield start
    stop_all(procs, timeout=30)


def _query(url: str, expr: str) -> list[Any]:
    body = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=5).json()
    assert body["status"] == "success", (expr, body)
    result: list[Any] = body["data"]["result"]
    return result


def test_prometheus_scrapes_a_fleet_loads_every_rule_and_every_dashboard_query_returns_data(
    engine_url: str,
    ferry_image: str,
    make_fleet: Callable[[str], FleetManager],
    fleet_config: Callable[..., Path],
    registry_stack: devstack.Stack,
    topic_name: Callable[[str], str],
    prometheus: Callable[..., str],
    tmp_path: Path,
) -> None:
    topic = topic_name("mon")
    group = f"app-{topic[-8:]}"
    # No subject of the shared registries matches: the distribution runs and reports, and copies nothing.
    schemas = {
        "primary": "src",
        "include": [f"{topic}-none"],
        "interval_s": 1,
        "registries": {c: {"url": registry_stack.registry_url(c)} for c in ("src", "dst")},
    }
    config = fleet_config(
        "mon",
        route={"groups": [group]},
        sections={"heartbeats": {"interval_s": 1}, "schemas": schemas},
        lag_interval_s=1,
        checkpoint_interval_s=1,
        observer_interval_s=1,
    )  # the heartbeat topic at once
    fleet = make_fleet("mon")
    fleet.up(config, controllers=1, workers=2, image=ferry_image)
    assert ferry(engine_url, "targets", "--name", fleet.name, "--dir", str(tmp_path / "targets")) == 0
    url = prometheus()
    ledger = mirror(fleet, registry_stack, topic, 4)
    commit_offset(ledger.src, group, topic, 0)
    ledger.produce_steadily(rate_per_s=500)
    try:

        def all_up() -> bool:
            targets = requests.get(f"{url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            return len(targets) == 3 and all(t["health"] == "up" for t in targets)

        wait_until(all_up, 60, "Prometheus to scrape the fleet's 3 targets")

        def rules() -> list[dict[str, Any]]:
            groups = requests.get(f"{url}/api/v1/rules", timeout=5).json()["data"]["groups"]
            return [r for g in groups for r in g["rules"]]

        assert {
            "FerryWorkerDown",
            "FerryControllerDown",
            "FerryNoLeader",
            "FerryPartitionsInError",
            "FerryLagHigh",
            "FerryNoProgress",
            "FerryIdealNotExternal",
            "FerryHeartbeatStale",
            "FerryCheckpointStale",
            "FerryRecordAgeHigh",
            "FerrySchemaConflicts",
            "FerryRecordsLost",
            "FerryLeaderJobFailing",
            "FerryLeaderJobSkipped",
            "FerryAclSyncFailing",
            "FerryWorkerZooKeeperUnreachable",
            "FerryWriterFenced",
        } <= {r["name"] for r in rules()}
        assert {r["name"] for r in rules()} == {rule["alert"] for rule in alert_rules()}
        # Every rule evaluated against the fleet's series without an error (e.g. a bad vector match).
        wait_until(lambda: all(r["health"] == "ok" for r in rules()), 30, "every rule to evaluate cleanly")
        expressions = dashboard_expressions()
        assert len(expressions) >= 10
        for expr in expressions:
            wait_until(lambda expr=expr: _query(url, expr), 60, f"data for {expr}")
    finally:
        ledger.stop_producing()
    # A healthy fleet: none of the rules fires.
    firing = [
        a for a in requests.get(f"{url}/api/v1/alerts", timeout=5).json()["data"]["alerts"] if a["state"] == "firing"
    ]
    assert firing == []


def test_prometheus_scrapes_a_controller_whose_reads_need_a_token_with_the_kits_config(
    local_stack: devstack.Stack, zk_chroot: str, prometheus: Callable[..., str], tmp_path: Path
) -> None:
    auth = {"tokens": [{"name": "prometheus", "role": "read", "value": TOKEN}]}  # open_reads: false
    (tmp_path / "fleet").mkdir()
    fleet = Fleet(
        stack=local_stack,
        zk_root="/" + zk_chroot.split("/", 1)[1],
        workdir=tmp_path / "fleet",
        extra={"controller": {"auth": auth}},
    )
    try:
        controller = fleet.start_controller("c1")
        worker = fleet.start_worker("w1")
        fleet.wait_for_leader(controller)
        # Without the token, the scrape is refused.
        assert requests.get(f"{controller.url}/metrics", timeout=5).status_code == 401
        (tmp_path / "targets").mkdir()
        for file, process in (("ferry-controllers.json", controller), ("ferry-workers.json", worker)):
            target = [{"targets": [f"127.0.0.1:{process.port}"], "labels": {"member": process.name}}]
            (tmp_path / "targets" / file).write_text(json.dumps(target))
        url = prometheus(TOKEN)

        def health() -> dict[str, str]:
            targets = requests.get(f"{url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
            return {t["labels"]["job"]: t["health"] for t in targets}

        wait_until(lambda: health() == {"pods-rest": "up", "pods-metrics": "up"}, 60, "both targets up")
        leaders = _query(url, "sum(ferry_controller_leader)")
        assert [float(r["value"][1]) for r in leaders] == [1.0]  # FerryNoLeader's expression is false
        assert _query(url, _expr("FerryWorkerDown")) == []
        # The worker stops: FerryWorkerDown's expression (its `for` aside) names it, though its job
        # is not called ferry-worker, and names nothing else.
        worker.signal(signal.SIGKILL)
        worker.wait(30)

        def down() -> list[dict[str, str]]:
            return [r["metric"] for r in _query(url, _expr("FerryWorkerDown"))]

        found = wait_until(down, 60, "FerryWorkerDown's expression to name the stopped worker")
        assert [(m["job"], m["instance"]) for m in found] == [("pods-metrics", f"127.0.0.1:{worker.port}")]
    finally:
        fleet.stop_all()
