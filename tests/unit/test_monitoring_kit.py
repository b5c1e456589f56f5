"""The monitoring kit (deploy/monitoring) read as files: every alert says what it means and where
its runbook section is, every section exists, no rule names a scrape job, and the controller's
scrape sends a token. The series the alerts use are exported as the rules expect: those that leave
an operator's choices out, and the counters whose first increase an alert must see (at 0 before).
promtool's own checks and the rules' tests run in tests/fleet/test_monitoring.py."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import yaml
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, JobExecutionEvent
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ferry.common.model import PartitionKey
from ferry.common.zk.layout import ZkLayout
from ferry.controller.jobs.acl_sync import AclSyncJob
from ferry.controller.lead.store import Store
from ferry.controller.metrics import ControllerMetrics
from ferry.worker.metrics import WorkerMetrics
from tests.unit.test_acl_sync_job import FakeAdmin, FakeZk, _acl, _config
from tests.unit.test_acl_sync_job import admins as admins  # the fake AdminClients (a fixture)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "deploy" / "monitoring"
RUNBOOK = ROOT / "docs" / "runbook.md"


def _rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((KIT / "alerts.yml").read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+\s+(.+?)\s*$", markdown, re.MULTILINE):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return anchors


def test_every_alert_has_a_summary_a_description_and_a_runbook_section_that_exists() -> None:
    anchors = _anchors(RUNBOOK.read_text())
    rules = _rules()
    assert len(rules) >= 12
    for rule in rules:
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            assert annotations.get(key, "").strip(), f"{rule['alert']} has no {key}"
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == "docs/runbook.md", rule["alert"]
        assert anchor == rule["alert"].lower(), f"{rule['alert']}: its section is named after it"
        assert anchor in anchors, f"{rule['alert']}: docs/runbook.md has no section #{anchor}"


def test_no_rule_names_a_scrape_job() -> None:
    # A Kubernetes scrape (pod annotations, a ServiceMonitor) names its jobs itself.
    for rule in _rules():
        assert not re.search(r"job\s*=~?\s*\"", rule["expr"]), rule["alert"]


def test_every_alert_is_exercised_by_the_rules_tests() -> None:
    tests = yaml.safe_load((KIT / "alerts_test.yml").read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test.get("alert_rule_test", [])}
    assert {rule["alert"] for rule in _rules()} <= tested


def test_the_controller_scrape_sends_a_bearer_token_from_a_file_and_the_worker_scrape_none() -> None:
    jobs = {job["job_name"]: job for job in yaml.safe_load((KIT / "prometheus.yml").read_text())["scrape_configs"]}
    assert jobs["ferry-controller"]["authorization"] == {
        "type": "Bearer",
        "credentials_file": "secrets/ferry-metrics-token",
    }
    assert "authorization" not in jobs["ferry-worker"]  # a worker's metrics port takes no token


def _samples(metrics: ControllerMetrics, name: str) -> dict[tuple[str, str, str], float]:
    families = text_string_to_metric_families(generate_latest(metrics.registry).decode())
    family = next(f for f in families if f.name == name)
    return {(s.labels["route"], s.labels["topic"], s.labels["partition"]): s.value for s in family.samples}


def _metrics() -> ControllerMetrics:
    store = SimpleNamespace(reads=0, writes=0, transactions=0, max_transaction_bytes=0, max_node_bytes=0)
    return ControllerMetrics(cast(Store, store), watch_reads=lambda: 0)


def test_paused_partitions_are_one_series_each_and_a_resumed_one_disappears() -> None:
    metrics = _metrics()
    metrics.set_paused([PartitionKey("src.dst", "orders", 0), PartitionKey("src.dst", "orders", 1)])
    assert _samples(metrics, "ferry_controller_partition_paused") == {
        ("src.dst", "orders", "0"): 1.0,
        ("src.dst", "orders", "1"): 1.0,
    }
    metrics.set_paused([PartitionKey("src.dst", "orders", 1)])
    assert _samples(metrics, "ferry_controller_partition_paused") == {("src.dst", "orders", "1"): 1.0}
    metrics.set_paused([])
    assert _samples(metrics, "ferry_controller_partition_paused") == {}


def test_partitions_without_progress_show_the_seconds_since_their_offset_moved() -> None:
    metrics = _metrics()
    metrics.set_noprogress({PartitionKey("src.dst", "orders", 2): 90.0})
    assert _samples(metrics, "ferry_controller_partition_noprogress_seconds") == {("src.dst", "orders", "2"): 90.0}
    metrics.set_noprogress({PartitionKey("dst.src", "events", 0): 30.0})
    assert _samples(metrics, "ferry_controller_partition_noprogress_seconds") == {("dst.src", "events", "0"): 30.0}


def _values(registry: Any, name: str) -> dict[tuple[str, ...], float]:
    families = text_string_to_metric_families(generate_latest(registry).decode())
    family = next(f for f in families if f.name == name)
    return {tuple(s.labels.values()): s.value for s in family.samples if s.name.endswith("_total")}


def test_a_jobs_failure_and_skip_counters_exist_at_0_from_its_first_run() -> None:
    metrics = _metrics()
    metrics.on_job_event(JobExecutionEvent(EVENT_JOB_EXECUTED, "reconcile", None, None))
    assert _values(metrics.registry, "ferry_controller_job_failures") == {("reconcile",): 0.0}
    assert _values(metrics.registry, "ferry_controller_job_skips") == {
        ("reconcile", "missed"): 0.0,
        ("reconcile", "max_instances"): 0.0,
    }
    metrics.on_job_event(JobExecutionEvent(EVENT_JOB_ERROR, "reconcile", None, None, exception=RuntimeError("x")))
    assert _values(metrics.registry, "ferry_controller_job_failures") == {("reconcile",): 1.0}


def _by_reason(metrics: ControllerMetrics) -> dict[str, float]:
    """The ACL sync's failed runs of route src.dst, by reason."""
    families = text_string_to_metric_families(generate_latest(metrics.registry).decode())
    family = next(f for f in families if f.name == "ferry_controller_acl_sync_failures")
    return {
        s.labels["reason"]: s.value
        for s in family.samples
        if s.name.endswith("_total") and s.labels["route"] == "src.dst"
    }


