"""zookeeper.auth: where the digest comes from, and the ACL it puts on Ferry's nodes."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from kazoo.protocol.serialization import Auth
from kazoo.security import ACL, Id, Permissions, make_digest_acl_credential

from ferry.common.config import ZookeeperConfig, parse_config
from ferry.common.errors import ConfigError
from ferry.common.zk.layout import ferry_acl, make_client

BASE: dict[str, Any] = {
    "clusters": {"src": {"bootstrap.servers": "a:1"}, "dst": {"bootstrap.servers": "b:1"}},
    "routes": [{"source": "src", "destination": "dst"}],
}


def zk(auth: dict[str, Any] | None) -> ZookeeperConfig:
    section: dict[str, Any] = {"connect": "127.0.0.1:2181"}
    if auth is not None:
        section["auth"] = auth
    return parse_config({**BASE, "zookeeper": section}).zookeeper


def test_off_by_default_and_the_client_then_sets_no_acl() -> None:
    config = zk(None)
    assert config.auth is None
    client = make_client(config)
    assert client.auth_data == set() and client.default_acl is None


def test_digest_in_the_file_is_never_printed() -> None:
    config = zk({"digest": "ferry:s3cret"})
    assert config.auth is not None and config.auth.credentials() == ("ferry", "s3cret")
    assert "s3cret" not in repr(config) and "s3cret" not in str(config.model_dump())


def test_digest_from_a_file_or_an_environment_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "zk-digest"
    secret.write_text("ferry:from-file\n")
    from_file = zk({"digest": f"${{file:{secret}}}"}).auth
    assert from_file is not None and from_file.credentials() == ("ferry", "from-file")
    monkeypatch.setenv("FERRY_TEST_ZK_DIGEST", "ferry:from:env")
    from_env = zk({"digest": "${env:FERRY_TEST_ZK_DIGEST}", "others": "none"}).auth
    assert from_env is not None and from_env.credentials() == ("ferry", "from:env")
    assert "from:env" not in repr(from_env)


@pytest.mark.parametrize(
    ("auth", "message"),
    [
        ({}, "zookeeper.auth.digest: Field required"),
        ({"digest": "a:b", "digest_env": "X"}, "zookeeper.auth.digest_env: Extra inputs are not permitted"),
        ({"digest": "no-colon"}, "must be user:password"),
        ({"digest": ":password"}, "must be user:password"),
        ({"digest": "a:b", "others": "write"}, "zookeeper.auth.others"),
    ],
)
def test_bad_auth_sections_are_named(auth: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        zk(auth)
    assert "no-colon" not in str(raised.value)


def test_unusable_placeholders_are_config_errors_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FERRY_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError, match=r"zookeeper.auth.digest: .*FERRY_TEST_UNSET is not set"):
        zk({"digest": "${env:FERRY_TEST_UNSET}"})
    with pytest.raises(ConfigError, match=r"zookeeper.auth.digest: .*cannot read"):
        zk({"digest": f"${{file:{tmp_path / 'missing'}}}"})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match=r"zookeeper.auth.digest: .*must be user:password"):
        zk({"digest": f"${{file:{tmp_path / 'empty'}}}"})


@pytest.mark.parametrize("others", ["read", "none"])
def test_ferrys_identity_may_do_everything_others_read_or_nothing(others: str) -> None:
    config = zk({"digest": "ferry:s3cret", "others": others})
    assert config.auth is not None
    ferry = ACL(Permissions.ALL, Id("digest", make_digest_acl_credential("ferry", "s3cret")))
    anyone_reads = ACL(Permissions.READ, Id("world", "anyone"))
    expected = [ferry, anyone_reads] if others == "read" else [ferry]
    assert ferry_acl(config.auth, "ferry", "s3cret") == expected
    client = make_client(config)
    assert client.default_acl == expected and client.auth_data == {("digest", "ferry:s3cret")}


def test_kazoos_debug_line_for_the_auth_request_hides_the_digest(caplog: pytest.LogCaptureFixture) -> None:
    make_client(zk({"digest": "ferry:s3cret"}))  # installs the filter on kazoo's loggers
    caplog.set_level(logging.DEBUG, logger="kazoo.client")
    logging.getLogger("kazoo.client").debug("Sending request(xid=%s): %s", None, Auth(0, "digest", "ferry:s3cret"))
    assert "Sending request" in caplog.text and "s3cret" not in caplog.text
