"""`ferry check --connect` against the local stack: a SASL_SSL cluster whose password comes from
`${env:...}`, ZooKeeper with digest authentication, an unreachable registry and cluster; one line
per endpoint, the reason when refused, and the password in no output and no log record; the
transaction settings and transactional-id ACLs of exactly-once routes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry import cli
from ferry.common.config import parse_config
from ferry.common.kafka import clients as kafka_clients
from ferry.common.zk.layout import make_client
from ferry.devstack import security
from ferry.devstack import stack as devstack

PASSWORD = security.SASL_PASSWORD
ZK_DIGEST = "ferry:check-zk-s3cret"


@pytest.fixture
def config_data(
    zk_chroot: str, local_stack: devstack.Stack, monkeypatch: pytest.MonkeyPatch
) -> Iterator[dict[str, Any]]:
    connect, chroot = zk_chroot.split("/", 1)
    monkeypatch.setenv("FERRY_TEST_KAFKA_PASSWORD", PASSWORD)
    monkeypatch.setenv("FERRY_TEST_ZK_DIGEST", ZK_DIGEST)
    src = {**local_stack.secured("src"), "sasl.password": "${env:FERRY_TEST_KAFKA_PASSWORD}"}
    data = {
        "zookeeper": {
            "connect": connect,
            "root": f"/{chroot}/ferry",
            "retry_deadline_s": 10,
            "auth": {"digest": "${env:FERRY_TEST_ZK_DIGEST}", "others": "none"},
        },
        "clusters": {"src": src, "dst": {"bootstrap.servers": local_stack.bootstrap("dst")}},
        # At least once: these checks' lines do not depend on the default guarantee.
        "routes": [{"source": "src", "destination": "dst", "delivery_guarantee": "at_least_once"}],
    }
    # Ferry's root, created with Ferry's ACL: --connect checks the ACL grants the configured identity.
    ferry = make_client(parse_config(data).zookeeper)
    ferry.start(timeout=15)
    root = data["zookeeper"]["root"]
    ferry.ensure_path(root)
    yield data
    ferry.delete(root, recursive=True)  # the chroot fixture's anonymous cleanup may not
    ferry.stop()
    ferry.close()


def _check(data: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(data))
    status = cli.main(["check", "--config", str(path), "--connect", "--timeout", "5"])
    out, err = capsys.readouterr()
    assert out.startswith(f"{path}: ok\n")
    return status, out.splitlines()[1:], err


def test_every_endpoint_is_ok_with_a_kafka_password_from_the_environment(
    config_data: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    status, lines, err = _check(config_data, tmp_path, capsys)
    assert status == 0, (lines, err)
    assert [line.partition("): ")[0] for line in lines[:3]] == [  # in the file's order (safe_dump sorts)
        f"ok    kafka dst ({config_data['clusters']['dst']['bootstrap.servers']}",
        f"ok    kafka src ({config_data['clusters']['src']['bootstrap.servers']}",
        f"ok    zookeeper {config_data['zookeeper']['connect']} ({config_data['zookeeper']['root']}",
    ]
    # The SASL cluster's ACLs: this broker has no authorizer, so they cannot be described (no failure).
    assert lines[3:] == [
        line for line in lines[3:] if line.startswith("----  kafka src ACLs of User:ferry: not checked")
    ]
    assert len(lines) == 4, lines
    assert "authenticated as 'ferry'; the ACL on" in lines[2]
    everything = "\n".join([*lines, err, caplog.text])
    assert PASSWORD not in everything and "check-zk-s3cret" not in everything


def test_refusals_and_unreachable_endpoints_get_one_line_each_with_the_reason(
    config_data: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("FERRY_TEST_KAFKA_PASSWORD", "wrong-kafka-password")
    monkeypatch.setenv("FERRY_TEST_ZK_DIGEST", "ferry:wrong-zk-password")
    config_data["clusters"]["gone"] = {"bootstrap.servers": "127.0.0.1:1"}
    config_data["schemas"] = {"primary": "src", "registries": {"src": {"url": "http://127.0.0.1:1"}}}
    status, lines, err = _check(config_data, tmp_path, capsys)
    assert status == 1
    assert len(lines) == 5 and all(line.startswith("FAIL") for line in lines[1:]), lines
    dst, gone, src, zookeeper, registry = lines  # clusters in the file's order (safe_dump sorts)
    assert "SASL authentication error" in src and "invalid credentials" in src
    assert dst.startswith("ok    kafka dst")
    assert gone.startswith("FAIL  kafka gone (127.0.0.1:1): no answer within 5s")
    assert "does not grant user 'ferry' with this password" in zookeeper
    assert registry.startswith("FAIL  registry src (http://127.0.0.1:1):") and "did not answer" in registry
    everything = "\n".join([*lines, err, caplog.text])
    assert "Traceback" not in everything
    assert "wrong-kafka-password" not in everything and "wrong-zk-password" not in everything


def test_an_unreachable_zookeeper_is_one_line(
    config_data: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config_data["zookeeper"] = {"connect": "127.0.0.1:1", "root": "/ferry"}
    status, lines, err = _check(config_data, tmp_path, capsys)
    assert status == 1
    assert [line for line in lines if "zookeeper" in line] == [
        "FAIL  zookeeper 127.0.0.1:1 (/ferry): no session within 5s"
    ]
    assert "Traceback" not in err


def test_exactly_once_routes_get_their_destinations_transaction_settings_and_transactional_id_acls(
    config_data: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    config_data["routes"] = [
        {"source": "src", "destination": "dst", "delivery_guarantee": "exactly_once"},
        {"source": "dst", "destination": "src", "naming": "prefix", "delivery_guarantee": "exactly_once"},
    ]
    status, lines, err = _check(config_data, tmp_path, capsys)
    assert status == 0, (lines, err)
    transactions = [line for line in lines if " transactions on " in line]
    expected = []
    for route, cluster in (("src.dst", "dst"), ("dst.src", "src")):
        brokers = len(kafka_clients.admin(parse_config(config_data).clusters[cluster]).list_topics(timeout=10).brokers)
        # The local stack's brokers: one replica and a min.isr of 1 for __transaction_state.
        settings = (
            "transaction.state.log.replication.factor=1, transaction.state.log.min.isr=1 on "
            f"{brokers} broker{'s' if brokers != 1 else ''}"
        )
        mark = "ok  " if brokers == 1 else "WARN"
        expected.append(f"{mark}  route {route} transactions on {cluster}: {settings}")
    assert [line.partition(" (set the")[0].partition(": a transaction's")[0] for line in transactions] == expected
    # src, the SASL cluster, is asked for its ACLs; it has no authorizer, so they cannot be described.
    assert [line for line in lines if "transactional-id ACLs" in line] == [
        line for line in lines if line.startswith("----  route dst.src transactional-id ACLs on src: not checked: ")
    ]
    assert len([line for line in lines if "transactional-id ACLs" in line]) == 1, lines
    everything = "\n".join([*lines, err, caplog.text])
    assert PASSWORD not in everything and "Traceback" not in everything
