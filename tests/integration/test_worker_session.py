"""The worker's ZooKeeper session against a real ZooKeeper: what the copy loop learns about its live node."""

from __future__ import annotations

import threading
import time

from kazoo.client import KazooClient

from ferry.common.model import WorkerInfo
from ferry.devstack.support import poll_until
from ferry.worker.session import ZkSession

LIVE = "/workers/live/w1"


def test_a_live_node_deleted_again_right_after_it_was_recreated_is_found_gone_by_the_check(zk: KazooClient) -> None:
    """The watch reports the first deletion. A node re-created and deleted again before the watch read it
    may pass the watch unseen; the copy loop's periodic check finds it gone all the same."""
    wake = threading.Event()
    session = ZkSession(zk=zk, live_path=LIVE, session_timeout_s=10.0, clock=time.monotonic, wake=wake)
    assert session.create_live_node(WorkerInfo("w1", "host", 1, None), threading.Event())
    session.watch_live_node()
    session.check_live_node()
    assert not session.live_node_gone.is_set()

    zk.delete(LIVE)
    poll_until(session.live_node_gone.is_set, 10, "the watch to report the deleted live node")
    session.live_node_gone.clear()

    zk.create(LIVE, b"", makepath=True)
    zk.delete(LIVE)
    session.check_live_node()
    assert session.live_node_gone.is_set()
