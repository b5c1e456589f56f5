"""The Helm chart (deploy/helm/ferry) and the plain manifests rendered from it (deploy/kubernetes):
``helm lint`` passes; the rendered manifests are what the chart renders now; every manifest
validates strictly (unknown fields are errors) against the official Kubernetes OpenAPI schemas
shipped by PyPI's ``kubernetes-validate``; the ConfigMap holds a valid Ferry config every pod uses
unchanged (each advertises its own IP through the environment, secrets come from Kubernetes
Secrets through placeholders); the pods pass Pod Security "restricted"; a config change rolls
them; the workers' grace period covers their worst-case drain; the probes use /health/ready and
/health/live; workers keep their ids across restarts (a StatefulSet's pod names).

These tests run the real ``helm`` binary (``make setup`` installs it in .dev/bin; ``HELM`` names
another): without it they fail, they are never skipped."""

from __future__ import annotations

import configparser
import copy
import functools
import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ferry.common.config import FerryConfig, load_config
from ferry.worker.copying.committer import FLUSH_TIMEOUT_S, SEGMENT_FLUSH_S
from ferry.worker.service import COMMIT_DEADLINE_S, LEAVE_WAIT_S

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "ferry"
MANIFESTS = ROOT / "deploy" / "kubernetes"
HELM = os.environ.get("HELM", str(ROOT / ".dev" / "bin" / "helm"))
# The oldest Kubernetes minor release still commonly run, and the newest the package knows.
VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())
# Kinds of the Prometheus Operator (CRDs): not in Kubernetes' own schemas.
CRD_KINDS = {"PodMonitor"}

# Every option of the chart at once: Secrets as environment variables and as files, a controller
# whose reads need a token, the PodMonitor with that token, three routes.
EVERYTHING = {
    "image": {"repository": "registry.example.com/ferry", "tag": "1.0.0"},
    "clusters": {
        "src": {
            "bootstrap.servers": "kafka-src:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "ferry",
            "sasl.password": "${env:FERRY_SRC_PASSWORD}",
            "ssl.ca.location": "/etc/ferry-secrets/kafka-ca/ca.pem",
        },
        "dst": {"bootstrap.servers": "kafka-dst:9092"},
        "backup": {"bootstrap.servers": "kafka-backup:9092"},
    },
    "routes": [
        {"source": "src", "destination": "dst", "loop_prevention": True},
        {"source": "dst", "destination": "src", "loop_prevention": True},
        {"source": "src", "destination": "backup"},
    ],
    "config": {"heartbeats": {"interval_s": 5}},
    "secretEnv": [{"name": "FERRY_SRC_PASSWORD", "secretName": "kafka-src", "key": "password"}],
    "secretFiles": [{"name": "kafka-ca", "secretName": "kafka-ca"}],
    "controller": {
        "config": {
            "auth": {
                "tokens": [{"name": "prometheus", "role": "read", "value": "${file:/etc/ferry-secrets/metrics/token}"}]
            }
        }
    },
    "monitoring": {"podMonitor": {"enabled": True, "tokenSecret": {"name": "ferry-metrics", "key": "token"}}},
}


def _helm(*args: str) -> str:
    if not (os.path.isfile(HELM) and os.access(HELM, os.X_OK)):
        pytest.fail(f"helm is not installed at {HELM}: run `make setup`", pytrace=False)
    result = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"helm {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result.stdout


@functools.cache
def _render(values_yaml: str = "") -> tuple[dict[str, Any], ...]:
    args = ["template", "ferry", str(CHART), "--kube-version", "1.30.0"]
    if values_yaml:
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"ferry-values-{abs(hash(values_yaml))}.yaml"
        path.write_text(values_yaml)
        args += ["-f", str(path)]
    return tuple(d for d in yaml.safe_load_all(_helm(*args)) if d)


def rendered(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The chart's manifests with ``values`` (the defaults when None); each call a fresh copy."""
    return copy.deepcopy(list(_render(yaml.safe_dump(values) if values else "")))


def documents() -> list[dict[str, Any]]:
    """The plain manifests of deploy/kubernetes."""
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def by_kind(kind: str, name: str, docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    docs = documents() if docs is None else docs
    return next(d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name)


def _pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in ("Deployment", "StatefulSet")]


def test_helm_lint_passes_on_the_defaults_and_on_every_option(tmp_path: Path) -> None:
    _helm("lint", "--strict", str(CHART))
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(EVERYTHING))
    _helm("lint", "--strict", str(CHART), "-f", str(tmp_path / "values.yaml"))


