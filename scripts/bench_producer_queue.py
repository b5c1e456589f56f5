"""Where an idempotent librdkafka producer's CPU goes when the destination sets the pace.

``python scripts/bench_producer_queue.py [--bootstrap 127.0.0.1:29092] [--records 100000]
[--value-bytes 10240] [--partitions 1] [--queue-kbytes 2048,8192,65536] [--windows 0] [--rounds 2] [NAME=VALUE ...]``

Produces the same records (Ferry's producer defaults, plus the NAME=VALUE librdkafka settings given)
as fast as the producer takes them into a fresh topic, once per ``queue.buffering.max.kbytes`` value
and round, interleaved, and prints records/s and the CPU per record of this process, split by thread
(``rdk:broker<N>``: librdkafka's broker thread, ``python``: the producing thread).

Why: an idempotent librdkafka producer keeps one produce request per partition in flight (it compares
the partition's in-flight *message* count with its in-flight *request* limit of 5), and while that
request waits for its response with records queued longer than ``linger.ms`` behind it, the broker
thread wakes at once, again and again, until the response comes: ``clock_gettime``, ``poll`` and
mutexes, no sending. A copy of a hot partition's backlog spends most of its CPU there. The figures, and
what the queue's depth does to them, are in BENCHMARKS.md ("One hot partition of large records").

``--windows``: comma-separated partition windows to run each queue depth with, in producer batches
(``batch.size``, librdkafka's 1,000,000 bytes unless given); 0 is none. With a window of W, records go to
each partition in chunks of one batch, the last of each with a delivery report, and a partition's next
chunk waits (serving reports) until at most W - 1 of its chunks are unacknowledged: the copy loop's
window (``WINDOW_BATCHES`` in worker/copying/sender.py) without the rest of the copy loop.
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from typing import Any

from confluent_kafka.admin import NewTopic

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import produce_blocking

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds of each of this process's threads so far, by thread id: (name, seconds)."""
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm, open(f"/proc/self/task/{tid}/stat") as stat:
                name = comm.read().strip()
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[f"{tid} {name}"] = (int(fields[11]) + int(fields[12])) / TICKS_PER_S
    return out


def _produce_windowed(
    producer: Any, topic: str, value: bytes, records: int, partitions: int, batch_size: int, window: int
) -> None:
    """Produces ``records`` records round-robin over the partitions in chunks of one batch, each partition
    holding at most ``window`` unacknowledged chunks (see ``--windows``)."""
    chunk = max(1, batch_size // len(value))
    unacknowledged = [0] * partitions

    def acknowledged(partition: int) -> Any:
        def report(error: Any, message: Any) -> None:
            if error is not None:
                raise SystemExit(f"a record failed: {error}")
            unacknowledged[partition] -= 1

        return report

    produced = 0
    while produced < records:
        for partition in range(partitions):
            while unacknowledged[partition] >= window:
                producer.poll(0.05)
            count = min(chunk, records - produced)
            for i in range(count):
                report = acknowledged(partition) if i == count - 1 else None
                produce_blocking(
                    producer, topic, value, b"%d" % (produced + i), partition, wait_s=0.05, on_delivery=report
                )
            unacknowledged[partition] += 1
            produced += count
            if produced >= records:
                break
        producer.poll(0)


def run(bootstrap: str, records: int, value: bytes, partitions: int, settings: dict[str, Any], window: int = 0) -> str:
    """Produces ``records`` records into a new topic (with a partition window of ``window`` batches, 0:
    none); returns the line to print."""
    admin = kafka_clients.admin({"bootstrap.servers": bootstrap})
    topic = f"ferry-bench-pq-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    try:
        producer = kafka_clients.producer({"bootstrap.servers": bootstrap}, **settings)
        producer.produce(topic, b"first", partition=0)  # the connection and the producer id come first
        producer.flush(30)
        before, started, cpu_started = _thread_cpu_s(), time.monotonic(), time.process_time()
        if window:
            batch_size = int(settings.get("batch.size", 1_000_000))
            _produce_windowed(producer, topic, value, records, partitions, batch_size, window)
        else:
            for i in range(records):
                produce_blocking(producer, topic, value, b"%d" % i, i % partitions, wait_s=0.05)
        if producer.flush(120):
            raise SystemExit("records left undelivered after 120 s")
        seconds, cpu = time.monotonic() - started, time.process_time() - cpu_started
        by_name: dict[str, float] = {}
        for thread, cpu_s in _thread_cpu_s().items():
            name = thread.split(" ", 1)[1]
            by_name[name] = by_name.get(name, 0.0) + cpu_s - before.get(thread, 0.0)
        top = sorted(by_name.items(), key=lambda item: -item[1])[:2]
        threads = ", ".join(f"{name} {cpu_s / records * 1e6:.1f}" for name, cpu_s in top)
        return f"{records / seconds:>9,.0f} records/s  {cpu / records * 1e6:6.2f} CPU us/record  ({threads})"
    finally:
        admin.delete_topics([topic])[topic].result(30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:29092")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--value-bytes", type=int, default=10_240)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--queue-kbytes", default="2048,8192,65536")
    parser.add_argument("--windows", default="0", help="partition windows in producer batches; 0: none")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("settings", nargs="*", metavar="NAME=VALUE", help="more librdkafka producer settings")
    args = parser.parse_args()
    extra = dict(setting.split("=", 1) for setting in args.settings)
    value = b"v" * args.value_bytes
    print(
        f"{args.records:,} records of {args.value_bytes} B to {args.partitions} partition(s) per run, "
        f"{args.rounds} rounds; CPU per record by thread in parentheses"
    )
    for round_ in range(1, args.rounds + 1):
        for kbytes in (int(k) for k in args.queue_kbytes.split(",")):
            for window in (int(w) for w in args.windows.split(",")):
                settings = {**extra, "queue.buffering.max.kbytes": kbytes}
                line = run(args.bootstrap, args.records, value, args.partitions, settings, window)
                print(f"round {round_} queue {kbytes:>6} KiB window {window or '-':>2}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
