"""What the copy loop's consuming half costs in Python: reading records with confluent-kafka, nothing else.

The floor under any copier whose records reach Python as confluent-kafka ``Message`` objects (Ferry's
worker, the bench's ceiling), whatever does the producing: read beside ``ferry bench``'s ``native``
figure (the whole copy, consuming and producing, in C on the same librdkafka) of the same workload.

Run: ``.venv/bin/python scripts/bench_consuming_half.py --bootstrap HOST:PORT [--records N] [--size S]
[--partitions P] [--rounds R]``.

It writes ``--records`` records of ``--size`` value bytes, each with the bench's two application
headers, to a new topic of ``--partitions`` partitions, then ``--rounds`` times reads them all from
the start with the consumer the worker and the ceiling use (Ferry's consumer defaults, ``consume()`` of
10,000 records), calling on each record what a copy loop calls (error, topic, partition, offset,
timestamp, key, value, headers). It prints the CPU seconds per million records of this process
(``time.process_time``: librdkafka's threads included) for each round. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import time

from confluent_kafka import OFFSET_BEGINNING, TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.common import collector
from ferry.common.kafka import clients as kafka_clients

BATCH = 10_000  # as bench/ceiling.py and the worker's consume_batch


def _fill(cluster: dict[str, str], topic: str, records: int, size: int, partitions: int) -> None:
    admin = kafka_clients.admin(cluster)
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)
    producer = kafka_clients.producer(cluster, **{"linger.ms": 50})
    value = os.urandom(size)
    for n in range(records):
        while True:
            try:
                producer.produce(
                    topic,
                    value,
                    b"%010d" % n,
                    n % partitions,
                    headers=[("bench-run", b"r1"), ("bench-seq", b"%010d" % n)],
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0, "records not written"


def _read(cluster: dict[str, str], topic: str, records: int, partitions: int) -> float:
    """CPU seconds per million records of reading ``records`` records of ``topic`` from its start."""
    consumer = kafka_clients.consumer(cluster, f"ferry-bench-consuming-half-{os.urandom(4).hex()}")
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read = 0
    started = time.process_time()
    while read < records:
        for message in consumer.consume(BATCH, 0.01):
            if message.error() is not None:
                continue
            message.topic(), message.partition(), message.offset(), message.timestamp()
            message.key(), message.value(), message.headers()
            read += 1
    elapsed = time.process_time() - started
    consumer.close()
    return elapsed / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python scripts/bench_consuming_half.py")
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cluster = {"bootstrap.servers": args.bootstrap}
    topic = f"ferry-bench-consuming-half-{os.urandom(4).hex()}"
    _fill(cluster, topic, args.records, args.size, args.partitions)
    collector.settle_for_copying()  # as the worker and the ceiling do
    figures = [_read(cluster, topic, args.records, args.partitions) for _ in range(args.rounds)]
    print(
        f"{args.partitions} x {args.size} B, {args.records:,} records: the consuming half in Python, "
        f"CPU s per million records, each round: {', '.join(f'{f:.2f}' for f in figures)}"
    )
    kafka_clients.admin(cluster).delete_topics([topic])


if __name__ == "__main__":
    main()
