"""common.zk_layout.connect: the deadline, the stop event, and a client left with no thread."""

from __future__ import annotations

import itertools
import threading

import pytest
from kazoo.protocol.states import KeeperState

from ferry.common.config import ZookeeperConfig
from ferry.common.errors import UnreachableError
from ferry.common.zk.layout import connect, given_up, make_client
from ferry.devstack.stack import Stack

CLOSED = ZookeeperConfig(connect="127.0.0.1:1", retry_deadline_s=30)


def test_an_unreachable_ensemble_raises_at_the_deadline_and_leaves_the_client_closed() -> None:
    client = make_client(CLOSED)
    ticks = itertools.chain([0.0, 1.0], itertools.repeat(31.0))  # the deadline passes on the third look
    with pytest.raises(
        UnreachableError,
        match=r"cannot reach ZooKeeper at 127\.0\.0\.1:1 within "
        r"zookeeper\.retry_deadline_s \(30 s\)",
    ):
        connect(client, CLOSED, clock=lambda: next(ticks))
    assert client.client_state == KeeperState.CLOSED and given_up(client)


def test_a_stop_while_connecting_returns_false_at_once() -> None:
    client = make_client(CLOSED)
    stop = threading.Event()
    stop.set()
    assert connect(client, CLOSED, stop) is False
    assert given_up(client)


def test_a_reachable_ensemble_connects(local_stack: Stack) -> None:
    config = ZookeeperConfig(connect=local_stack.zookeeper.address, retry_deadline_s=10)
    client = make_client(config)
    try:
        assert connect(client, config, threading.Event()) is True
        assert client.connected and not given_up(client)
    finally:
        client.stop()
        client.close()
