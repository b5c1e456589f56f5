"""The layout marker against a real ZooKeeper: a controller writes it on a new root, and a controller,
a worker or ``ferry failover`` started on a root that a newer Ferry wrote exits with one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from ferry.common.model import LAYOUT_VERSION, LayoutMarker
from ferry.common.zk.layout import ZkLayout
from ferry.devstack.stack import Stack
from ferry.devstack.support import ferry_command, fleet_config, free_port, poll_until, spawn, stop_all

LAYOUT = ZkLayout("/")


def _config_file(tmp_path: Path, local_stack: Stack, zk_chroot: str) -> Path:
    config = fleet_config(local_stack, "/")
    config["zookeeper"]["connect"] = zk_chroot
    config["controller"] = {"rest_host": "127.0.0.1", "rest_port": free_port()}
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_controller_writes_the_marker_on_a_new_root(
    tmp_path: Path, local_stack: Stack, zk_chroot: str, zk: KazooClient
) -> None:
    config = _config_file(tmp_path, local_stack, zk_chroot)
    controller = spawn("controller", ferry_command("controller", "--config", str(config)), tmp_path / "c.log")
    try:
        poll_until(lambda: zk.exists(LAYOUT.layout_marker), 60, "the layout marker", interval=0.1)
    finally:
        stop_all([controller])
    marker = LayoutMarker.from_bytes(zk.get(LAYOUT.layout_marker)[0])
    assert marker is not None and marker.version == LAYOUT_VERSION


@pytest.mark.parametrize(
    "command",
    [
        ["controller", "--rest-port", "0"],
        ["worker", "--id", "w1", "--metrics-port", "0"],
        ["failover", "--route", "src.dst", "--planned"],
    ],
    ids=["controller", "worker", "failover"],
)
def test_a_root_written_by_a_newer_ferry_is_refused_with_one_line(
    tmp_path: Path, local_stack: Stack, zk_chroot: str, zk: KazooClient, command: list[str]
) -> None:
    zk.create(LAYOUT.layout_marker, LayoutMarker(LAYOUT_VERSION + 1, "9.0.0").to_bytes())
    config = _config_file(tmp_path, local_stack, zk_chroot)
    done = subprocess.run(ferry_command(*command, "--config", str(config)), capture_output=True, text=True, timeout=120)
    lines = [line for line in done.stderr.splitlines() if line.startswith("ferry:")]
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"layout version {LAYOUT_VERSION + 1}" in lines[0] and "9.0.0" in lines[0]
    # Nothing was written under the root: the marker is still the newer Ferry's, and no worker registered.
    assert LayoutMarker.from_bytes(zk.get(LAYOUT.layout_marker)[0]) == LayoutMarker(LAYOUT_VERSION + 1, "9.0.0")
    assert not zk.exists(LAYOUT.live_worker("w1"))
