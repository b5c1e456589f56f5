"""The benchmark's records: how they are produced, checked at the destination, and timed end to end.

Record ``i`` of a workload goes to partition ``i % partitions`` with key ``%010d`` of its
sequence number in that partition (so, on a fresh topic, the key equals the offset), the
workload's value (``value_bytes`` of them: :func:`values`) and two headers: ``bench-run`` (the run id)
and ``bench-seq`` (the key again). The destination check can therefore compare any record
with what it must be, offset by offset, without reading the source again.
"""

from __future__ import annotations

import json
import math
import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ferry.bench.errors import BenchError
from ferry.common.core import provenance
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.devstack.support import poll_until, produce_blocking

HEADER_RUN = "bench-run"
HEADER_SEQ = "bench-seq"
_ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class Workload:
    value_bytes: int
    partitions: int
    records: int
    # What the values are (``ferry bench --values``, :func:`values`):
    #   same:   one random value for every record (the default; what every earlier table used). A
    #           compressing producer finds each value again in the previous record: compresses well.
    #   random: fresh random bytes per record: incompressible, the worst case of compression.
    #   text:   a different slice of JSON events per record: compressible as typical payloads are.
    values: str = "same"

    @property
    def name(self) -> str:
        suffix = "" if self.values == "same" else f"-{self.values}"
        return f"{self.partitions}x{self.value_bytes}B{suffix}"

    def per_partition(self) -> dict[int, int]:
        base, extra = divmod(self.records, self.partitions)
        return {p: base + (1 if p < extra else 0) for p in range(self.partitions)}

    def record_bytes(self, run_id: str) -> int:
        """Key + value + header names and values of one record: what MB/s counts."""
        key = 10
        return key + self.value_bytes + len(HEADER_RUN) + len(run_id) + len(HEADER_SEQ) + key


# librdkafka's notices (a deleted topic's partition count "changed to 0", queues purged at
# close) are normal here, where topics are deleted between runs: warnings and worse only.
QUIET: dict[str, Any] = {"log_level": 4}


def admin(cluster: dict[str, Any]) -> AdminClient:
    return kafka_clients.admin(cluster, **QUIET)


def record_key(seq: int) -> bytes:
    return b"%010d" % seq


# -- topics ---------------------------------------------------------------------------------


