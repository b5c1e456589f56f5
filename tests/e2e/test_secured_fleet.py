"""A fleet on secured servers: real `ferry controller` and `ferry worker` processes mirror between
the local stack's SASL_SSL listeners (SCRAM-SHA-512, TLS with the stack's CA), with ZooKeeper
digest authentication and ACLs that let nobody else read or change Ferry's state. Every secret
comes from a `${env:...}` placeholder, and none appears in any process's log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

import pytest
import requests
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from ferry.common.config import load_config
from ferry.common.zk.layout import ZkLayout, make_client
from ferry.devstack import security
from tests.harness.processes import Fleet, RecordLedger, wait_until

PARTITIONS = 4
RECORDS = 5_000


def test_secured_fleet_mirrors_everything_and_nobody_else_touches_its_state(
    fleet: Fleet,
    topic_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Credentials from environment variables: the config file holds no secret.
    monkeypatch.setenv("FERRY_E2E_ZK_DIGEST", "ferry:e2e-zk-s3cret")
    monkeypatch.setenv("FERRY_E2E_KAFKA_PASSWORD", security.SASL_PASSWORD)
    from_env = {"sasl.password": "${env:FERRY_E2E_KAFKA_PASSWORD}"}
    chain_top = fleet.zk_root + "/ferry"  # the root chain (/ferry/prod) is created by Ferry, with its ACL
    fleet.zk_root = chain_top + "/prod"
    fleet.extra = {
        "zookeeper": {"auth": {"digest": "${env:FERRY_E2E_ZK_DIGEST}", "others": "none"}},
        "clusters": {
            "src": {**fleet.stack.secured("src"), **from_env},
            "dst": {**fleet.stack.secured("dst"), **from_env},
        },
    }
    fleet.write_config()
    assert security.SASL_PASSWORD not in fleet.config_path.read_text()
    config = load_config(fleet.config_path)
    layout = ZkLayout(config.zookeeper.root)
    ferry_zk = make_client(config.zookeeper)
    ferry_zk.start(timeout=15)
    anonymous = KazooClient(hosts=fleet.stack.zookeeper.address)
    anonymous.start(timeout=15)
    try:
        topic = topic_name("secured")
        ledger = RecordLedger(
            fleet.stack, topic, PARTITIONS, src=fleet.stack.secured("src"), dst=fleet.stack.secured("dst")
        )
        ledger.create_source_topic()
        ledger.produce(RECORDS)
        controller = fleet.start_controller("c1")
        worker = fleet.start_worker("w1")
        fleet.wait_for_leader(controller)
        fleet.wait_for_workers(controller, {"w1"})
        response = requests.post(f"{controller.url}/topics", json={"topic": topic}, timeout=10)
        assert response.status_code == 201, response.text
        wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == PARTITIONS, 60, "all partitions ONLINE")

        # The demo's record checks: every record there, same key/value/headers/timestamp/partition, in order.
        ledger.wait_for_destination(timeout=120)
        assert ledger.check(allow_duplicates=False)["records"] == RECORDS

        # Every node Ferry created, from the first of the root chain down, carries Ferry's ACL.
        nodes = [chain_top]
        for path in nodes:  # grows while walking
            nodes.extend(f"{path}/{child}" for child in ferry_zk.get_children(path))
        assert layout.live_worker("w1") in nodes and layout.topic("src.dst", topic) in nodes
        wrong = {path: acl for path in nodes if (acl := ferry_zk.get_acls(path)[0]) != ferry_zk.default_acl}
        assert not wrong, wrong

        # Without the credentials: no reading (others: none), no changing.
        for attempt in (
            lambda: anonymous.get(layout.topic("src.dst", topic)),
            lambda: anonymous.get_children(layout.live_workers),
            lambda: anonymous.set(layout.assignment("w1"), b'{"generation": 99, "partitions": []}'),
            lambda: anonymous.create(layout.live_worker("intruder"), b"{}", ephemeral=True),
            lambda: anonymous.delete(layout.live_worker("w1")),
            lambda: anonymous.delete(layout.topic("src.dst", topic)),
        ):
            with pytest.raises(NoAuthError):
                attempt()

        # `ferry zk` with the credentials (from the same environment variable) reads it all.
        inspected = subprocess.run(
            [sys.executable, "-m", "ferry.cli", "zk", "external", topic, "--config", str(fleet.config_path), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert inspected.returncode == 0, inspected.stderr
        states = {entry["state"] for entry in json.loads(inspected.stdout)["external"].values()}
        assert states == {"ONLINE"}
        assert controller.alive() and worker.alive()
        for process in fleet.processes:
            log = process.log.read_text(errors="replace")
            for secret in (security.SASL_PASSWORD, "e2e-zk-s3cret"):
                assert secret not in log, f"a secret appears in {process.name}'s log"
    finally:
        fleet.stop_all()
        if ferry_zk.exists(chain_top):
            ferry_zk.delete(chain_top, recursive=True)  # the chroot fixture's anonymous cleanup may not
        ferry_zk.stop()
        ferry_zk.close()
        anonymous.stop()
        anonymous.close()
