"""The monitoring kit (deploy/monitoring) against a real Prometheus (Debian's package) scraping a
running fleet: the config and alert rules load (promtool), the rules' own unit tests pass, and
every PromQL expression of the Grafana dashboard returns data (the fleet has heartbeats, a
checkpointed consumer group and schema distribution, so that every panel has something to show)."""

from __future__ import annotations

import json
import shutil
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
from tests.harness.processes import wait_until

KIT = Path(__file__).resolve().parents[2] / "deploy" / "monitoring"


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


def test_promtool_accepts_the_config_and_rules_and_the_rules_tests_pass() -> None:
    promtool = _tool("promtool")
    for args in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ):
        result = subprocess.run([promtool, *args], cwd=KIT, capture_output=True, text=True)
        assert result.returncode == 0, f"promtool {' '.join(args)}:\n{result.stdout}{result.stderr}"


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Starts Prometheus on the kit's config (scraping every second) once the targets are written."""
    binary = _tool("prometheus")
    config = yaml.safe_load((KIT / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    shutil.copy(KIT / "alerts.yml", tmp_path / "alerts.yml")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    procs: list[Spawned] = []

    def start() -> str:
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
    prometheus: Callable[[], str],
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

        assert {r["name"] for r in rules()} == {
            "FerryWorkerDown",
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
        }
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
