"""Schema distribution against the local stack's two real registries (Apicurio Registry 2.4.2).

The distributor runs in the test process (no controller); every test distributes only its own
subjects (``schemas.include``), since the registries are shared by the whole session.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest

from ferry.common.config import SchemasConfig
from ferry.controller.api.rest_json import schema_report_json
from ferry.controller.schemas.distributor import SchemaDistributor
from ferry.controller.schemas.registry import RegistryClient
from ferry.devstack import stack as devstack
from tests.harness.registry import register, version, versions

ORDER_V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": None}],
}


def schema_at(url: str, schema_id: int) -> dict[str, Any] | None:
    answer = requests.get(f"{url}/apis/ccompat/v7/schemas/ids/{schema_id}", timeout=10)
    return None if answer.status_code == 404 else dict(answer.json())


def schemas_config(stack: devstack.Stack, include: str) -> SchemasConfig:
    return SchemasConfig.model_validate(
        {
            "primary": "src",
            "include": [include],
            "registries": {
                "src": {"url": stack.registry_url("src")},
                "dst": {
                    "url": stack.registry_url("dst"),
                    "subject_format": "{tenant}-{env}-{topic}-value",
                    "subject_vars": {"tenant": "acme", "env": "prod"},
                },
            },
        }
    )


@pytest.fixture
def topic(topic_name: Callable[[str], str]) -> str:
    return topic_name("orders")


@pytest.fixture
def distributor(registry_stack: devstack.Stack, topic: str) -> SchemaDistributor:
    return SchemaDistributor(config=schemas_config(registry_stack, f"{topic}-value"), metrics=CollectorRegistry())


def test_ids_carry_over_and_a_second_version_follows_in_order(
    registry_stack: devstack.Stack, topic: str, distributor: SchemaDistributor
) -> None:
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    subject, translated = f"{topic}-value", f"acme-prod-{topic}-value"
    first = register(src, subject, ORDER_V1)

    report = schema_report_json(distributor.run())
    assert [(c["version"], c["id"], c["targetSubject"]) for c in report["copied"]] == [(1, first, translated)]
    landed = version(dst, translated, 1)
    assert landed is not None and landed["id"] == first
    assert json.loads(landed["schema"]) == ORDER_V1
    assert report["inSync"] and report["subjects"][0]["targets"]["dst"]["state"] == "in_sync"

    second = register(src, subject, ORDER_V2)  # compatible (a field with a default)
    assert second != first
    report = schema_report_json(distributor.run())
    assert [(c["version"], c["id"]) for c in report["copied"]] == [(2, second)]
    assert versions(dst, translated) == [1, 2]
    assert (version(dst, translated, 2) or {}).get("id") == second

    again = schema_report_json(distributor.run())  # idempotent: nothing to copy, nothing copied twice
    assert again["copied"] == [] and again["inSync"]
    assert versions(dst, translated) == [1, 2]
    assert (
        'ferry_controller_schema_subjects_out_of_sync{target="dst"} 0.0'
        in generate_latest(_metrics(distributor)).decode()
    )


def _metrics(distributor: SchemaDistributor) -> CollectorRegistry:
    return distributor.metrics


def test_a_conflicting_id_is_reported_and_the_target_is_left_alone(
    registry_stack: devstack.Stack, topic: str, distributor: SchemaDistributor
) -> None:
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    subject, translated = f"{topic}-value", f"acme-prod-{topic}-value"
    unique = {
        "type": "record",
        "name": "Conflicted",
        "namespace": topic.replace(".", "_").replace("-", "_"),
        "fields": [{"name": "id", "type": "long"}],
    }
    taken_id = register(src, subject, unique)
    # Make the target use that ID for something else: its own registrations take IDs in order.
    filler = 0
    while (there := schema_at(dst, taken_id)) is None:
        filler += 1
        register(dst, f"local-{topic}-value", {"type": "enum", "name": f"F{filler}", "symbols": ["A"]})
        assert filler < 10_000
    before_subjects = requests.get(f"{dst}/apis/ccompat/v7/subjects", timeout=10).json()

    report = schema_report_json(distributor.run())
    assert report["copied"] == [] and not report["inSync"]
    [conflict] = report["conflicts"]
    assert conflict["id"] == taken_id and f"ID {taken_id} is used on dst by a different schema" in conflict["reason"]
    assert report["subjects"][0]["targets"]["dst"]["state"] == "conflict"
    assert 'ferry_controller_schema_conflicts{target="dst"} 1.0' in generate_latest(_metrics(distributor)).decode()
    # Nothing on the target changed: same schema at that ID, no new subject.
    assert schema_at(dst, taken_id) == there
    assert versions(dst, translated) == []
    assert requests.get(f"{dst}/apis/ccompat/v7/subjects", timeout=10).json() == before_subjects
    assert (
        schema_report_json(distributor.run())["conflicts"] == report["conflicts"]
    )  # still reported, still not written


def test_the_same_schema_under_another_id_on_the_target_is_a_conflict(
    registry_stack: devstack.Stack, topic: str, distributor: SchemaDistributor
) -> None:
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    subject, translated = f"{topic}-value", f"acme-prod-{topic}-value"
    schema = {
        "type": "record",
        "name": "Twice",
        "namespace": topic.replace(".", "_").replace("-", "_"),
        "fields": [{"name": "id", "type": "long"}],
    }
    there = register(dst, f"local-{topic}-value", schema)  # registered on the target first, by itself
    # The primary's IDs come from its own counter: step it past `there` so the IDs differ.
    filler = register(
        src, f"pad-{topic}-value", {"type": "enum", "name": "Pad", "symbols": ["A"], "namespace": schema["namespace"]}
    )
    if filler + 1 == there:
        register(
            src,
            f"pad-{topic}-value",
            {"type": "enum", "name": "Pad2", "symbols": ["A"], "namespace": schema["namespace"]},
        )
    here = register(src, subject, schema)
    assert here != there
    report = schema_report_json(distributor.run())
    assert report["copied"] == []
    [conflict] = report["conflicts"]
    assert conflict["reason"] == (
        f"dst already holds the schema of {subject} version 1 under another ID, so it cannot take ID {here}"
    )
    assert versions(dst, translated) == [] and schema_at(dst, here) is None  # nothing written


def _state(url: str, subject: str, number: int) -> str:
    answer = requests.get(f"{url}/apis/registry/v2/groups/default/artifacts/{subject}/versions", timeout=10)
    answer.raise_for_status()
    return next(str(e["state"]) for e in answer.json()["versions"] if e["version"] == str(number))


def test_soft_deletes_follow_the_primary_and_hard_deletes_do_not(
    registry_stack: devstack.Stack, topic: str, distributor: SchemaDistributor
) -> None:
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    subject, translated = f"{topic}-value", f"acme-prod-{topic}-value"
    first, second = register(src, subject, ORDER_V1), register(src, subject, ORDER_V2)
    assert len(schema_report_json(distributor.run())["copied"]) == 2

    requests.delete(f"{src}/apis/ccompat/v7/subjects/{subject}/versions/1", timeout=10).raise_for_status()
    report = schema_report_json(distributor.run())
    assert [(c["version"], c["state"]) for c in report["stateChanged"]] == [(1, "DISABLED")]
    assert _state(dst, translated, 1) == "DISABLED" and _state(dst, translated, 2) == "ENABLED"
    assert schema_at(dst, first) is not None  # soft-deleted: the ID still resolves for mirrored records

    requests.delete(f"{src}/apis/ccompat/v7/subjects/{subject}", timeout=10).raise_for_status()  # the whole subject
    report = schema_report_json(distributor.run())
    assert [(c["version"], c["state"]) for c in report["stateChanged"]] == [(2, "DISABLED")]
    assert report["inSync"] and schema_report_json(distributor.run())["stateChanged"] == []

    requests.delete(
        f"{src}/apis/ccompat/v7/subjects/{subject}/versions/2?permanent=true", timeout=10
    ).raise_for_status()
    report = schema_report_json(distributor.run())
    assert report["copied"] == [] and report["stateChanged"] == []
    assert versions(dst, translated) == [1, 2] and schema_at(dst, second) is not None  # kept on the target


class CrashAfterImport(RegistryClient):
    """A target client whose process 'dies' right after its first import reached the registry."""

    def import_zip(self, data: bytes) -> None:
        super().import_zip(data)
        raise SystemExit("controller killed mid-distribution")


def test_a_restart_mid_distribution_copies_each_version_exactly_once(
    registry_stack: devstack.Stack, topic: str
) -> None:
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    config = schemas_config(registry_stack, f"{topic}.*-value")
    subjects = [f"{topic}.{n}-value" for n in range(4)]
    for n, subject in enumerate(subjects):
        register(src, subject, {"type": "record", "name": f"R{n}", "fields": [{"name": "a", "type": "int"}]})
        register(
            src,
            subject,
            {
                "type": "record",
                "name": f"R{n}",
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
            },
        )
    crashing = SchemaDistributor(
        config=config,
        metrics=CollectorRegistry(),
        clients={
            "src": RegistryClient(name="src", config=config.registries["src"]),
            "dst": CrashAfterImport(name="dst", config=config.registries["dst"]),
        },
    )
    with pytest.raises(SystemExit):
        crashing.run()

    restarted = SchemaDistributor(config=config, metrics=CollectorRegistry())
    report = schema_report_json(restarted.run())
    assert report["copied"] == []  # the import before the crash had landed; nothing copied twice
    assert report["inSync"]
    for subject in subjects:
        translated = f"acme-prod-{subject}"
        assert versions(dst, translated) == [1, 2]
        for number in (1, 2):
            assert (version(dst, translated, number) or {})["id"] == (version(src, subject, number) or {})["id"]