def test_the_plain_manifests_are_the_chart_rendered_with_its_defaults() -> None:
    # One source: deploy/kubernetes is generated (scripts/render-manifests.sh), never edited.
    script = ROOT / "scripts" / "render-manifests.sh"
    result = subprocess.run([str(script), "--check"], capture_output=True, text=True, env={**os.environ, "HELM": HELM})
    assert result.returncode == 0, result.stderr
    assert [p.name for p in MANIFESTS.glob("*.yaml")] == ["ferry.yaml"]
    assert documents() == rendered()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "every-option"])
def test_every_manifest_is_valid_kubernetes(version: str, values: dict[str, Any] | None) -> None:
    docs = rendered(values)
    kinds = {"ConfigMap", "Deployment", "StatefulSet", "Service", "PodDisruptionBudget"}
    assert {d["kind"] for d in docs} == (kinds | CRD_KINDS if values else kinds)
    for doc in docs:
        if doc["kind"] not in CRD_KINDS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field() -> None:
    broken = by_kind("StatefulSet", "ferry-worker")
    broken["spec"]["template"]["spec"]["terminationGracePeriod"] = 60
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def configmap_config(tmp_path: Path, docs: list[dict[str, Any]] | None = None) -> FerryConfig:
    (tmp_path / "ferry.yaml").write_text(by_kind("ConfigMap", "ferry-config", docs)["data"]["ferry.yaml"])
    return load_config(str(tmp_path / "ferry.yaml"))


