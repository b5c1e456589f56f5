"""Where an idempotent librdkafka producer's CPU goes when the destination sets the pace.

``python scripts/bench_producer_queue.py [--bootstrap 127.0.0.1:29092] [--records 100000]
[--value-bytes 10240] [--partitions 1] [--queue-kbytes 2048,8192,65536] [--rounds 2] [NAME=VALUE ...]``

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


def run(bootstrap: str, records: int, value: bytes, partitions: int, settings: dict[str, Any]) -> str:
    """Produces ``records`` records into a new topic; returns the line to print."""
    admin = kafka_clients.admin({"bootstrap.servers": bootstrap})
    topic = f"ferry-bench-pq-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    try:
        producer = kafka_clients.producer({"bootstrap.servers": bootstrap}, **settings)
        producer.produce(topic, b"first", partition=0)  # the connection and the producer id come first
        producer.flush(30)
        before, started, cpu_started = _thread_cpu_s(), time.monotonic(), time.process_time()
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
            settings = {**extra, "queue.buffering.max.kbytes": kbytes}
            line = run(args.bootstrap, args.records, value, args.partitions, settings)
            print(f"round {round_} queue {kbytes:>6} KiB: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
