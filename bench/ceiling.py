"""The broker ceiling: the cheapest honest copy, run as its own process and measured like the others.

``python -m ferry.bench.ceiling --source HOST:PORT --destination HOST:PORT --partitions N [--block I/K]
[--consumer-config JSON] [--producer-config JSON] TOPIC...``

The bench runs one such process per CPU (``--block I/K``: the I-th of K contiguous blocks of
partitions), so the ceiling is what these brokers take on this machine, not what one Python
thread can push. Each process: one librdkafka consumer (``assign()`` from the beginning, no group, no commits)
and one producer with the same delivery guarantees as Ferry's, built with Ferry's client defaults
(``common/kafka/clients.py``, the best settings measured) plus the same overrides the bench gives Ferry's
workers (``--consumer-config``, ``--producer-config``), copying key, value, headers and timestamp to the same
partition. No offset tracking, no delivery callbacks, no status, no metrics, no Python call per record beyond
the client's own: whatever a replicator adds costs on top of this.
Runs until SIGTERM, then flushes and exits.

Two variants add to the same loop what Ferry's guarantees need from the client, and nothing of
Ferry's own bookkeeping: ``--stamp`` (the bench's ``stamped-copy``) puts Ferry's provenance header
on each copy (:class:`common.core.provenance.Stamper`); ``--stamp --reports`` (``acked-copy``) also
asks a delivery report per record (a Python callback that only queues it, emptied after each
poll), which a replicator that loses no record and maps offsets needs. Their CPU per record
against the ceiling's is what those cost through confluent-kafka, whoever writes the replicator.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ferry.common import allocator, collector
from ferry.common.core.provenance import Stamper
from ferry.common.kafka import clients as kafka_clients

BATCH = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferry.bench.ceiling")
    parser.add_argument("--source", required=True)
    parser.add_argument("--destination", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--block", default="0/1", help="I/K: copy only the I-th of K contiguous blocks of partitions")
    parser.add_argument("--consumer-config", type=json.loads, default={}, help="librdkafka overrides (JSON object)")
    parser.add_argument("--producer-config", type=json.loads, default={}, help="librdkafka overrides (JSON object)")
    parser.add_argument("--stamp", action="store_true", help="Ferry's provenance header on each copy")
    parser.add_argument("--reports", action="store_true", help="a delivery report per record")
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
    delivered: list[Any] = []
    failures: list[Any] = []

    def on_delivery(error: Any, message: Any) -> None:  # queues the report, as a replicator's copier would
        if error is None:
            delivered.append(message)
        else:
            failures.append(error)

    producer = kafka_clients.producer(
        {"bootstrap.servers": args.destination},
        **args.producer_config,
        **({"on_delivery": on_delivery} if args.reports else {}),
    )
    collector.settle_for_copying()  # as a worker does: the ceiling is the best bare loop, not a slower one
    allocator.keep_freed_memory()  # as a worker does by default (worker.keep_freed_memory)
    # One topic's stamper for all (the cost per record is the same; the tag names the first topic).
    stamper = Stamper("src").for_topic(args.topics[0], args.topics[0])
    _copy(consumer, producer, stamper.stamp if args.stamp else None, lambda: stopping, delivered)
    producer.flush(30)
    consumer.close()
    if failures:
        print(f"{len(failures)} records failed delivery, the first: {failures[0]}", file=sys.stderr)
        return 1
    return 0


def _copy(
    consumer: Any,
    producer: Any,
    stamp: Callable[[Any, int], Any] | None,
    stopping: Callable[[], bool],
    delivered: list[Any],
) -> None:
    """Copies until ``stopping()``; with ``stamp``, each copy carries the provenance header.

    ``produce`` is called in the loop itself, not through a helper: a Python call per record is
    about a tenth of this loop's CPU at 100 B, and a ceiling must not carry it.
    """
    produce, poll = kafka_clients.positional_produce(producer), producer.poll
    while not stopping():
        # A short timeout: consume(n, t) returns only when n records or t seconds are there.
        messages: list[Any] = consumer.consume(BATCH, 0.01)  # topic()/partition() are set: no error
        for message in messages:
            if message.error() is not None:
                continue
            timestamp_type, timestamp = message.timestamp()
            headers = message.headers() if stamp is None else stamp(message.headers(), message.offset())
            while True:
                try:
                    produce(  # positional, as Ferry's copier: see common.kafka.clients.positional_produce
                        message.topic(),
                        message.value(),
                        message.key(),
                        message.partition(),
                        None,
                        None,
                        timestamp if timestamp_type else 0,
                        headers,
                    )
                    break
                except BufferError:  # the local queue is full: serve deliveries, then try again
                    poll(0.05)
        poll(0)
        delivered.clear()


if __name__ == "__main__":
    sys.exit(main())