def test_the_configmap_holds_a_valid_ferry_config_every_pod_uses_as_it_is(tmp_path: Path) -> None:
    config = configmap_config(tmp_path)
    assert config.controller.rest_host == "0.0.0.0" and config.controller.validation_interval_s == 0
    assert config.worker.metrics_host == "0.0.0.0"
    assert config.controller.advertised_url is None and config.worker.advertised_metrics_url is None
    assert [(r.source, r.destination) for r in config.routes] == [("src", "dst")]


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def test_secrets_come_from_kubernetes_secrets_through_placeholders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = rendered(EVERYTHING)
    text = by_kind("ConfigMap", "ferry-config", docs)["data"]["ferry.yaml"]
    assert "${env:FERRY_SRC_PASSWORD}" in text  # the placeholder, never a value
    for pod in _pods(docs):
        spec = pod["spec"]["template"]["spec"]
        container = spec["containers"][0]
        assert _env(container)["FERRY_SRC_PASSWORD"] == {"secretKeyRef": {"name": "kafka-src", "key": "password"}}
        mounts = {m["name"]: m for m in container["volumeMounts"]}
        assert mounts["secret-kafka-ca"] == {
            "name": "secret-kafka-ca",
            "mountPath": "/etc/ferry-secrets/kafka-ca",
            "readOnly": True,
        }
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["secret-kafka-ca"]["secret"] == {"secretName": "kafka-ca", "defaultMode": 0o400}
    # What Ferry resolves in the pod: the variable Kubernetes set from the Secret, and the file.
    monkeypatch.setenv("FERRY_SRC_PASSWORD", "s3cret")
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "token").write_text("a-read-token-0123456789\n")
    (tmp_path / "ferry.yaml").write_text(text.replace("/etc/ferry-secrets/metrics", str(secrets)))
    config = load_config(str(tmp_path / "ferry.yaml"))
    assert str(config.clusters["src"]["sasl.password"]) == "s3cret"
    assert "s3cret" not in repr(config.clusters["src"])
    assert config.heartbeats.interval_s == 5 and len(config.routes) == 3


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


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "every-option"])
def test_every_pod_passes_pod_security_restricted(values: dict[str, Any] | None) -> None:
    for pod in _pods(rendered(values)):
        spec = pod["spec"]["template"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 10001  # the image's user `ferry`
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        assert not any(key in spec for key in ("hostNetwork", "hostPID", "hostIPC"))
        assert all(set(v) & {"configMap", "emptyDir", "secret"} for v in spec["volumes"])  # no hostPath
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["readOnlyRootFilesystem"] is True
            assert "ports" not in container or all("hostPort" not in p for p in container["ports"])


def test_the_image_is_the_charts_app_version_which_is_ferrys_release() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    assert chart["appVersion"] == setup["metadata"]["version"]
    for pod in _pods(documents()):
        image = pod["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == f"ferry:{chart['appVersion']}" and not image.endswith(":latest")


def _checksums(docs: list[dict[str, Any]]) -> set[str]:
    return {pod["spec"]["template"]["metadata"]["annotations"]["checksum/config"] for pod in _pods(docs)}


def test_a_config_change_rolls_the_pods_and_nothing_else_does() -> None:
    default = _checksums(rendered())
    assert len(default) == 1  # controllers and workers run the same config
    assert _checksums(rendered({"worker": {"replicas": 5}})) == default
    assert _checksums(rendered({"controller": {"config": {"rebalance_delay_s": 60}}})) != default
    assert _checksums(rendered({"routes": [{"source": "dst", "destination": "src"}]})) != default


def test_controllers_and_workers_each_have_a_disruption_budget_and_spread_over_nodes() -> None:
    for kind, name in (("Deployment", "ferry-controller"), ("StatefulSet", "ferry-worker")):
        pod = by_kind(kind, name)
        budget = by_kind("PodDisruptionBudget", name)
        assert budget["spec"]["selector"] == pod["spec"]["selector"]
        assert budget["spec"]["maxUnavailable"] == 1
        preferred = pod["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
            "preferredDuringSchedulingIgnoredDuringExecution"
        ]
        term = preferred[0]["podAffinityTerm"]
        assert term["topologyKey"] == "kubernetes.io/hostname"
        assert term["labelSelector"]["matchLabels"] == pod["spec"]["selector"]["matchLabels"]


def test_workers_keep_their_ids_across_restarts() -> None:
    workers = by_kind("StatefulSet", "ferry-worker")
    # A StatefulSet's pods keep their names (ferry-worker-0, -1, ...) across restarts and rollouts,
    # and its governing Service exists (headless).
    service = by_kind("Service", workers["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == workers["spec"]["selector"]["matchLabels"]
    container = workers["spec"]["template"]["spec"]["containers"][0]
    # The id is the pod's name, through the downward API.
    assert _env(container)["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    args = container["args"]
    assert args[args.index("--id") + 1] == "$(POD_NAME)"


def _grace(docs: list[dict[str, Any]]) -> int:
    return int(
        by_kind("StatefulSet", "ferry-worker", docs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    )


def test_the_workers_grace_period_covers_their_worst_case_drain_for_every_route() -> None:
    # SIGTERM: per route, one after the other, the release flushes, commits within its deadline and
    # waits for the map segments, and the close may flush again; then the worker waits for the
    # leader once, and exits (10 s to close its clients and delete its nodes).
    per_route = FLUSH_TIMEOUT_S + COMMIT_DEADLINE_S + SEGMENT_FLUSH_S + FLUSH_TIMEOUT_S
    once = LEAVE_WAIT_S + 10
    assert _grace(documents()) == per_route * 1 + once
    assert _grace(rendered(EVERYTHING)) == per_route * 3 + once
    assert _grace(rendered({"worker": {"terminationGracePeriodSeconds": 600}})) == 600


def test_the_controllers_are_scraped_by_annotation_only_when_a_scrape_needs_no_token() -> None:
    def annotated(docs: list[dict[str, Any]]) -> dict[str, bool]:
        return {
            pod["metadata"]["name"]: "prometheus.io/scrape" in pod["spec"]["template"]["metadata"]["annotations"]
            for pod in _pods(docs)
        }

    assert annotated(documents()) == {"ferry-controller": True, "ferry-worker": True}
    assert annotated(rendered(EVERYTHING)) == {"ferry-controller": False, "ferry-worker": True}
    monitor = by_kind("PodMonitor", "ferry", rendered(EVERYTHING))
    endpoints = {e["port"]: e for e in monitor["spec"]["podMetricsEndpoints"]}
    assert endpoints["rest"]["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "ferry-metrics", "key": "token"},
    }
    assert "authorization" not in endpoints["metrics"]
