"""deploy/kubernetes: every manifest validates strictly (unknown fields are errors) against the
official Kubernetes OpenAPI schemas shipped by PyPI's ``kubernetes-validate``; the ConfigMap holds
a valid Ferry config every pod uses unchanged (each advertises its own IP through the environment);
the workers' grace period covers the drain; the probes use /health."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ferry.common.config import load_config

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
    assert {d["kind"] for d in docs} == {"ConfigMap", "Deployment", "Service"}
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field() -> None:
    broken = copy.deepcopy(by_kind("Deployment", "ferry-worker"))
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def test_the_configmap_holds_a_valid_ferry_config_every_pod_uses_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "ferry.yaml").write_text(by_kind("ConfigMap", "ferry-config")["data"]["ferry.yaml"])
    config = load_config(str(tmp_path / "ferry.yaml"))
    assert config.controller.rest_host == "0.0.0.0" and config.controller.validation_interval_s == 0
    assert config.worker.metrics_host == "0.0.0.0"
    assert config.controller.advertised_url is None and config.worker.advertised_metrics_url is None


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize(
    ("name", "variable", "port"),
    [("ferry-controller", "FERRY_ADVERTISED_URL", "rest"), ("ferry-worker", "FERRY_ADVERTISED_METRICS_URL", "metrics")],
)
def test_each_pod_advertises_its_own_ip_without_rewriting_the_config(name: str, variable: str, port: str) -> None:
    container = by_kind("Deployment", name)["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    number = next(p["containerPort"] for p in container["ports"] if p["name"] == port)
    # Kubernetes expands $(POD_IP) from the variable defined before it.
    assert env[variable] == f"http://$(POD_IP):{number}"
    assert list(env).index("POD_IP") < list(env).index(variable)
    # The image's entrypoint (ferry) runs the role on the mounted file, no shell in between.
    assert "command" not in container
    assert container["args"][:3] == [name.removeprefix("ferry-"), "--config", "/etc/ferry/ferry.yaml"]


def test_probes_use_health_and_the_workers_grace_period_covers_the_drain() -> None:
    for name, port in (("ferry-controller", "rest"), ("ferry-worker", "metrics")):
        pod = by_kind("Deployment", name)["spec"]["template"]["spec"]
        container = pod["containers"][0]
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": "/health", "port": port}
    # The drain waits at most 10 s for the leader, after flushing and committing.
    assert by_kind("Deployment", "ferry-worker")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 30
