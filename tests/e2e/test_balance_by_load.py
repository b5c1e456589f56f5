"""Balance by measured load on a skewed workload, against balance by count in the same test.

Three workers mirror four topics of eight partitions; one topic carries about 80 % of the bytes,
on the three of its partitions that the count-based planner gives one worker (hot keys that hash
there: the case load balancing exists for). The same workload runs twice, on fresh topics: first
with ``controller.balance: count``, then with ``load``. Each phase measures, over one window, the
bytes/s each worker copied (from its own ``ferry_worker_bytes_copied`` counter) and the hot topic's
end-to-end lag (source log-end minus destination log-end, sampled).

A worker's capacity is finite; on a shared test machine it is made so on purpose: the route's
throttle (``max_bytes_per_s``). Under balance by count the leader splits it over the workers by
their share of the route's partitions, which lets each worker copy about 4 MB/s: one worker is left
about 5.3 MB/s of the 6 MB/s produced, so its hot partitions fall behind. Under balance by load the
leader splits it by each worker's measured demand, and the budget is only about 1.3 times what is
produced: the planner spreads the hot partitions, each worker copies about 2 MB/s with a share a
little above that, and once the catch-up after the moves is over the lag stays near zero. The
balanced state is then the assignment left alone for two load-balance runs (a run just after the
catch-up may still trim what the catch-up's rates showed), and the measured window counts no move:
a throttle split that starved a worker would make it look light, then busy, and partitions would
move on and on."""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import stack as devstack
from ferry.devstack.support import WaitTimeout, create_topics, end_offsets
from tests.harness.processes import FerryProcess, Fleet, wait_until

pytestmark = pytest.mark.e2e

PARTITIONS = 8
WORKERS = ("w1", "w2", "w3")
HOT_SHARE = 0.8
RECORDS_PER_S = 6000  # all topics together; values of 1 KiB
VALUE = b"x" * 1024
WINDOW_S = 15.0
LOAD_REBALANCE_INTERVAL_S = 6
COUNT_ROUTE_BYTES_PER_S = 12_000_000  # about 4 MB/s a worker by partition count: see the module docstring
LOAD_ROUTE_BYTES_PER_S = 8_000_000  # about 1.3 times the 6 MB/s produced, split by demand
CAUGHT_UP_RECORDS = 2000  # the hot partitions' lag once a move's catch-up is over (under 0.5 s of their records)


@dataclasses.dataclass
class Phase:
    worker_bytes_per_s: dict[str, float]
    hot_lag: float  # mean records not yet at the destination, over the hot partitions
    moves: int  # partitions the ideal states gave another worker during the window

    @property
    def max_over_mean(self) -> float:
        return max(self.worker_bytes_per_s.values()) / statistics.mean(self.worker_bytes_per_s.values())


class SkewedProducer:
    """Produces steadily: HOT_SHARE of the records to ``hot`` partitions, the rest over ``cold`` ones."""

    def __init__(self, stack: devstack.Stack, hot: list[tuple[str, int]], cold: list[tuple[str, int]]) -> None:
        self._producer = kafka_clients.producer({"bootstrap.servers": stack.bootstrap("src")}, **{"linger.ms": 10})
        self._hot, self._cold = hot, cold
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="skewed-producer", daemon=True)

    def _run(self) -> None:
        tick = 0.05
        per_tick = int(RECORDS_PER_S * tick)
        hot_per_tick = int(per_tick * HOT_SHARE)
        sent = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for i in range(per_tick):
                targets = self._hot if i < hot_per_tick else self._cold
                topic, partition = targets[(sent + i) % len(targets)]
                while True:
                    try:
                        self._producer.produce(topic, VALUE, partition=partition)
                        break
                    except BufferError:
                        self._producer.poll(0.05)
            sent += per_tick
            self._producer.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - started)))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(30)


def _bytes_copied(worker: FerryProcess) -> float:
    text = requests.get(f"{worker.url}/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "ferry_worker_bytes_copied"
        for sample in family.samples
        if sample.name == "ferry_worker_bytes_copied_total"
    )


def _hot_lag(hot: list[tuple[str, int]], src: AdminClient, dst: AdminClient) -> int:
    topic = hot[0][0]
    source, destination = end_offsets(src, topic), end_offsets(dst, topic)
    return sum(source[p] - destination.get(p, 0) for _, p in hot)


def _measure(
    workers: dict[str, FerryProcess],
    hot: list[tuple[str, int]],
    src: AdminClient,
    dst: AdminClient,
    owners: Callable[[], dict[tuple[str, int], str]],
) -> Phase:
    before = {name: _bytes_copied(w) for name, w in workers.items()}
    started = time.monotonic()
    lags: list[int] = []
    moves = 0
    seen = owners()
    while time.monotonic() - started < WINDOW_S:
        lags.append(_hot_lag(hot, src, dst))
        now = owners()
        moves += sum(1 for partition, worker in now.items() if seen.get(partition, worker) != worker)
        seen = now
        time.sleep(0.5)  # the sampling interval of a window of fixed length, not a wait for any logic
    elapsed = time.monotonic() - started
    after = {name: _bytes_copied(w) for name, w in workers.items()}
    return Phase({name: (after[name] - before[name]) / elapsed for name in workers}, statistics.mean(lags), moves)


class Settling:
    """A condition to wait on: the assignment ``owners`` gives has not changed for ``quiet_s``."""

    def __init__(self, owners: Callable[[], dict[tuple[str, int], str]], quiet_s: float) -> None:
        self._owners, self._quiet_s = owners, quiet_s
        self._seen, self._since = owners(), time.monotonic()

    def settled(self) -> bool:
        now = self._owners()
        if now != self._seen:
            self._seen, self._since = now, time.monotonic()
        return time.monotonic() - self._since >= self._quiet_s


