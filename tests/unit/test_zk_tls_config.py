"""zookeeper.tls: the section, and the TLS arguments Ferry's kazoo clients get from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ferry.common.config import ZookeeperConfig, parse_config
from ferry.common.errors import ConfigError
from ferry.common.zk.layout import make_client

BASE: dict[str, Any] = {
    "clusters": {"src": {"bootstrap.servers": "a:1"}, "dst": {"bootstrap.servers": "b:1"}},
    "routes": [{"source": "src", "destination": "dst"}],
}


def zk(tls: dict[str, Any] | None) -> ZookeeperConfig:
    section: dict[str, Any] = {"connect": "127.0.0.1:2182"}
    if tls is not None:
        section["tls"] = tls
    return parse_config({**BASE, "zookeeper": section}).zookeeper


@pytest.fixture
def pems(tmp_path: Path) -> dict[str, str]:
    files = {name: tmp_path / f"{name}.pem" for name in ("ca", "cert", "key")}
    for path in files.values():
        path.write_text("-----BEGIN CERTIFICATE-----\n")  # only read by kazoo when it connects
    return {name: str(path) for name, path in files.items()}


def test_off_by_default_and_the_client_then_speaks_plaintext() -> None:
    config = zk(None)
    assert config.tls is None
    assert make_client(config).use_ssl is False


def test_the_client_gets_the_ca_and_checks_certificates_and_hostname(pems: dict[str, str]) -> None:
    client = make_client(zk({"ca_location": pems["ca"]}))
    assert client.use_ssl is True and client.ca == pems["ca"]
    assert client.verify_certs is True and client.check_hostname is True
    assert client.certfile is None and client.keyfile is None and client.keyfile_password is None


def test_a_client_certificate_with_its_key_and_password(pems: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TEST_ZK_KEY_PASSWORD", "k3y-secret")
    tls = {
        "ca_location": pems["ca"],
        "certificate_location": pems["cert"],
        "key_location": pems["key"],
        "key_password": "${env:FERRY_TEST_ZK_KEY_PASSWORD}",
        "check_hostname": False,
    }
    config = zk(tls)
    assert "k3y-secret" not in repr(config) and "k3y-secret" not in str(config.model_dump())
    client = make_client(config)
    assert (client.certfile, client.keyfile, client.keyfile_password) == (pems["cert"], pems["key"], "k3y-secret")
    assert client.check_hostname is False and client.verify_certs is True


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        ({}, "zookeeper.tls.ca_location: Field required"),
        ({"ca_location": "ca.pem", "cafile": "x"}, "zookeeper.tls.cafile: Extra inputs are not permitted"),
        ({"ca_location": "ca.pem", "certificate_location": "c.pem"}, "give both or neither"),
        ({"ca_location": "ca.pem", "key_location": "k.pem"}, "give both or neither"),
    ],
)
def test_section_problems_are_config_errors(tls: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        zk(tls)


def test_an_unreadable_file_is_a_config_error_naming_the_key_and_the_path(pems: dict[str, str], tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere" / "client.key")
    config = zk({"ca_location": pems["ca"], "certificate_location": pems["cert"], "key_location": missing})
    with pytest.raises(ConfigError) as caught:
        make_client(config)
    assert str(caught.value) == f"zookeeper.tls.key_location: cannot read {missing}: No such file or directory"
