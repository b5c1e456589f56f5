"""The broker ceiling: the cheapest honest copy, run as its own process and measured like the others.

``python -m ferry.bench.ceiling --source HOST:PORT --destination HOST:PORT --partitions N [--block I/K]
[--consumer-config JSON] [--producer-config JSON] TOPIC...``

The bench runs one such process per CPU (``--block I/K``: the I-th of K contiguous blocks of
partitions), so the ceiling is what these brokers take on this machine, not what one Python
thread can push. Each process: one librdkafka consumer (``assign()`` from the beginning, no group, no commits) and one
producer with the same delivery guarantees as Ferry's, built with Ferry's client defaults
(``common/kafka_clients.py``, the best settings measured) plus the same overrides the bench
gives Ferry's workers (``--consumer-config``, ``--producer-config``), copying key, value, headers and timestamp to the same partition. No offset tracking, no
delivery callbacks, no status, no metrics: whatever a replicator adds costs on top of this.
Runs until SIGTERM, then flushes and exits.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from types import FrameType
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ferry.common import kafka_clients
from ferry.common.support import produce_blocking

BATCH = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferry.bench.ceiling")
    parser.add_argument("--source", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--block", default="0/1", help="I/K: copy only the I-th of K contiguous blocks of partitions")
    parser.add_argument("--consumer-config", type=json.loads, default={}, help="librdkafka overrides (JSON object)")
    parser.add_argument("--producer-config", type=json.loads, default={}, help="librdkafka overrides (JSON object)")
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args(argv)
    index, count = (int(part) for part in args.block.split("/"))
    mine = [p for p in range(args.partitions) if p * count // args.partitions == index]
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    consumer = kafka_clients.consumer({"bootstrap.servers": args.source}, "ferry-bench-ceiling", **args.consumer_config)
    consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t in args.topics for p in mine])
    producer = kafka_clients.producer({"bootstrap.servers": args.destination}, **args.producer_config)
    poll = producer.poll
    while not stopping:
        # A short timeout: consume(n, t) returns only when n records or t seconds are there.
        messages: list[Any] = consumer.consume(BATCH, 0.01)  # topic()/partition() are set: no error
        for message in messages:
            if message.error() is not None:
                continue
            timestamp_type, timestamp = message.timestamp()
            produce_blocking(producer, message.topic(), message.value(), message.key(), message.partition(),
                             timestamp=timestamp if timestamp_type else 0, headers=message.headers())
        poll(0)
    producer.flush(30)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