def _run_phase(
    local_stack: devstack.Stack, root: str, workdir: Path, balance: str, names: Callable[[str], str]
) -> Phase:
    workdir.mkdir()
    fleet = Fleet(
        stack=local_stack,
        zk_root=root,
        workdir=workdir,
        extra={
            "controller": {
                "balance": balance,
                "load_rebalance_interval_s": LOAD_REBALANCE_INTERVAL_S,
                "imbalance_ratio": 1.1,
                "load_balance_min_bytes_per_s": 10_000,
            },
            "worker": {"commit_interval_s": 0.5, "load_report_interval_s": 3},
            # The same throttle, split by partition count under count and by measured demand under load.
            "routes": [
                {
                    "source": "src",
                    "destination": "dst",
                    "max_bytes_per_s": COUNT_ROUTE_BYTES_PER_S if balance == "count" else LOAD_ROUTE_BYTES_PER_S,
                }
            ],
        },
    )
    topics = [names(f"{prefix}-{balance}") for prefix in ("a-hot", "b-cold", "c-cold", "d-cold")]
    src = kafka_clients.admin({"bootstrap.servers": local_stack.bootstrap("src")})
    dst = kafka_clients.admin({"bootstrap.servers": local_stack.bootstrap("dst")})
    create_topics(src, [NewTopic(t, PARTITIONS, 1) for t in topics])
    producer = None
    try:
        controller = fleet.start_controller("c1")
        workers = {name: fleet.start_worker(name) for name in WORKERS}
        fleet.wait_for_leader(controller)
        fleet.wait_for_workers(controller, set(WORKERS))
        response = requests.post(
            f"{controller.url}/topics", json={"topics": [{"topic": t} for t in topics]}, timeout=30
        )
        assert response.status_code in (200, 201), response.text
        for t in topics:
            wait_until(lambda t=t: len(fleet.online_by_worker(controller, t)) == PARTITIONS, 60, f"{t} ONLINE")
        # The hot keys hash to the hot topic's partitions that one worker holds (the planners start alike).
        ideal = {int(p): w for p, w in fleet.topic_view(controller, topics[0])["idealState"].items()}
        busiest = max(WORKERS, key=lambda w: (sum(1 for v in ideal.values() if v == w), w))
        hot = [(topics[0], p) for p, w in sorted(ideal.items()) if w == busiest][:3]
        cold = [(t, p) for t in topics[1:] for p in range(PARTITIONS)]
        producer = SkewedProducer(local_stack, hot, cold)
        producer.start()

        def owners() -> dict[tuple[str, int], str]:
            return {(t, int(p)): w for t in topics for p, w in fleet.topic_view(controller, t)["idealState"].items()}

        if balance == "load":
            # Load reports, then load-balance runs move hot partitions until each worker holds one:
            # with two on one worker, its load is still 1.6 times the mean. A run may move only one
            # (its reports from before the first move), so this waits for the end state, not a first move.
            def spread() -> bool:
                now = {int(p): w for p, w in fleet.topic_view(controller, topics[0])["idealState"].items()}
                return len({now[p] for _, p in hot}) == len(hot)

            wait_until(spread, 90, "the balance by load to put each hot partition on its own worker", interval=1)
            wait_until(
                lambda: all(len(fleet.online_by_worker(controller, t)) == PARTITIONS for t in topics),
                60,
                "every partition ONLINE after the moves",
            )
            wait_until(
                lambda: _hot_lag(hot, src, dst) < CAUGHT_UP_RECORDS, 90, "the moved partitions to catch up", interval=1
            )
            settling = Settling(owners, 2 * LOAD_REBALANCE_INTERVAL_S)
            try:
                wait_until(settling.settled, 90, "no move for two load-balance runs", interval=1)
            except WaitTimeout as exc:
                runs = [line for line in controller.log_tail(400).splitlines() if "balance by load" in line]
                raise AssertionError(f"{exc}; the leader's load-balance runs:\n" + "\n".join(runs[-15:])) from exc
        # The measured window starts once every worker copies (each holds cold partitions).
        copied = {name: _bytes_copied(w) for name, w in workers.items()}
        wait_until(
            lambda: all(_bytes_copied(w) > copied[name] for name, w in workers.items()),
            30,
            "every worker to copy before the measured window",
            interval=1,
        )
        phase = _measure(workers, hot, src, dst, owners)
        print(
            f"balance {balance}: worker bytes/s { ({w: round(b) for w, b in phase.worker_bytes_per_s.items()}) }, "
            f"max/mean {phase.max_over_mean:.2f}, hot topic's end-to-end lag {phase.hot_lag:.0f} records, "
            f"{phase.moves} moves"
        )
        return phase
    finally:
        if producer is not None:
            producer.stop()
        fleet.stop_all()


def test_skewed_load_is_balanced_by_load_with_less_lag_than_by_count(
    local_stack: devstack.Stack, zk_chroot: str, tmp_path: Path, topic_name: Callable[[str], str]
) -> None:
    root = "/" + zk_chroot.split("/", 1)[1]
    by_count = _run_phase(local_stack, f"{root}/count", tmp_path / "count", "count", topic_name)
    by_load = _run_phase(local_stack, f"{root}/load", tmp_path / "load", "load", topic_name)
    assert by_count.max_over_mean > 1.25  # the skew the count-based planner leaves
    assert by_load.max_over_mean <= 1.25  # under a throttle split by demand
    assert by_load.moves == 0  # balanced, the planner leaves it so
    assert by_load.hot_lag < by_count.hot_lag
