"""`ferry zk`: reads a layout written by hand into this test's own ZooKeeper chroot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from kazoo.client import KazooClient

from ferry.cli import main
from ferry.common.model import ExternalView, IdealState, WorkerInfo
from ferry.common.zk.layout import ZkLayout

ROUTE = "src.dst"


@pytest.fixture
def config_file(zk_chroot: str, tmp_path: Path) -> Path:
    connect, root = zk_chroot.split("/", 1)
    path = tmp_path / "ferry.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": connect, "root": "/" + root},
                "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
                "routes": [{"source": "src", "destination": "dst"}],
            }
        )
    )
    return path


@pytest.fixture
def layout(zk: KazooClient) -> ZkLayout:
    # The zk fixture is chrooted, so the layout's root is "/" from its point of view.
    chrooted = ZkLayout("/")
    for path in chrooted.persistent_paths():
        zk.ensure_path(path)
    zk.create(chrooted.live_worker("w1"), WorkerInfo("w1", "host", 1).to_bytes(), ephemeral=True)
    zk.create(
        chrooted.route_topics(ROUTE) + "/orders",
        IdealState(ROUTE, "orders", 3, {0: "w1", 1: "w1", 2: "w2"}).to_bytes(),
        makepath=True,
    )
    zk.create(
        chrooted.route_external(ROUTE) + "/orders",
        ExternalView(
            ROUTE,
            "orders",
            {
                0: {"worker": "w1", "state": "ONLINE"},
                1: {"worker": "w1", "state": "ERROR", "reason": "MSG_SIZE_TOO_LARGE"},
            },
        ).to_bytes(),
        makepath=True,
    )
    return chrooted


def test_tree_shows_every_node_with_size_version_and_data(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "--config", str(config_file), "--json", "tree"]) == 0
    nodes = {Path(n["path"]).name: n for n in json.loads(capsys.readouterr().out)}
    assert nodes["w1"]["ephemeral"] is True
    assert nodes["orders"]["data"]["partitions"] == 3
    assert nodes["orders"]["version"] == 0 and nodes["orders"]["size"] > 0

    assert main(["zk", "--config", str(config_file), "tree"]) == 0
    text = capsys.readouterr().out
    assert "PATH" in text and "/workers/live/w1" in text and "yes" in text


def test_get_decodes_one_node_and_names_a_missing_one(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "--config", str(config_file), "get", "workers/live/w1"]) == 0
    out = capsys.readouterr().out
    assert "ephemeral" in out and '"host": "host"' in out
    assert main(["zk", "--config", str(config_file), "get", "no/such/node"]) == 2
    assert "no node at" in capsys.readouterr().err


def test_ideal_and_external_print_per_partition(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "--config", str(config_file), "ideal", "orders"]) == 0
    out = capsys.readouterr().out
    assert "src.dst/orders: 3 partitions" in out and "w2" in out
    assert main(["zk", "--config", str(config_file), "--json", "external", "orders"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["external"]["1"]["reason"] == "MSG_SIZE_TOO_LARGE"
    assert main(["zk", "--config", str(config_file), "ideal", "unknown-topic"]) == 2
    assert "not mirrored" in capsys.readouterr().err


def test_diff_lists_disagreements_and_exits_1(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "--config", str(config_file), "--json", "diff"]) == 1
    problems = {(m["partition"], m["problem"]) for m in json.loads(capsys.readouterr().out)}
    # p1 is in ERROR; p2's worker w2 is not live.
    assert ("src.dst/orders/1", "error") in problems
    assert ("src.dst/orders/2", "worker_dead") in problems
    assert not any(p == "src.dst/orders/0" for p, _ in problems)


def test_options_after_the_action_are_accepted(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    # Regression: `ferry zk ideal T --config F` was once refused (options only before the action).
    assert main(["zk", "ideal", "orders", "--config", str(config_file), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ideal"]["2"] == "w2"


def test_a_renaming_route_shows_the_destination_topic(
    zk_chroot: str, tmp_path: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    # With prefix or template naming, every view of a route's topic names its copy too.
    connect, root = zk_chroot.split("/", 1)
    renaming = tmp_path / "renaming.yaml"
    renaming.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": connect, "root": "/" + root},
                "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
                "routes": [{"source": "src", "destination": "dst", "naming": "prod-{topic}"}],
            }
        )
    )
    config = ["--config", str(renaming)]
    assert main(["zk", *config, "ideal", "orders"]) == 0
    assert "src.dst/orders (destination prod-orders): 3 partitions" in capsys.readouterr().out
    assert main(["zk", *config, "--json", "external", "orders"]) == 0
    assert json.loads(capsys.readouterr().out)["destination"] == "prod-orders"

    assert main(["zk", *config, "--json", "tree"]) == 0
    by_path = {n["path"].removeprefix("/" + root): n for n in json.loads(capsys.readouterr().out)}
    assert by_path["/topics/src.dst/orders"]["destination"] == "prod-orders"
    assert by_path["/external/src.dst/orders"]["destination"] == "prod-orders"
    assert "destination" not in by_path["/workers/live/w1"]
    assert main(["zk", *config, "tree"]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert "DESTINATION" in header and any("/topics/src.dst/orders" in line and "prod-orders" in line for line in lines)

    assert main(["zk", *config, "--json", "diff"]) == 1
    assert {m["destination"] for m in json.loads(capsys.readouterr().out)} == {"prod-orders"}
    assert main(["zk", *config, "diff"]) == 1
    header = capsys.readouterr().out.splitlines()[0]
    assert "DESTINATION" in header


def test_identity_naming_adds_no_destination_column(
    config_file: Path, layout: ZkLayout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["zk", "--config", str(config_file), "tree"]) == 0
    assert "DESTINATION" not in capsys.readouterr().out
    assert main(["zk", "--config", str(config_file), "ideal", "orders"]) == 0
    assert "(destination" not in capsys.readouterr().out
