"""deploy/kubernetes: every manifest validates strictly (unknown fields are errors) against the
official Kubernetes OpenAPI schemas shipped by PyPI's ``kubernetes-validate``; the ConfigMap holds
a valid Ferry config every pod uses unchanged (each advertises its own IP through the environment);
the workers' grace period covers the drain; the probes use /health/ready and /health/live; workers
keep their ids across restarts (a StatefulSet's pod names)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ferry.common.config import FerryConfig, load_config

MANIFESTS = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
# The oldest Kubernetes minor release still commonly run, and the newest the package knows.
VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())


def documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in documents() if d["kind"] == kind and d["metadata"]["name"] == name)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_kubernetes(version: str) -> None:
    docs = documents()
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "StatefulSet", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field() -> None:
    broken = copy.deepcopy(by_kind("StatefulSet", "ferry-worker"))
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def configmap_config(tmp_path: Path) -> FerryConfig:
    (tmp_path / "ferry.yaml").write_text(by_kind("ConfigMap", "ferry-config")["data"]["ferry.yaml"])
    return load_config(str(tmp_path / "ferry.yaml"))


def test_the_configmap_holds_a_valid_ferry_config_every_pod_uses_as_it_is(tmp_path: Path) -> None:
    config = configmap_config(tmp_path)
    assert config.controller.rest_host == "0.0.0.0" and config.controller.validation_interval_s == 0
    assert config.worker.metrics_host == "0.0.0.0"
    assert config.controller.advertised_url is None and config.worker.advertised_metrics_url is None


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# (kind, name, the variable it advertises its URL in, the port's name)
PODS = [
    ("Deployment", "ferry-controller", "FERRY_ADVERTISED_URL", "rest"),
    ("StatefulSet", "ferry-worker", "FERRY_ADVERTISED_METRICS_URL", "metrics"),
]


@pytest.mark.parametrize(("kind", "name", "variable", "port"), PODS)
def test_each_pod_advertises_its_own_ip_without_rewriting_the_config(
    kind: str, name: str, variable: str, port: str
) -> None:
    container = by_kind(kind, name)["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    number = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    # Kubernetes expands $(POD_IP) from the variable defined before it.
    assert env[variable] == f"http://$(POD_IP):{number}"
    assert list(env).index("POD_IP") < list(env).index(variable)
    # The image's entrypoint (ferry) runs the role on the mounted file, no shell in between.
    assert "command" not in container
    assert container["args"][:3] == [name.removeprefix("ferry-"), "--config", "/etc/ferry/ferry.yaml"]


@pytest.mark.parametrize(("kind", "name", "variable", "port"), PODS)
def test_readiness_and_liveness_probe_their_own_endpoints(kind: str, name: str, variable: str, port: str) -> None:
    container = by_kind(kind, name)["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": port}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": port}
    # Liveness gives a stuck process time to show it: several failures in a row, never a single one.
    liveness = container["livenessProbe"]
    assert liveness.get("failureThreshold", 3) * liveness.get("periodSeconds", 10) >= 30


def test_a_controller_has_until_zookeeper_gives_up_to_start(tmp_path: Path) -> None:
    container = by_kind("Deployment", "ferry-controller")["spec"]["template"]["spec"]["containers"][0]
    startup = container["startupProbe"]
    assert startup["httpGet"] == {"path": "/health/live", "port": "rest"}
    # It serves HTTP once connected, and exits when ZooKeeper does not answer within
    # zookeeper.retry_deadline_s: the startup probe waits at least that long.
    assert (
        startup["failureThreshold"] * startup["periodSeconds"] >= configmap_config(tmp_path).zookeeper.retry_deadline_s
    )


def test_workers_keep_their_ids_across_restarts_and_their_grace_period_covers_the_drain() -> None:
    workers = by_kind("StatefulSet", "ferry-worker")
    # A StatefulSet's pods keep their names (ferry-worker-0, -1, ...) across restarts and rollouts,
    # and its governing Service exists (headless).
    service = by_kind("Service", workers["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == workers["spec"]["selector"]["matchLabels"]
    pod = workers["spec"]["template"]["spec"]
    container = pod["containers"][0]
    # The id is the pod's name, through the downward API.
    assert _env(container)["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    args = container["args"]
    assert args[args.index("--id") + 1] == "$(POD_NAME)"
    # The drain waits at most 10 s for the leader, after flushing and committing.
    assert pod["terminationGracePeriodSeconds"] >= 30
