"""GET /schemas and POST /schemas/sync at the REST edge (fake controller), and the import file."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from ferry.controller.api.rest import create_app
from ferry.controller.errors import NotFound
from ferry.controller.schemas.registry import RegistryRefused, VersionCopy, import_zip_for
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api


def test_status_and_sync_reach_the_leader(client: FlaskClient, fake: FakeController) -> None:
    assert client.get("/schemas").get_json()["primary"] == "src"
    assert client.post("/schemas/sync").status_code == 200
    assert client.post("/schemas/sync", json={}).status_code == 200
    assert [name for name, _ in fake.calls] == ["schema_status", "schema_sync", "schema_sync"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/schemas?subject=x", None),
        ("POST", "/schemas/sync?now=1", None),
        ("POST", "/schemas/sync", {"subject": "x"}),
        ("POST", "/schemas/sync", [1]),
    ],
)
def test_unexpected_input_is_a_400(
    client: FlaskClient, fake: FakeController, method: str, path: str, body: object
) -> None:
    response = client.open(path, method=method, json=body) if body is not None else client.open(path, method=method)
    assert_json_error(response, 400)
    assert fake.calls == []


def test_a_malformed_body_is_a_400(client: FlaskClient) -> None:
    response = client.post("/schemas/sync", data="{", content_type="application/json")
    assert_json_error(response, 400)


def test_distribution_off_is_a_json_404(client: FlaskClient, fake: FakeController) -> None:
    fake.fail = NotFound("schema distribution is off: the config has no `schemas` section")
    assert "off" in assert_json_error(client.get("/schemas"), 404)["error"]


def test_a_standby_forwards_both_to_the_leader(serve: Callable[[Flask], str]) -> None:
    leader = FakeController("leader")
    url = serve(create_app(as_controller_api(leader)))
    standby = FakeController("standby", leading=False, leader={"id": "leader", "rest_url": url})
    client = create_app(as_controller_api(standby)).test_client()
    assert client.post("/schemas/sync").get_json()["targets"] == ["leader"]  # the fake names who answered
    assert client.get("/schemas").status_code == 200
    assert standby.calls == [] and [name for name, _ in leader.calls] == ["schema_sync", "schema_status"]


def _export() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("manifest-1.Manifest.json", "{}")
        for cid, text in ((1, '"string"'), (2, '"long"')):
            z.writestr(f"content/h{cid}.Content.json", json.dumps({"contentId": cid, "contentHash": f"h{cid}"}))
            z.writestr(f"content/h{cid}.Content.data", text)
        for version, cid in ((1, 1), (2, 2)):
            z.writestr(
                f"groups/default/artifacts/orders-value/versions/{version}.ArtifactVersion.json",
                json.dumps({"artifactId": "orders-value", "version": str(version), "contentId": cid}),
            )
    return out.getvalue()


def test_the_import_file_holds_only_the_copies_renamed() -> None:
    data = import_zip_for(_export(), [VersionCopy("orders-value", 2, "acme-orders-value")])
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        names = set(z.namelist())
        assert names == {
            "manifest-1.Manifest.json",
            "content/h2.Content.json",
            "content/h2.Content.data",
            "groups/default/artifacts/acme-orders-value/versions/2.ArtifactVersion.json",
        }
        entry = json.loads(z.read("groups/default/artifacts/acme-orders-value/versions/2.ArtifactVersion.json"))
        assert entry["artifactId"] == "acme-orders-value" and entry["contentId"] == 2
    with pytest.raises(RegistryRefused, match="version 3"):
        import_zip_for(_export(), [VersionCopy("orders-value", 3, "x")])