def test_the_acl_sync_counts_its_failed_runs_by_route_and_reason_from_0(admins: dict[str, FakeAdmin]) -> None:
    metrics = _metrics()
    admins["src"].acls = {_acl("orders")}
    zk = FakeZk()
    config = _config()
    job = AclSyncJob(
        config=config,
        routes=lambda: config.routes,
        topics=lambda: {"src.dst": {"orders"}},
        zk=cast(Any, zk),
        layout=ZkLayout("/t"),
        commit=zk.commit,
        clock=lambda: 100.0,
        failures=metrics.acl_sync_failures,
    )
    job.run()
    assert _by_reason(metrics) == {"refused": 0.0, "failed": 0.0}
    admins["dst"].down = True
    job.run()
    admins["src"].down = True
    job.run()
    assert _by_reason(metrics) == {"refused": 0.0, "failed": 2.0}

    # The destination's authorizer refuses the grant (Ferry's principal lacks Alter): counted as refused.
    admins["src"].down = admins["dst"].down = False
    admins["dst"].refused = True
    admins["src"].acls.add(_acl("payments"))
    job = AclSyncJob(
        config=config,
        routes=lambda: config.routes,
        topics=lambda: {"src.dst": {"orders", "payments"}},
        zk=cast(Any, zk),
        layout=ZkLayout("/t"),
        commit=zk.commit,
        clock=lambda: 100.0,
        failures=metrics.acl_sync_failures,
    )
    job.run()
    assert _by_reason(metrics) == {"refused": 1.0, "failed": 2.0}
    assert job.results["src.dst"].refused
    assert "CLUSTER_AUTHORIZATION_FAILED" in next(iter(job.results["src.dst"].failed.values()))


def test_a_workers_fencing_counter_exists_at_0_once_it_copies_a_route() -> None:
    metrics = WorkerMetrics()
    metrics.start_route("src.dst")
    assert _values(metrics.registry, "ferry_worker_fenced") == {("src.dst",): 0.0}
