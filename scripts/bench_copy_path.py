"""CPU cost of the worker's per-record Python: ``RouteCopier.copy_batch`` and its delivery callbacks.

No servers. The consumer hands out real ``confluent_kafka.Message`` objects (8 partitions, two
application headers, as ``ferry bench`` writes them); the producer is a stand-in that queues
what it is given and, in ``poll``, calls the delivery callback with a real ``Message`` carrying the
destination offset, as librdkafka would. So the figure is Ferry's own Python per record (copy
loop, provenance header, offset tracker, offset map, delivery callback) plus the stand-in's small
constant cost, without librdkafka's C work, which a change to the copier does not touch.

Run: ``.venv/bin/python scripts/bench_copy_path.py [--records N] [--repeat R] [--case local|hop|loop]
[--transactional] [--no-app-headers]``.
Prints the best and the median of ``--repeat`` rounds (CPU of this process, ``time.process_time``),
in ns per record, beside the broker ceiling's loop (``bench/ceiling.py``) on the same stand-ins,
and the difference: what Ferry's bookkeeping adds per record. Asserts nothing. ``local``: records
without Ferry's header (a first copy); ``hop``: records that carry a previous copy's header (a
chain); ``loop``: the same on a route with loop prevention. ``--transactional``: an exactly-once route's
copier (the default route: no delivery report between a run's ends);
``--no-app-headers``: records with no headers of their own.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any
from unittest import mock

from confluent_kafka import Message, TopicPartition

from ferry.common.config import RouteConfig, WorkerConfig
from ferry.common.core import provenance
from ferry.common.core.offset_map import OffsetMap
from ferry.common.kafka import clients as kafka_clients
from ferry.worker.copier import RouteCopier
from ferry.worker.copying import starter as starter_module
from ferry.worker.metrics import WorkerMetrics

TOPIC = "bench"
PARTITIONS = 8
BATCH = 1000


class _Consumer:
    def __init__(self) -> None:
        self.batches: list[list[Any]] = []

    def consume(self, num: int, timeout: float) -> list[Any]:
        return self.batches.pop() if self.batches else []

    def poll(self, timeout: float) -> None:
        return None

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        pass

    def resume(self, partitions: list[TopicPartition]) -> None:
        pass


class _Producer:
    """Delivers, in ``poll``, the pre-built reports of the records produced since the last poll: to
    each record's own callback, else the default one (``on_delivery``), else none, as librdkafka does."""

    def __init__(self, on_delivery: Any, reports: dict[int, list[Any]]) -> None:
        self.on_delivery = on_delivery
        self.pending: list[tuple[int, Any]] = []
        self.reports = {partition: iter(messages) for partition, messages in reports.items()}

    def produce(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        self.pending.append((partition, callback or on_delivery or self.on_delivery))

    def init_transactions(self, timeout: float) -> None:
        pass

    def begin_transaction(self) -> None:
        pass

    def poll(self, timeout: float) -> int:
        pending, self.pending = self.pending, []
        reports = self.reports
        for partition, on_delivery in pending:
            report = next(reports[partition])
            if on_delivery is not None:
                on_delivery(None, report)
        return 0


def _batches(records: int, headers: list[tuple[str, bytes]]) -> tuple[list[list[Any]], dict[int, list[Any]]]:
    """Batches of BATCH records, each a run of one partition (as librdkafka hands fetched sets out),
    and per partition the delivery reports of their copies, built before the clock starts."""
    value, batches, next_offset = b"x" * 100, [], [0] * PARTITIONS
    for number in range(records // BATCH):
        partition = number % PARTITIONS
        start = next_offset[partition]
        next_offset[partition] = start + BATCH
        batches.append(
            [
                Message(
                    topic=TOPIC,
                    partition=partition,
                    offset=o,
                    key=b"%010d" % o,
                    value=value,
                    headers=list(headers),
                    timestamp=(1, 1_700_000_000_000 + o),
                )
                for o in range(start, start + BATCH)
            ]
        )
    batches.reverse()
    reports = {
        p: [Message(topic=TOPIC, partition=p, offset=o) for o in range(next_offset[p])] for p in range(PARTITIONS)
    }
    return batches, reports


def _bare_round(records: int, headers: list[tuple[str, bytes]]) -> float:
    """The broker ceiling's loop (bench/ceiling.py) on the same stand-ins: what any copy costs here."""
    batches, reports = _batches(records, headers)
    producer = _Producer(lambda error, message: None, reports)
    produce = producer.produce
    started = time.process_time()
    while batches:
        for message in batches.pop():
            if message.error() is not None:
                continue
            timestamp_type, timestamp = message.timestamp()
            produce(
                message.topic(),
                message.value(),
                message.key(),
                message.partition(),
                None,
                None,
                timestamp if timestamp_type else 0,
                message.headers(),
            )
        producer.poll(0)
    return (time.process_time() - started) / records * 1e9


def _headers(case: str, app_headers: bool = True) -> list[tuple[str, bytes]]:
    headers = [("bench-run", b"r1"), ("bench-seq", b"0000000001")] if app_headers else []
    if case != "local":
        headers.append(("ferry.provenance", provenance.encode(("origin",), 0, 123456, TOPIC)))
    return headers


def _round(records: int, case: str, transactional: bool, app_headers: bool) -> float:
    route = RouteConfig(source="src", destination="dst", loop_prevention=case == "loop")
    headers = _headers(case, app_headers)
    consumer = _Consumer()
    consumer.batches, reports = _batches(records, headers)

    def producer(cluster: Any, on_delivery: Any = None, **overrides: Any) -> _Producer:
        return _Producer(on_delivery, reports)

    with (
        mock.patch.object(kafka_clients, "consumer", lambda *a, **k: consumer),
        mock.patch.object(kafka_clients, "producer", producer),
        mock.patch.object(kafka_clients, "admin", lambda *a, **k: None),
        mock.patch.object(starter_module, "DestinationReader", lambda *a, **k: None),
    ):
        copier = RouteCopier(
            route=route,
            source={},
            destination={},
            config=WorkerConfig(),
            metrics=WorkerMetrics(),
            client_id="bench",
            origins=frozenset({"origin", "src"}) if case == "loop" else None,
            transactional_id="ferry.bench.w1" if transactional else None,
        )
    # Held partitions as acquire() leaves them (without the clusters it asks): started, each with an offset map.
    copier._states.start([TopicPartition(TOPIC, partition, 0) for partition in range(PARTITIONS)])
    for partition in range(PARTITIONS):
        copier._ledger.resume((TOPIC, partition), OffsetMap())
    if transactional:
        assert copier._committer.begin()  # the copy loop copies inside an open transaction
    started = time.process_time()
    while copier.copy_batch(0):
        pass
    elapsed = time.process_time() - started
    assert copier.in_flight() == 0
    return elapsed / records * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(prog="python scripts/bench_copy_path.py")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--case", choices=("local", "hop", "loop"), default="local")
    parser.add_argument(
        "--transactional",
        action="store_true",
        help="an exactly-once route's copier (no delivery report between a run's ends)",
    )
    parser.add_argument("--no-app-headers", action="store_true", help="records without application headers")
    args = parser.parse_args()
    ferry, bare = [], []
    for _ in range(args.repeat):  # interleaved, so a neighbour's burst hits both alike
        bare.append(_bare_round(args.records, _headers(args.case, not args.no_app_headers)))
        ferry.append(_round(args.records, args.case, args.transactional, not args.no_app_headers))
    print(
        f"{args.case}{' exactly once' if args.transactional else ''}: "
        f"copy_batch {min(ferry):.0f} ns/record best, {statistics.median(ferry):.0f} median; "
        f"the ceiling's loop {min(bare):.0f} best, {statistics.median(bare):.0f} median; "
        f"Ferry's own {min(ferry) - min(bare):.0f} ns/record ({args.repeat} rounds of {args.records:,} records)"
    )


if __name__ == "__main__":
    main()
