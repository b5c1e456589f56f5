"""controller.lead.reconciler's triggers on a real APScheduler: a trigger during a run waits, never skipped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from ferry.common.config import parse_config
from ferry.common.zk.layout import ZkLayout
from ferry.controller.jobs.scheduler import make_scheduler
from ferry.controller.lead.leadership import LEADING
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.lead.state_lock import LeaderStateLock
from ferry.controller.metrics import ControllerMetrics


class StubLeadership:
    controller_id = "c1"
    state = LEADING
    epoch = 1
    fence = "/controller/election/n_0000000000"

    def require_leader(self) -> None:
        pass

    def lose_lead(self) -> None:
        raise AssertionError("the lead is never lost here")


class StubStore:
    reads = writes = transactions = max_transaction_bytes = max_node_bytes = 0


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def parts() -> Iterator[tuple[Reconciler, ControllerMetrics]]:
    config = parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:1"},
            "clusters": {name: {"bootstrap.servers": "127.0.0.1:1"} for name in ("src", "dst")},
            "routes": [{"source": "src", "destination": "dst"}],
        }
    )
    metrics = ControllerMetrics(cast(Any, StubStore()), lambda: 0)
    scheduler = make_scheduler(metrics)
    scheduler.start()
    reconciler = Reconciler(
        config=config,
        zk=cast(Any, None),
        layout=ZkLayout("/"),
        store=cast(Any, StubStore()),
        leadership=cast(Any, StubLeadership()),
        scheduler=scheduler,
        metrics=metrics,
        clock=time.time,
    )
    try:
        yield reconciler, metrics
    finally:
        scheduler.shutdown(wait=True)


def test_a_trigger_during_a_run_queues_one_run_that_waits_and_is_never_skipped(
    parts: tuple[Reconciler, ControllerMetrics],
) -> None:
    reconciler, metrics = parts
    started, release = threading.Event(), threading.Event()
    runs: list[float] = []

    def reconcile(rebalance: bool = False, by_load: bool = False) -> None:
        runs.append(time.monotonic())
        started.set()
        release.wait(10)

    reconciler.reconcile = reconcile  # type: ignore[assignment,method-assign]
    reconciler.request_reconcile()
    assert started.wait(10), "the first run did not start"
    for _ in range(3):  # a burst during the run: one more run, queued behind the running one
        reconciler.request_reconcile()
    release.set()

    def settled() -> bool:
        return metrics.job_counts().get("reconcile", {}).get("runs", 0) >= 2

    wait_for(settled, 10, "the queued run to run")
    assert len(runs) == 2, f"a burst during a run cost {len(runs) - 1} more runs, not one"
    assert metrics.job_counts()["reconcile"] == {"runs": 2, "failures": 0, "skips": 0}


def test_the_leader_state_lock_hands_over_what_was_whitelisted_only_when_first_taken() -> None:
    taken: list[str] = []
    lock = LeaderStateLock(lambda: taken.append("taken"))
    with lock:
        assert taken == ["taken"]
        with lock:  # inside a holder's work (a reconcile between its plan and its writes): nothing
            assert taken == ["taken"]
    with lock:
        assert taken == ["taken", "taken"]

    def failing() -> None:
        raise RuntimeError("boom")

    broken = LeaderStateLock(failing)
    with pytest.raises(RuntimeError), broken:
        pass
    free: list[bool] = []
    other = threading.Thread(target=lambda: free.append(broken._lock.acquire(blocking=False)))
    other.start()
    other.join()
    assert free == [True]  # released after the failure: another thread takes it
