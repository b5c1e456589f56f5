"""Every metric Ferry exports follows one naming scheme: ``ferry_controller_*`` on the controller,
``ferry_worker_*`` on the worker, and every counter a Prometheus counter exposed with ``_total``.
Checked on the exposition text a scrape gets, not on the Python objects. The metrics tables of
docs/operations.md list exactly the metrics the processes register, each with its type."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ferry.common.config import SchemasConfig, parse_config
from ferry.common.model import PartitionKey
from ferry.controller.failover.control import FailoverControl
from ferry.controller.lead.load_balance import LoadBalancer
from ferry.controller.lead.store import Store
from ferry.controller.metrics import ControllerMetrics
from ferry.controller.schemas.distributor import SchemaDistributor
from ferry.worker.metrics import WorkerMetrics

pytestmark = pytest.mark.unit

SCHEMAS = SchemasConfig.model_validate(
    {"primary": "src", "registries": {"src": {"url": "http://src"}, "dst": {"url": "http://dst"}}}
)


def _controller_registry() -> CollectorRegistry:
    store = SimpleNamespace(reads=7, writes=3, transactions=2, max_transaction_bytes=900, max_node_bytes=400)
    metrics = ControllerMetrics(cast(Store, store), watch_reads=lambda: 5)
    # The schema distributor registers its metrics in the controller's registry.
    SchemaDistributor(config=SCHEMAS, metrics=metrics.registry, clients=cast(Any, {"src": object(), "dst": object()}))
    # Labelled metrics show their samples only once a label set exists: touch one of each.
    metrics.partitions.labels("ONLINE").set(1)
    metrics.lag.labels("src.dst", "t", "0").set(0)
    metrics.job_runs.labels("reconcile").inc()
    metrics.job_failures.labels("reconcile").inc(0)
    metrics.job_skips.labels("reconcile", "missed").inc(0)
    metrics.acl_sync_failures.labels("src.dst", "failed").inc(0)
    metrics.checkpoint_age.labels("src.dst", "g").set(1)
    metrics.beat_latency.labels("src", "dst", "1").set(0.1)
    metrics.beat_age.labels("src", "dst").set(1)
    metrics.route_latency.labels("src.dst").set(0.1)
    metrics.route_age.labels("src.dst").set(1)
    metrics.set_paused([PartitionKey("src.dst", "t", 0)])
    metrics.set_noprogress({PartitionKey("src.dst", "t", 1): 60.0})
    return metrics.registry


def _worker_registry() -> CollectorRegistry:
    metrics = WorkerMetrics()
    route = "src.dst"
    for counter in (metrics.records, metrics.skipped, metrics.bytes, metrics.resume_skipped, metrics.lookback):
        counter.labels(route).inc()
    metrics.errors.labels(route, "commit").inc()
    metrics.partitions.labels("ONLINE").set(1)
    metrics.record_age.labels(route).observe(0.2)
    return metrics.registry


def _families(registry: CollectorRegistry) -> dict[str, Any]:
    return {family.name: family for family in text_string_to_metric_families(generate_latest(registry).decode())}


@pytest.mark.parametrize(("process", "registry"), [("controller", _controller_registry), ("worker", _worker_registry)])
def test_every_metric_is_named_after_its_process_and_every_counter_ends_in_total(process: str, registry: Any) -> None:
    families = _families(registry())
    assert families
    for name, family in families.items():
        assert name.startswith(f"ferry_{process}_"), name
        if family.type == "counter":
            # (A labelled counter no label set has touched yet shows no sample, only its TYPE line.)
            values = [s for s in family.samples if not s.name.endswith("_created")]
            assert all(s.name == f"{name}_total" for s in values), (name, values)
        else:  # a gauge or histogram named like a counter would mislead rate()
            assert not any(s.name.endswith("_total") for s in family.samples), name


def test_zookeeper_traffic_is_counted_and_the_biggest_sizes_are_gauges() -> None:
    families = _families(_controller_registry())
    for name, value in (("reads", 12), ("writes", 3), ("transactions", 2)):
        family = families[f"ferry_controller_zk_{name}"]
        assert family.type == "counter" and family.samples[0].value == value
    assert families["ferry_controller_zk_max_transaction_bytes"].type == "gauge"
    assert families["ferry_controller_zk_max_node_bytes"].samples[0].value == 400


def test_heartbeat_metrics_sit_under_the_controller_prefix() -> None:
    families = _families(_controller_registry())
    assert {
        "ferry_controller_heartbeat_latency_seconds",
        "ferry_controller_heartbeat_age_seconds",
        "ferry_controller_route_heartbeat_latency_seconds",
        "ferry_controller_route_heartbeat_age_seconds",
    } <= set(families)


def test_the_record_age_is_a_histogram_by_route() -> None:
    family = _families(_worker_registry())["ferry_worker_record_age_seconds"]
    assert family.type == "histogram"
    count = next(s for s in family.samples if s.name == "ferry_worker_record_age_seconds_count")
    assert count.labels == {"route": "src.dst"} and count.value == 1


DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
CONFIG = parse_config(
    {
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "clusters": {"src": {"bootstrap.servers": "src"}, "dst": {"bootstrap.servers": "dst"}},
        "routes": [{"source": "src", "destination": "dst"}],
    }
)


def _every_controller_metric() -> CollectorRegistry:
    """The controller's registry with every part that registers in it (controller/service.py)."""
    registry = _controller_registry()
    LoadBalancer(CONFIG.controller, registry)
    FailoverControl(
        config=CONFIG,
        zk=cast(Any, None),
        layout=cast(Any, None),
        leadership=cast(Any, None),
        store=cast(Any, None),
        registry=registry,
    )
    return registry


def _registered(registry: CollectorRegistry) -> dict[str, str]:
    """Name as a scrape shows it (a counter with ``_total``) -> type, labelled or not, touched or not."""
    return {
        (f"{family.name}_total" if family.type == "counter" else family.name): family.type
        for family in registry.collect()
    }


def _documented(process: str) -> dict[str, str]:
    """The ``| `ferry_<process>_...` | type | ...`` rows of docs/operations.md: a row may name several
    metrics, the later ones shortened to their suffix after the process (`` `_job_failures_total` ``)."""
    documented = {}
    for row in re.findall(rf"^\| (`ferry_{process}_.*)$", DOCS.read_text(), re.MULTILINE):
        names, kind = (cell.strip() for cell in row.split(" | ")[:2])
        for name in re.findall(r"`([^`]+)`", names):
            documented[name if name.startswith("ferry_") else f"ferry_{process}{name}"] = kind
    return documented


@pytest.mark.parametrize(
    ("process", "registry"), [("controller", _every_controller_metric), ("worker", _worker_registry)]
)
def test_the_operations_guide_lists_exactly_the_metrics_each_process_registers(process: str, registry: Any) -> None:
    registered = _registered(registry())
    documented = _documented(process)
    assert sorted(registered.keys() - documented.keys()) == [], "registered, not in docs/operations.md"
    assert sorted(documented.keys() - registered.keys()) == [], "in docs/operations.md, not registered"
    assert documented == registered
