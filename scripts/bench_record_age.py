"""What the worker's record-age histogram costs per record: its observations' own cost, and how
many a worker makes at full speed, against the local stack (``ferry dev up``).

``python scripts/bench_record_age.py [--records 300000] [--sizes 100,1024]``

1. Settles synthetic delivery reports (real ``confluent_kafka.Message`` objects, 8 partitions in
   runs of 1, 10, 100 and 1,000 records) through the copier's delivery ledger (queued by its
   ``on_delivery`` callback, as the producer calls it, then ``settle``) with and without the
   record-age observation, and prints the difference per record.
2. Runs one in-process ``Worker`` over a fresh 8-partition topic per value size (filled as
   ``ferry bench`` fills its workloads, then copied as a backlog) and prints how many records
   one observation stands for. The figures are in BENCHMARKS.md ("The record-age metric's cost").
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from confluent_kafka import Message

from ferry.bench import workload
from ferry.common.config import ZookeeperConfig, parse_config
from ferry.common.model import PartitionKey, WorkerAssignment
from ferry.common.zk.layout import ZkLayout, make_client
from ferry.devstack import stack as devstack
from ferry.devstack.support import poll_until
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.service import Worker

PARTITIONS = 8


class _Tracker:
    def acked_oldest_run(self, key: Any, count: int) -> range:
        return range(count)


def _ledger(observe: bool) -> DeliveryLedger:
    """A route's delivery ledger over a stand-in watermark that acknowledges whatever it is told
    (nothing was sent through it), with or without the record-age observation."""
    ledger = DeliveryLedger(
        route_name="src.dst",
        source_name=lambda topic: topic,
        stop=lambda key, failure: None,
        metrics=WorkerMetrics(),
        wall_clock=time.time,
    )
    ledger._watermarks = _Tracker()  # type: ignore[assignment]
    if not observe:
        ledger._observe_record_age = lambda run_starts: None  # type: ignore[method-assign]
    return ledger


def settle_cost(total: int = 200_000, chunk: int = 5000) -> None:
    for run in (1, 10, 100, 1000):
        messages = [
            Message(topic="t", partition=(i // run) % PARTITIONS, offset=i, timestamp=(1, 1_700_000_000_000 + i))
            for i in range(total)
        ]
        best: dict[bool, float] = {}
        for observe in (False, True) * 3:
            ledger = _ledger(observe)
            on_delivery, settle = ledger.on_delivery, ledger.settle
            started = time.perf_counter()
            for i in range(0, total, chunk):
                for message in messages[i : i + chunk]:
                    on_delivery(None, message)
                settle()
            best[observe] = min(best.get(observe, float("inf")), time.perf_counter() - started)
        without, with_age = (best[k] / total * 1e9 for k in (False, True))
        print(
            f"runs of {run:>4} records: settling {without:.0f} ns/record without the record age, "
            f"{with_age:.0f} with it (+{with_age - without:.0f} ns)"
        )


def observations_per_record(records: int, size: int) -> None:
    stack = devstack.stack_from_env()
    src = {"bootstrap.servers": stack.bootstrap("src")}
    dst = {"bootstrap.servers": stack.bootstrap("dst")}
    run = uuid.uuid4().hex[:8]
    topic = f"ferry-record-age-{size}-{run}"
    load = workload.Workload(value_bytes=size, partitions=PARTITIONS, records=records)
    src_admin, dst_admin = workload.admin(src), workload.admin(dst)
    workload.create_topic(src_admin, topic, PARTITIONS)
    workload.fill(src, topic, load, run)
    root = f"/ferry-record-age/{run}"
    destination = f"dst{run}"  # a route (and consumer group) of its own
    config = parse_config(
        {
            "zookeeper": {"connect": stack.zookeeper.address, "root": root},
            "clusters": {"src": src, destination: dst},
            "routes": [{"source": "src", "destination": destination, "compression": "none"}],
            "worker": {"metrics_port": 0},
        }
    )
    route = f"src.{destination}"
    layout = ZkLayout(root)
    zk = make_client(ZookeeperConfig(connect=stack.zookeeper.address))
    zk.start(timeout=15)
    worker = Worker(config=config, worker_id="w1")
    thread = threading.Thread(target=worker.run, name="worker", daemon=True)
    try:
        for path in layout.persistent_paths():
            zk.ensure_path(path)
        thread.start()
        poll_until(lambda: zk.exists(layout.live_worker("w1")), 30, "the worker to register")
        keys = frozenset(PartitionKey(route, topic, p) for p in range(PARTITIONS))
        zk.create(layout.assignment("w1"), WorkerAssignment(1, keys).to_bytes(), makepath=True)
        registry = worker.metrics.registry

        def value(name: str) -> float:
            return registry.get_sample_value(name, {"route": route}) or 0.0

        poll_until(lambda: value("ferry_worker_records_copied_total") >= records, 300, "the worker to copy everything")
        time.sleep(2)  # the last deliveries settle
        count = value("ferry_worker_record_age_seconds_count")
        print(
            f"{PARTITIONS}x{size}B: {count:.0f} observations for {records:,} records: one per "
            f"{records / count:,.0f} records; mean age {value('ferry_worker_record_age_seconds_sum') / count:.2f}s "
            "(a backlog: the records were produced before the copy started)"
        )
    finally:
        worker.stop()
        if zk.exists(layout.assignment("w1")):
            zk.delete(layout.assignment("w1"))
        thread.join(60)
        zk.delete(root, recursive=True)
        zk.stop()
        zk.close()
        workload.delete_topics(src_admin, [topic])
        workload.delete_topics(dst_admin, [topic])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--sizes", default="100,1024", help="value bytes, comma-separated")
    args = parser.parse_args()
    settle_cost()
    for size in (int(s) for s in args.sizes.split(",")):
        observations_per_record(args.records, size)


if __name__ == "__main__":
    main()
