"""ZooKeeper over TLS: Ferry's client against the local stack's TLS port, and a CA that does not fit."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.common.config import ZookeeperConfig, ZookeeperTlsConfig
from ferry.common.errors import ConfigError
from ferry.common.zk.layout import connect, make_client
from ferry.controller.commands.check import zookeeper_result
from ferry.devstack import processes, security
from ferry.devstack import stack as devstack

# A ZooKeeper of these tests' own when the shared one was started without its TLS port.
OWN_PORT = int(os.environ.get("FERRY_TEST_ZK_TLS_OWN_PORT", "21870"))


@pytest.fixture(scope="module")
def tls_zookeeper(local_stack: devstack.Stack) -> Iterator[devstack.Server]:
    """A ZooKeeper of the local stack that serves TLS: the shared one when it does, else one of
    these tests' own (the shared one is never restarted), stopped afterwards."""
    shared = local_stack.zookeeper
    if f"secureClientPort={shared.tls_port}" in shared.config_file.read_text():
        yield shared
        return
    own = devstack.Stack(
        zookeeper=devstack.Server(name="zookeeper-tls", kind="zookeeper", port=OWN_PORT, tls=True),
        src=local_stack.src,
        dst=local_stack.dst,
    )
    started = processes.up(own, deadline_s=120)
    try:
        yield own.zookeeper
    finally:
        if "zookeeper-tls" in started:
            processes.down(own, names=["zookeeper-tls"])


def tls_config(server: devstack.Server, **tls: Any) -> ZookeeperConfig:
    return ZookeeperConfig(
        connect=server.tls_address,
        retry_deadline_s=15,
        tls=ZookeeperTlsConfig(**{"ca_location": str(security.ca_file()), **tls}),
    )


def test_a_client_trusting_the_stacks_ca_reads_and_writes(tls_zookeeper: devstack.Server, topic_name: Any) -> None:
    config = tls_config(tls_zookeeper)
    client = make_client(config)
    path = f"/ferry-tests/{topic_name('tls')}"
    try:
        assert connect(client, config, threading.Event()) is True
        client.create(path, b"over tls", makepath=True)
        assert client.get(path)[0] == b"over tls"
        client.delete(path)
    finally:
        client.stop()
        client.close()


def test_a_client_certificate_signed_by_the_ca_is_accepted(tls_zookeeper: devstack.Server) -> None:
    tls = security.tls_dir()
    config = tls_config(
        tls_zookeeper, certificate_location=str(tls / "broker.pem"), key_location=str(tls / "broker.key")
    )
    client = make_client(config)
    try:
        assert connect(client, config, threading.Event()) is True
        assert client.get_children("/") is not None
    finally:
        client.stop()
        client.close()


def _other_ca(tmp_path: Path) -> Path:
    """A CA of its own, which did not sign the local stack's certificates."""
    other_ca = tmp_path / "other-ca.pem"
    key = str(tmp_path / "other-ca.key")
    subject = "/CN=not the local stack's CA"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            key,
            "-out",
            str(other_ca),
            "-subj",
            subject,
        ],
        check=True,
        capture_output=True,
    )
    return other_ca


def test_a_ca_that_did_not_sign_the_server_is_one_config_error(tls_zookeeper: devstack.Server, tmp_path: Path) -> None:
    config = tls_config(tls_zookeeper, ca_location=str(_other_ca(tmp_path)))
    client = make_client(config)
    with pytest.raises(ConfigError) as caught:
        connect(client, config, threading.Event())
    message = str(caught.value)
    assert message.startswith(f"ZooKeeper at {tls_zookeeper.tls_address}: its TLS certificate is refused")
    assert "\n" not in message


def test_ferry_check_connect_names_a_refused_certificate_in_its_zookeeper_line(
    tls_zookeeper: devstack.Server, tmp_path: Path
) -> None:
    refused = zookeeper_result(tls_config(tls_zookeeper, ca_location=str(_other_ca(tmp_path))), 5)
    assert refused.ok is False
    assert refused.detail.startswith(f"ZooKeeper at {tls_zookeeper.tls_address}: its TLS certificate is refused")
    trusted = zookeeper_result(tls_config(tls_zookeeper), 5)
    assert trusted.ok is True, trusted.detail
