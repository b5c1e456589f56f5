"""The one place that builds Kafka clients (confluent-kafka / librdkafka).

Cluster settings come from the config's ``clusters`` entries and pass through as librdkafka
properties (security settings included); Ferry's own defaults for each role sit here.

Every client logs through Python logging (:class:`common.logs.LibrdkafkaLog` as its ``logger``
setting, carrying the context fields it was built under), never to stderr by itself. confluent-kafka
then queues librdkafka's messages until the client is polled: consumers and producers are polled by
their owners anyway (``consume``/``poll``/``flush``; a message costs its own record, a copied record
costs nothing); AdminClients, whose results come as futures, are polled here, by a daemon thread
every :data:`ADMIN_LOG_INTERVAL_S` and once more when the process exits; a consumer its owner
only asks for offsets or metadata is served by :func:`serve_logs`.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from ferry.common import logs

log = logging.getLogger(__name__)

# A replicator must not lose or reorder: idempotent, fully acknowledged writes.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # Ferry's own small writes (heartbeats, the bench's sources) stay uncompressed; a worker's
    # destination producer takes its route's `compression` (lz4 by default: RouteConfig).
    "compression.type": "none",
    # Memory stays bounded under a backlog: produce() raises BufferError beyond this (librdkafka's
    # default is 1 GiB) and the worker waits for deliveries, which slows consumption.
    "queue.buffering.max.kbytes": 65536,
}

# Ferry consumes with assign(), never subscribe(), and commits only what the destination acked.
CONSUMER_DEFAULTS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    # Records fetched ahead of the copy loop, per consumer (librdkafka's default is 64 MiB).
    "queued.max.messages.kbytes": 32768,
    # Larger fetches: one worker's single fetch pipeline per broker bounded its throughput; with
    # 4 MiB per partition it copied 20-25 % more records/s (BENCHMARKS.md).
    "max.partition.fetch.bytes": 4 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    # Measured (BENCHMARKS.md "Client settings by measurement"). Once the prefetch queue
    # is over queued.min.messages or the kbytes cap above, librdkafka stops fetching for this long.
    # Its default, 1000 ms, is several times what the copy loop takes to drain the queue on a
    # quiet machine, so a busy worker sat idle most of each second (a hot partition at 0.5x);
    # 0 makes the fetcher spin while the queue is full (23-45 % more CPU per record, measured);
    # 10 ms removed the spin and leaves at most 10 ms idle per drained queue.
    "fetch.queue.backoff.ms": 10,
    # fetch.wait.max.ms stays librdkafka's 500: it only bounds how long the broker holds a fetch
    # that found nothing (a record arriving ends the wait at once), so 10-100 ms bought no
    # measurable records/s, but they make an idle worker poll: 200 idle partitions cost 2.2 % of
    # a core at 10 ms, 1.3 % at 25, 0.55 % at 100, 0.35 % at 500 (measured).
}


# How often the AdminClients' queued log messages are handed to Python logging.
ADMIN_LOG_INTERVAL_S = 1.0


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    # The logger first: a caller's own "logger" override replaces it.
    settings: dict[str, Any] = {"logger": logs.LibrdkafkaLog(logs.current_fields())}
    for layer in layers:
        settings.update(layer)
    return settings


def producer(cluster: Mapping[str, Any], **overrides: Any) -> Producer:
    return Producer(merged(PRODUCER_DEFAULTS, cluster, overrides))


# ``Producer.produce`` called with every argument positional, in the order of confluent-kafka's C
# signature: topic, value, key, partition, delivery callback (``callback``), None (its alias
# ``on_delivery``; an explicit None in the callback's place would override the alias), timestamp
# (ms, 0: none), headers.
PositionalProduce = Callable[[str, Any, Any, int, "Callable[[Any, Any], None] | None", None, int, Any], None]


def positional_produce(producer: Producer) -> PositionalProduce:
    """``producer.produce``, for a copy loop that calls it positionally (see :data:`PositionalProduce`).

    Why: confluent-kafka parses keyword arguments by name on every call; the same call with
    positional arguments costs about 0.3 µs less of CPU per record (measured with a queue-only
    producer: 920 ns against 1,240 for a 100 B record with three headers), a tenth of the whole
    copy of a 100 B record. The order is pinned by an integration test against a real broker."""
    return producer.produce


def fence_writer(cluster: Mapping[str, Any], transactional_id: str, timeout_s: float) -> None:
    """Fences every producer that used ``transactional_id`` on ``cluster``: a throwaway producer's
    ``init_transactions`` bumps the id's epoch, which aborts the old producer's open transaction and
    makes its every later write fail with a fatal ``_FENCED`` (what Kafka Connect does before a new
    generation of tasks starts). Raises KafkaException when the cluster's transaction coordinator does
    not answer within ``timeout_s``."""
    fencer = Producer(merged(PRODUCER_DEFAULTS, cluster, {"transactional.id": transactional_id}))
    try:
        fencer.init_transactions(timeout_s)
    finally:
        fencer.flush(0)


def consumer(cluster: Mapping[str, Any], group_id: str, **overrides: Any) -> Consumer:
    return Consumer(merged(CONSUMER_DEFAULTS, cluster, {"group.id": group_id}, overrides))


def batch_to_end(ends: Mapping[int, int], positions: Mapping[int, int], most: int) -> int:
    """How many records to ask ``consume()`` for, reading partitions to ``ends`` (partition -> end
    offset) from ``positions`` (partition -> next offset; a negative one, nothing fetched yet, counts
    from 0): no more than are left, at most ``most``, at least 1 (pure).

    ``consume()`` waits out its whole timeout while it has fewer records than asked for, so a read
    that asks for no more than what is left ends at its last record instead."""
    left = sum(max(0, end - max(0, positions.get(partition, 0))) for partition, end in ends.items())
    return max(1, min(most, left))


def admin(cluster: Mapping[str, Any], **overrides: Any) -> AdminClient:
    client = AdminClient(merged(cluster, overrides))
    _admin_logs.add(client)
    return client


def log_offsets(
    admin_client: AdminClient,
    partitions: Iterable[tuple[str, int]],
    latest: bool,
    timeout_s: float,
    *,
    stable: bool = False,
) -> dict[tuple[str, int], int]:
    """The log-end (``latest``) or log-start offset of each (topic, partition), in one ListOffsets request
    per partition leader rather than one round trip per partition. ``stable`` with ``latest``: the last
    stable offset instead, where a ``read_committed`` reader's read ends (below any open transaction).
    A partition the cluster does not answer for is left out; no answer at all raises ``KafkaException``
    or ``TimeoutError``."""
    spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
    request = {TopicPartition(topic, partition): spec for topic, partition in partitions}
    if not request:
        return {}
    options: dict[str, Any] = {"isolation_level": IsolationLevel.READ_COMMITTED} if stable else {}
    futures = admin_client.list_offsets(request, request_timeout=timeout_s, **options)
    offsets: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            offsets[(tp.topic, tp.partition)] = int(future.result(timeout_s).offset)
        except KafkaException:
            continue
        except FutureTimeout:
            raise TimeoutError(f"no answer to ListOffsets within {timeout_s:g} s") from None
    return offsets


def serve_logs(client: Consumer | Producer | AdminClient) -> None:
    """Hands the client's queued librdkafka messages to Python logging, waiting for nothing.

    For a consumer whose owner never consumes with it (offset and metadata look-ups) and only while
    it has no assignment: ``poll`` would hand out a record otherwise."""
    client.poll(0)


class _AdminLogs:
    """Polls every live AdminClient built here, so that its librdkafka messages reach the log.

    States: IDLE (no client yet) -> SERVING (a daemon thread polls the live clients every
    ``interval_s``; a client that was garbage-collected drops out of the weak set) -> at process
    exit, one last pass. Polling an AdminClient only serves its log and error callbacks: its
    results come as futures on librdkafka's background thread, so this never takes an answer
    from its owner.
    """

    def __init__(self, interval_s: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self._interval_s = interval_s
        self._sleep = sleep
        self._clients: weakref.WeakSet[AdminClient] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, client: AdminClient) -> None:
        with self._lock:
            self._clients.add(client)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ferry-admin-logs", daemon=True)
                self._thread.start()
                atexit.register(self.serve)

    def serve(self) -> None:
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            try:
                client.poll(0)
            except Exception as exc:  # a callback raised: the other clients and later passes go on
                log.warning("serving an AdminClient's log: %s", exc)

    def _run(self) -> None:
        while True:
            self._sleep(self._interval_s)
            self.serve()


_admin_logs = _AdminLogs(ADMIN_LOG_INTERVAL_S)
