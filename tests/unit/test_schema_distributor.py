"""The distributor's pass over in-memory fake registries: the read-back after an import, and
what a failed pass leaves in the status. (Real registries: tests/integration/test_schemas.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from ferry.common.config import SchemasConfig
from ferry.controller.api.rest_json import schema_report_json, schema_status_json
from ferry.controller.schemas.distributor import SchemaDistributor
from ferry.controller.schemas.registry import RegisteredVersion, RegistryClient, RegistryUnavailable

CONFIG = SchemasConfig.model_validate(
    {
        "primary": "src",
        "registries": {
            "src": {"url": "http://src"},
            "dst": {"url": "http://dst", "subject_format": "dr-{topic}-value"},
        },
    }
)


class FakeRegistry(RegistryClient):
    """subject -> [(id, schema)]. An import answers and changes nothing, as Apicurio's does when
    the ID is taken (unless ``down``)."""

    def __init__(self, name: str, subjects: dict[str, list[tuple[int, str]]]) -> None:
        self.name, self.data, self.down = name, subjects, False
        self.imported: list[Any] = []

    def close(self) -> None:
        pass

    def _check(self) -> None:
        if self.down:
            raise RegistryUnavailable(f"registry of {self.name} did not answer")

    def subjects(self) -> list[str]:
        self._check()
        return sorted(self.data)

    def versions(self, subject: str) -> list[int]:
        self._check()
        return list(range(1, len(self.data.get(subject, [])) + 1))

    def version(self, subject: str, version: int) -> RegisteredVersion | None:
        entries = self.data.get(subject, [])
        if version > len(entries):
            return None
        schema_id, schema = entries[version - 1]
        return RegisteredVersion(subject, version, schema_id, schema, "AVRO")

    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None:
        for entries in self.data.values():
            for found_id, schema in entries:
                if found_id == schema_id:
                    return schema, "AVRO"
        return None

    def states(self, subject: str) -> dict[int, str]:
        return {}

    def set_state(self, subject: str, version: int, state: str) -> None:
        raise AssertionError("no state changes expected")

    def export_zip(self) -> bytes:
        return b"export"

    def import_zip(self, data: bytes) -> None:
        self._check()
        self.imported.append(data)


@pytest.fixture(autouse=True)
def _import_file(monkeypatch: pytest.MonkeyPatch) -> None:
    # The import file itself is tested in test_schema_rest.
    monkeypatch.setattr("ferry.controller.schemas.distributor.import_zip_for", lambda export, wanted: b"zip")
    monkeypatch.setattr("ferry.controller.schemas.distributor.content_hashes", lambda export: {})


def _distributor(src: FakeRegistry, dst: FakeRegistry) -> SchemaDistributor:
    return SchemaDistributor(config=CONFIG, metrics=CollectorRegistry(), clients={"src": src, "dst": dst})


def test_an_import_that_answers_but_lands_nothing_is_reported_not_skipped() -> None:
    src = FakeRegistry("src", {"orders-value": [(7, '"string"')]})
    dst = FakeRegistry("dst", {})
    distributor = _distributor(src, dst)
    report = schema_report_json(distributor.run())
    assert report["copied"] == [] and not report["inSync"]
    [problem] = report["conflicts"]
    assert "did not land on dst as dr-orders-value with ID 7: nothing was imported" in problem["reason"]
    assert 'ferry_controller_schema_conflicts{target="dst"} 1.0' in generate_latest(distributor.metrics).decode()


def test_a_failed_pass_keeps_the_last_report_and_says_why() -> None:
    src = FakeRegistry("src", {"orders-value": [(7, '"string"')]})
    dst = FakeRegistry("dst", {"dr-orders-value": [(7, '"string"')]})
    distributor = _distributor(src, dst)
    first = schema_status_json(distributor.status())
    assert first["inSync"] and first["lastError"] is None
    src.down = True  # the primary: no pass without it
    with pytest.raises(RegistryUnavailable):
        distributor.run()
    status = schema_status_json(distributor.status())
    assert status["inSync"] and "registry of src did not answer" in status["lastError"]
    assert "ferry_controller_schema_pass_failures_total 1.0" in generate_latest(distributor.metrics).decode()


def test_imports_go_in_batches_and_stop_for_a_subject_whose_version_did_not_land() -> None:
    config = CONFIG.model_copy(update={"import_batch": 1})
    src = FakeRegistry("src", {"orders-value": [(7, '"string"'), (8, '"long"')], "other-value": [(9, '"int"')]})
    dst = FakeRegistry("dst", {})
    report = schema_report_json(
        SchemaDistributor(config=config, metrics=CollectorRegistry(), clients={"src": src, "dst": dst}).run()
    )
    # other-value v1 and orders-value v1 each in a request of their own; orders-value v2 waits
    # behind its version 1, which did not land (it would be out of order).
    assert len(dst.imported) == 2
    assert sorted((c["subject"], c["version"]) for c in report["conflicts"]) == [
        ("orders-value", 1),
        ("other-value", 1),
    ]


def test_an_unreachable_target_is_left_out_and_the_others_go_on() -> None:
    config = SchemasConfig.model_validate(
        {
            "primary": "src",
            "registries": {"src": {"url": "http://src"}, "dst": {"url": "http://dst"}, "dr": {"url": "http://dr"}},
        }
    )
    src = FakeRegistry("src", {"orders-value": [(7, '"string"')]})
    dst = FakeRegistry("dst", {"orders-value": [(7, '"string"')]})
    dr = FakeRegistry("dr", {})
    dr.down = True
    distributor = SchemaDistributor(
        config=config, metrics=CollectorRegistry(), clients={"src": src, "dst": dst, "dr": dr}
    )
    report = schema_report_json(distributor.run())
    assert report["unreachable"] == {"dr": "registry of dr did not answer"}
    assert report["subjects"][0]["targets"] == {
        "dst": {
            "subject": "orders-value",
            "state": "in_sync",
            "syncedVersions": [1],
            "missingVersions": [],
            "conflict": None,
        }
    }
    assert report["outOfSync"] == {"dr": 1, "dst": 0} and not report["inSync"]
    metrics = generate_latest(distributor.metrics).decode()
    assert 'ferry_controller_schema_target_up{target="dr"} 0.0' in metrics
    assert 'ferry_controller_schema_target_up{target="dst"} 1.0' in metrics
