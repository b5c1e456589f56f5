"""A worker whose copy loop stood still past the session timeout (SIGSTOP) confirms its session before it copies
again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import SessionExpiredError

from ferry.common.config import parse_config
from ferry.common.vocabulary import WorkerState
from ferry.worker.service import Worker
from tests.fakes import FakeClock


class FakeZk:
    """Only what the standstill check asks: our session id and the live node's owner."""

    def __init__(self, owner: int | None, fails: bool = False) -> None:
        self.client_id = (7, b"")
        self.owner = owner
        self.fails = fails
        self.asked = 0

    def exists(self, path: str) -> Any:
        self.asked += 1
        if self.fails:
            raise SessionExpiredError()
        return None if self.owner is None else SimpleNamespace(owner_session_id=self.owner)

    def exists_async(self, path: str) -> Any:
        """kazoo's asynchronous form: its answer comes from ``get(timeout)``."""
        return SimpleNamespace(get=lambda timeout: self.exists(path))


def _worker(zk: FakeZk, clock: FakeClock) -> Worker:
    config = parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:1", "session_timeout_s": 4},
            "clusters": {"a": {"bootstrap.servers": "127.0.0.1:1"}, "b": {"bootstrap.servers": "127.0.0.1:1"}},
            "routes": [{"source": "a", "destination": "b"}],
        }
    )
    worker = Worker(config=config, worker_id="w1", metrics_port=0, zk=zk, clock=clock)  # type: ignore[arg-type]
    worker.state = WorkerState.RUNNING
    return worker


@pytest.mark.parametrize(
    ("owner", "fails", "lost"), [(7, False, False), (8, False, True), (None, False, True), (7, True, True)]
)
def test_a_standstill_past_the_session_timeout_asks_zookeeper_once(owner: int | None, fails: bool, lost: bool) -> None:
    zk, clock = FakeZk(owner, fails), FakeClock(100.0)
    worker = _worker(zk, clock)
    worker._confirm_after_standstill()
    clock.now += 3.9  # a pass within the session timeout: no question asked
    worker._confirm_after_standstill()
    assert zk.asked == 0 and not worker._session_lost.is_set()
    clock.now += 4.5  # stood still longer than the session timeout
    worker._confirm_after_standstill()
    assert zk.asked == 1
    assert worker._session_lost.is_set() == lost
