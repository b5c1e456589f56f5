"""Least privilege: a route with ``sync_acls: false`` copies no ACL, so ``ferry acls --applications`` prints
what its sync would have created on the destination (the source's Read and Describe on the route's topics
and groups, renamed, ALLOW and DENY), and as comments what a failover would have granted besides. It reads
the source (fake AdminClients, tests/unit/test_acl_sync_job.py's), with an administrator's properties
when given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from ferry import cli
from ferry.common.core.acl_sync import DENY, WRITE, Binding
from ferry.common.preflight import acls
from tests.unit.test_acl_sync_job import FakeAdmin, _acl

pytestmark = pytest.mark.unit

SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ferry"}


@pytest.fixture
def clusters(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeAdmin]:
    """The fake clusters by bootstrap server; each client built records the properties it got."""
    found = {"src:9094": FakeAdmin(groups=["app-1", "other"]), "dst:9094": FakeAdmin()}
    asked: list[dict[str, Any]] = []
    from ferry.common.kafka import clients

    def admin(properties: dict[str, Any]) -> FakeAdmin:
        asked.append(dict(properties))
        return found[properties["bootstrap.servers"]]

    monkeypatch.setattr(clients, "admin", admin)
    found["src:9094"].asked = asked  # type: ignore[attr-defined]
    return found


def _write(tmp_path: Path, sync_acls: bool = False) -> Path:
    route = {
        "source": "src",
        "destination": "dst",
        "naming": "prefix",
        "include": ["orders.*"],
        "groups": ["app-.*"],
        "sync_acls": sync_acls,
        "delivery_guarantee": "at_least_once",
    }
    config = {
        "zookeeper": {"connect": "zk:2181"},
        "clusters": {
            "src": {"bootstrap.servers": "src:9094", **SASL, "sasl.password": "${env:FERRY_TEST_UNSET_PASSWORD}"},
            "dst": {"bootstrap.servers": "dst:9094", **SASL, "sasl.password": "x"},
        },
        "routes": [route],
        "controller": {"checkpoint_interval_s": 0},
    }
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _deny(name: str) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC,
        name,
        ResourcePatternType.LITERAL,
        "User:app",
        "10.0.0.1",
        AclOperation.READ,
        AclPermissionType.DENY,
    )


def _source(clusters: dict[str, FakeAdmin]) -> None:
    src = clusters["src:9094"]
    src.topics = ["orders", "orders-secret", "payments"]
    src.acls = {
        _acl("orders"),
        _acl("orders", WRITE),
        _deny("orders-secret"),
        _acl("payments"),  # not a topic of the route
        _acl("app-1", kind="GROUP"),
    }


def test_the_applications_acls_the_sync_would_copy_are_printed_and_the_failovers_as_comments(
    tmp_path: Path, clusters: dict[str, FakeAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    _source(clusters)
    admin = tmp_path / "admin.properties"
    admin.write_text("# an administrator of src\nsasl.username=admin\nsasl.password=secret\n")
    path = _write(tmp_path)
    assert cli.main(["acls", "--config", str(path), "--applications", "--admin-config", f"src={admin}"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("# route src.dst (sync_acls: false)") :].splitlines()
    assert section[1:] == [
        "kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:app --operation Read --group app-1 "
        "--resource-pattern-type literal",
        "kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:app --operation Read "
        "--topic src.orders --resource-pattern-type literal",
        "kafka-acls.sh --bootstrap-server dst:9094 --add --deny-principal User:app --deny-host 10.0.0.1 "
        "--operation Read --topic src.orders-secret --resource-pattern-type literal",
        "# at a failover of route src.dst, once nobody copies it (Ferry grants nothing without sync_acls), and only "
        "then; remove them again when the producers are back on the source:",
        "# kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:app --operation Write --topic "
        "src.orders --resource-pattern-type literal",
    ]
    asked = clusters["src:9094"].asked  # type: ignore[attr-defined]
    # The administrator's properties instead of the config's (whose password is not available here).
    assert asked[0] == {"bootstrap.servers": "src:9094", "sasl.username": "admin", "sasl.password": "secret"}
    # Ferry's own lines come first, unchanged: no Describe on src's cluster, no Alter on dst's.
    assert "--cluster" in out and "--operation Alter --cluster" not in out


def test_the_lines_are_what_the_pure_core_would_sync() -> None:
    lines = acls.application_lines(
        "b:9092",
        [
            Binding("TOPIC", "t", "PREFIXED", "User:a b", "*", "DESCRIBE", "ALLOW"),
            Binding("TOPIC", "t", "PREFIXED", "User:a b", "*", "READ", "ALLOW"),
            Binding("GROUP", "g", "LITERAL", "User:c", "h", "READ", DENY),
        ],
        "admin.properties",
    )
    assert lines == [
        "kafka-acls.sh --bootstrap-server b:9092 --command-config admin.properties --add --deny-principal User:c "
        "--deny-host h --operation Read --group g --resource-pattern-type literal",
        "kafka-acls.sh --bootstrap-server b:9092 --command-config admin.properties --add --allow-principal "
        "'User:a b' --operation Read --operation Describe --topic t --resource-pattern-type prefixed",
    ]


def test_a_source_that_shows_no_acls_says_why_that_may_be(
    tmp_path: Path, clusters: dict[str, FakeAdmin], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FERRY_TEST_UNSET_PASSWORD", "x")
    clusters["src:9094"].topics = ["orders"]
    assert cli.main(["acls", "--config", str(_write(tmp_path)), "--applications"]) == 0
    assert (
        "# source src shows no ACLs: none there, or the client asking may not describe them" in capsys.readouterr().out
    )


def test_a_secret_that_is_not_available_needs_admin_config(
    tmp_path: Path, clusters: dict[str, FakeAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["acls", "--config", str(_write(tmp_path)), "--applications"]) == 2
    err = capsys.readouterr().err
    assert "clusters.src.sasl.password:" in err and "--admin-config src=FILE" in err


def test_without_applications_nothing_is_reached_and_with_sync_nothing_is_added(
    tmp_path: Path, clusters: dict[str, FakeAdmin], capsys: pytest.CaptureFixture[str]
) -> None:
    _source(clusters)
    assert cli.main(["acls", "--config", str(_write(tmp_path))]) == 0
    assert clusters["src:9094"].asked == []  # type: ignore[attr-defined]
    assert "sync_acls: false" not in capsys.readouterr().out
    assert cli.main(["acls", "--config", str(_write(tmp_path, sync_acls=True)), "--applications"]) == 0
    assert "every route syncs its ACLs itself" in capsys.readouterr().out
    assert cli.main(["acls", "--config", str(_write(tmp_path)), "--admin-config", "src=x"]) == 2