def create_topic(admin: AdminClient, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    future = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})]
    )[topic]
    try:
        future.result(timeout=_ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise BenchError(f"creating topic {topic}: {kafka_error(exc)}") from None


def topic_exists(admin: AdminClient, topic: str) -> bool:
    meta = admin.list_topics(topic, timeout=10).topics.get(topic)
    return meta is not None and meta.error is None and bool(meta.partitions)


def delete_topics(admin: AdminClient, topics: list[str], wait_s: float = 60.0) -> None:
    """Deletes ``topics`` (missing ones are fine) and waits until the metadata no longer shows them."""
    existing = [t for t in topics if topic_exists(admin, t)]
    if not existing:
        return
    for topic, future in admin.delete_topics(existing, operation_timeout=30).items():
        try:
            future.result(timeout=_ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            error = kafka_error(exc)
            if "UNKNOWN_TOPIC" not in error.name:
                raise BenchError(f"deleting topic {topic}: {error}") from None
    poll_until(
        lambda: not any(topic_exists(admin, t) for t in existing),
        wait_s,
        f"topics {existing} to be gone after deleting them",
        interval=0.2,
    )


# -- producing ------------------------------------------------------------------------------


def _text_corpus(size: int, seed: int = 7) -> bytes:
    """JSON events (orders with ids, skus, prices, timestamps) of at least ``size`` bytes, seeded."""
    rng = random.Random(seed)
    events = ("order_created", "order_paid", "order_shipped", "order_cancelled", "cart_updated")
    currencies = ("EUR", "USD", "GBP", "CHF")
    lines: list[bytes] = []
    total = 0
    while total < size:
        line = (
            json.dumps(
                {
                    "event": rng.choice(events),
                    "order_id": f"o-{rng.randrange(10**9):09d}",
                    "customer_id": rng.randrange(10**6),
                    "sku": f"SKU-{rng.randrange(5000):05d}",
                    "quantity": rng.randrange(1, 10),
                    "price": round(rng.uniform(1, 500), 2),
                    "currency": rng.choice(currencies),
                    "ts": f"2026-11-24T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
                    f".{rng.randrange(1000):03d}Z",
                }
            ).encode()
            + b"\n"
        )
        lines.append(line)
        total += len(line)
    return b"".join(lines)


def values(workload: Workload) -> Callable[[int], bytes]:
    """Record ``i``'s value, by the workload's kind (``Workload.values``; ``bench.names.VALUE_KINDS``)."""
    size = workload.value_bytes
    if workload.values == "random":
        return lambda _i: os.urandom(size)
    if workload.values == "text":
        corpus = _text_corpus(max(4 * 1024 * 1024, 4 * size))
        starts = random.Random(11)
        last = len(corpus) - size

        def text(_i: int) -> bytes:
            start = starts.randrange(last)
            return corpus[start : start + size]

        return text
    same = os.urandom(size)
    return lambda _i: same


def log_bytes(data_dir: Path, topic: str) -> int:
    """Bytes of ``topic``'s log segments in a local broker's data folder: what it stores, as the
    producer sent it (compressed batches stay compressed: the topics' compression.type is producer)."""
    return sum(f.stat().st_size for f in data_dir.glob(f"{topic}-*/*.log") if f.parent.name.rpartition("-")[0] == topic)


def fill(cluster: dict[str, Any], topic: str, workload: Workload, run_id: str) -> float:
    """Produces the workload's records to ``topic`` as fast as the producer can; returns the seconds taken."""
    producer = kafka_clients.producer(
        cluster,
        **QUIET,
        **{
            "linger.ms": 50,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
        },
    )
    value = values(workload)
    run_header = (HEADER_RUN, run_id.encode())
    partitions = workload.partitions
    started = time.monotonic()
    for i in range(workload.records):
        key = record_key(i // partitions)
        produce_blocking(producer, topic, value(i), key, i % partitions, headers=[run_header, (HEADER_SEQ, key)])
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise BenchError(f"the source did not acknowledge every record of {topic}")
    return time.monotonic() - started


# -- checking -------------------------------------------------------------------------------


def _consumer(cluster: dict[str, Any], **overrides: Any) -> Consumer:
    return kafka_clients.consumer(cluster, f"ferry-bench-{uuid.uuid4().hex[:8]}", **QUIET, **overrides)


def verify(
    cluster: dict[str, Any],
    topic: str,
    workload: Workload,
    run_id: str,
    sample: int = 200,
    transactional: bool = False,
) -> list[str]:
    """Problems with ``topic`` at the destination (none: every record arrived, in order).

    Every partition's record count must equal the source's; then a window of ``sample``
    records at the start, middle and end of each partition is read and compared, offset by
    offset, with the record that must be there (key, value size, both headers).
    ``transactional``: the destination also holds transaction markers, so offsets are not record
    numbers: every record is read (read_committed) and compared with the one its place must hold.
    """
    if transactional:
        return _verify_every_record(cluster, topic, workload, run_id)
    problems: list[str] = []
    consumer = _consumer(cluster)
    try:
        expected = workload.per_partition()
        for partition, count in expected.items():
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
            if low != 0 or high != count:
                problems.append(f"partition {partition}: offsets {low}..{high} at the destination, expected 0..{count}")
        if problems:
            return problems
        run_header = run_id.encode()
        windows = {p: sorted({0, max(0, n // 2 - sample // 2), max(0, n - sample)}) for p, n in expected.items() if n}
        bad: set[int] = set()
        for round_ in range(3):
            wanted = {
                p: (starts[round_], min(sample, expected[p] - starts[round_]))
                for p, starts in windows.items()
                if round_ < len(starts) and p not in bad
            }
            for partition, records in _read(consumer, topic, wanted).items():
                start, want = wanted[partition]
                for offset, message in zip(range(start, start + want), records, strict=False):
                    problem = _record_problem(message, offset, workload.value_bytes, run_header)
                    if problem:
                        problems.append(f"partition {partition}: {problem}")
                        bad.add(partition)
                        break
    finally:
        consumer.close()
    return problems


def _verify_every_record(cluster: dict[str, Any], topic: str, workload: Workload, run_id: str) -> list[str]:
    expected = {p: n for p, n in workload.per_partition().items() if n}
    consumer = _consumer(cluster, **{"isolation.level": "read_committed"})
    records: dict[int, list[Any]] = {p: [] for p in expected}
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in expected}
        consumer.assign([TopicPartition(topic, p, 0) for p in expected])
        unread = set(expected)
        deadline = time.monotonic() + 120
        while unread and time.monotonic() < deadline:
            for message in consumer.consume(10_000, timeout=0.2):
                partition = message.partition()
                if message.error() is None and partition is not None:
                    records[partition].append(message)
            positions = consumer.position([TopicPartition(topic, p) for p in unread])
            unread -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    finally:
        consumer.close()
    problems: list[str] = []
    run_header = run_id.encode()
    for partition, count in expected.items():
        got = records[partition]
        if len(got) != count:
            problems.append(f"partition {partition}: {len(got)} committed records at the destination, expected {count}")
            continue
        for index, message in enumerate(got):
            problem = _record_problem(message, index, workload.value_bytes, run_header, by_offset=False)
            if problem:
                problems.append(f"partition {partition}: {problem}")
                break
    return problems


def _read(consumer: Consumer, topic: str, windows: dict[int, tuple[int, int]]) -> dict[int, list[Any]]:
    """Reads ``count`` records from ``start`` of each partition (``{partition: (start, count)}``)."""
    records: dict[int, list[Any]] = {p: [] for p in windows}
    if not windows:
        return records
    consumer.assign([TopicPartition(topic, p, start) for p, (start, _) in windows.items()])
    missing = sum(count for _, count in windows.values())
    deadline = time.monotonic() + 30
    while missing > 0 and time.monotonic() < deadline:
        messages: list[Any] = consumer.consume(10_000, timeout=0.1)
        for message in messages:
            if message.error() is not None:
                continue
            got = records[message.partition()]
            if len(got) < windows[message.partition()][1]:
                got.append(message)
                missing -= 1
    consumer.unassign()
    for partition, (_, count) in windows.items():
        if len(records[partition]) < count:
            records[partition].append(None)  # reported as missing by the caller
    return records


def _record_problem(
    message: Any, offset: int, value_bytes: int, run_header: bytes, by_offset: bool = True
) -> str | None:
    """``offset``: the record's number in its partition, which is its offset ``by_offset``."""
    if message is None:
        return f"could not read offset {offset} back"
    key = record_key(offset)
    if (by_offset and message.offset() != offset) or message.key() != key:
        return (
            f"offset {message.offset()} holds key {message.key()!r}, expected {key!r} at offset {offset} "
            "(order or loss)"
        )
    value = message.value()
    if value is None or len(value) != value_bytes:
        return f"offset {offset}: value of {0 if value is None else len(value)} bytes, expected {value_bytes}"
    if provenance.split(message.headers())[0] != [(HEADER_RUN, run_header), (HEADER_SEQ, key)]:
        return f"offset {offset}: headers {message.headers()!r} differ from the source"
    return None


# -- end-to-end latency ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class EndToEndLatency:
    expected: int
    received: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None

    def to_json(self) -> dict[str, Any]:
        return {
            "expected": self.expected,
            "received": self.received,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
        }


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def measure_latency(
    source: dict[str, Any],
    destination: dict[str, Any],
    topic: str,
    workload: Workload,
    rate: int,
    seconds: float,
    run_id: str,
    settle_s: float = 30.0,
) -> EndToEndLatency:
    """Produces ``rate`` records/s for ``seconds`` to ``topic`` on the source while a replicator runs.

    Latency of one record = the wall-clock time the bench consumer got it from the destination
    minus its source timestamp (CreateTime, set by the bench's producer in ``produce()``). Both
    clocks are this machine's, so no skew; it includes the bench producer's own send time.
    """
    dst_admin = admin(destination)
    # The replicator creates it.
    poll_until(lambda: topic_exists(dst_admin, topic), 60, f"the destination topic {topic} to appear", interval=0.2)
    consumer = _consumer(destination, **{"fetch.wait.max.ms": 5, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(workload.partitions)])
    latencies: list[float] = []
    stop = threading.Event()
    ready = threading.Event()

    def consume() -> None:
        # poll() returns as soon as one record is there; consume(n, t) would wait for n or t.
        while not stop.is_set():
            message = consumer.poll(0.05)
            ready.set()
            if message is None or message.error() is not None:
                continue
            latencies.append(time.time() * 1000.0 - message.timestamp()[1])

    thread = threading.Thread(target=consume, name="bench-latency-consumer", daemon=True)
    thread.start()
    ready.wait(10)
    producer = kafka_clients.producer(source, **QUIET, **{"linger.ms": 0})
    value = os.urandom(workload.value_bytes)
    run_header = (HEADER_RUN, run_id.encode())
    # One probe record per partition first, not counted: the replicator's and the bench
    # consumer's first fetches (offset look-ups, metadata) are start-up, not latency.
    for partition in range(workload.partitions):
        producer.produce(topic, value, record_key(0), partition, headers=[run_header, (HEADER_SEQ, record_key(0))])
    producer.flush(30)
    deadline = time.monotonic() + settle_s
    while len(latencies) < workload.partitions and time.monotonic() < deadline:
        time.sleep(0.01)
    probes = len(latencies)
    total = int(rate * seconds)
    sent = 0
    started = time.monotonic()
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate) + 1)
        while sent < due:
            seq = sent // workload.partitions + 1
            key = record_key(seq)
            try:
                producer.produce(topic, value, key, sent % workload.partitions, headers=[run_header, (HEADER_SEQ, key)])
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
        producer.poll(0)
        time.sleep(0.001)
    producer.flush(30)
    deadline = time.monotonic() + settle_s
    while len(latencies) < probes + total and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    consumer.close()
    if probes < workload.partitions:
        return EndToEndLatency(
            expected=total,
            received=max(0, len(latencies) - workload.partitions),
            p50_ms=None,
            p99_ms=None,
            max_ms=None,
        )
    values = sorted(latencies[workload.partitions :])
    if not values:
        return EndToEndLatency(expected=total, received=0, p50_ms=None, p99_ms=None, max_ms=None)
    return EndToEndLatency(
        expected=total,
        received=len(values),
        p50_ms=round(percentile(values, 0.50), 1),
        p99_ms=round(percentile(values, 0.99), 1),
        max_ms=round(values[-1], 1),
    )
