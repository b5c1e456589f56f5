"""The distribution tree's switches against the local stack's ZooKeeper: a fenced write like every leader write.

The controller's parts are built on this test's chroot without a campaign: the test plays the
election by creating (and deleting) the leader's election node, the fence every write checks.
"""

from __future__ import annotations

import time

import pytest
from kazoo.client import KazooClient

from ferry.common.config import FerryConfig, parse_config
from ferry.common.model import encode
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import NotLeader
from ferry.controller.kafka_meta import ClusterMetadata
from ferry.controller.lead.leadership import LEADING, Leadership
from ferry.controller.lead.store import Store
from ferry.controller.tree.control import TreeControl

LAYOUT = ZkLayout("/")
DISTRIBUTOR = "a.L2"  # copies from a into the subtree (b, c)


def _config() -> FerryConfig:
    return parse_config(
        {
            "zookeeper": {"connect": "unused", "root": "/"},
            # Never asked: switches do not probe the clusters.
            "clusters": {name: {"bootstrap.servers": "127.0.0.1:1"} for name in ("a", "b", "c")},
            "tree": {"layout": "(a,(b,c))", "include": [".*"]},
        }
    )


def _tree_control(zk: KazooClient) -> tuple[TreeControl, Leadership]:
    config = _config()
    store = Store(zk, LAYOUT)
    leadership = Leadership(zk=zk, layout=LAYOUT, store=store, controller_id="c1", rest_url="http://c1")
    tree = TreeControl(
        config=config,
        zk=zk,
        layout=LAYOUT,
        leadership=leadership,
        kafka=ClusterMetadata(config.clusters),
        clock=time.time,
    )
    return tree, leadership


def _lead(zk: KazooClient, leadership: Leadership) -> str:
    """Makes ``leadership`` lead with a fresh election node of its own; returns the node (its fence)."""
    zk.ensure_path(LAYOUT.election)
    fence: str = zk.create(f"{LAYOUT.election}/n_", b"", sequence=True)
    leadership.state, leadership.fence = LEADING, fence
    return fence


def test_a_tree_switch_is_written_only_by_a_controller_that_leads(zk: KazooClient) -> None:
    control, leadership = _tree_control(zk)
    with pytest.raises(NotLeader):
        control.switch_target(DISTRIBUTOR, "c", "a standby's request")
    assert not zk.exists(LAYOUT.tree_targets)

    fence = _lead(zk, leadership)
    assert control.switch_target(DISTRIBUTOR, "c", "b unreachable") == {DISTRIBUTOR: "c"}
    assert control.switched_targets() == ({DISTRIBUTOR: "c"}, 0)

    zk.delete(fence)  # its session expired: another controller may lead now, this one does not know yet
    with pytest.raises(NotLeader):
        control.switch_target(DISTRIBUTOR, "b", "c unreachable")
    assert control.switched_targets() == ({DISTRIBUTOR: "c"}, 0)


def test_a_tree_switch_that_read_the_targets_before_another_write_reads_them_again(
    zk: KazooClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    control, leadership = _tree_control(zk)
    _lead(zk, leadership)
    control.switch_target(DISTRIBUTOR, "c", "b unreachable")
    zk.set(LAYOUT.tree_targets, encode({DISTRIBUTOR: "c", "b.L1": "c"}))  # another write, version 1
    read = control.switched_targets
    stale = [({DISTRIBUTOR: "c"}, 0)]  # what a switch racing that write read before it
    monkeypatch.setattr(control, "switched_targets", lambda: stale.pop() if stale else read())

    assert control.switch_target(DISTRIBUTOR, "b", "c unreachable") == {DISTRIBUTOR: "b", "b.L1": "c"}
    assert not stale
    assert control.switched_targets() == ({DISTRIBUTOR: "b", "b.L1": "c"}, 2)
