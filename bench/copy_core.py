"""The bench's ``core-copy`` loop: the stamped copy in C inside a Python process (``bench/native/core.c``).

Python makes the clients (Ferry's, :mod:`common.kafka.clients`) and calls the C loop once per batch,
through ``ctypes``, with the raw ``rd_kafka_t`` handles of confluent-kafka's own consumer and producer.
Per batch it reads one summary per run of a partition's records, and it serves the producer's delivery
reports: one Python call per run, whose last record carries :func:`copy`'s callback.

What the C loop takes from confluent-kafka's internals is checked here before the first call: a client
object's ``rd_kafka_t *`` is its first field after the object header (the handle's name and type must
match the client), and the library is the wheel's ``librdkafka`` that confluent-kafka runs (one copy of
its symbols). The per-record state a report's callback travels in is described in ``core.c``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ferry.bench.errors import BenchError
from ferry.common.core.provenance import HEADER, Stamper

# Built by `make setup` (scripts/build-native-copy.sh); only the `core-copy` system loads it.
LIBRARY = Path(__file__).resolve().parent / "native" / "build" / "libferry-copy-core.so"
BATCH = 10_000
CONSUME_TIMEOUT_MS = 10
_CONSUMER, _PRODUCER = 1, 0  # rd_kafka_type_t


class _Run(ctypes.Structure):
    _fields_ = [
        ("partition", ctypes.c_int32),
        ("topic_index", ctypes.c_int32),
        ("first_offset", ctypes.c_int64),
        ("last_offset", ctypes.c_int64),
        ("records", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
    ]


class _Result(ctypes.Structure):
    _fields_ = [
        ("consumed", ctypes.c_int64),
        ("copied", ctypes.c_int64),
        ("errors", ctypes.c_int64),
        ("refused", ctypes.c_int64),
        ("runs", ctypes.c_int32),
        ("callbacks", ctypes.c_int32),
        ("queue_full", ctypes.c_int32),
        ("unused", ctypes.c_int32),
    ]


def _library() -> ctypes.CDLL:
    if not LIBRARY.exists():
        raise BenchError(f"no {LIBRARY}: run `make setup` (or `make native`) to build it")
    library = ctypes.CDLL(str(LIBRARY))
    library.ferry_core_copy.restype = ctypes.c_int
    library.ferry_core_copy.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_char_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(_Run),
        ctypes.c_int,
        ctypes.POINTER(_Result),
    ]
    library.rd_kafka_name.restype = ctypes.c_char_p
    library.rd_kafka_name.argtypes = [ctypes.c_void_p]
    library.rd_kafka_type.restype = ctypes.c_int
    library.rd_kafka_type.argtypes = [ctypes.c_void_p]
    return library


def _handle(library: ctypes.CDLL, client: Any, kind: int) -> int:
    """The ``rd_kafka_t *`` of confluent-kafka ``client`` (a consumer or producer: ``kind``), checked."""
    pointer = ctypes.c_void_p.from_address(id(client) + object.__basicsize__).value
    if not pointer or library.rd_kafka_type(pointer) != kind:
        raise BenchError("confluent-kafka's client layout is not the one the core-copy loop knows")
    name = (library.rd_kafka_name(pointer) or b"").decode()
    if "#" not in name:
        raise BenchError(f"confluent-kafka's client layout is not the one the core-copy loop knows ({name!r})")
    return pointer


def copy(consumer: Any, producer: Any, topics: list[str], stopping: Callable[[], bool]) -> list[str]:
    """Copies ``topics`` until ``stopping()``; returns the delivery failures (their errors, as text)."""
    library = _library()
    consumer_handle = _handle(library, consumer, _CONSUMER)
    producer_handle = _handle(library, producer, _PRODUCER)
    encoded = [t.encode() for t in topics]
    # Each topic's version 2 prefix: the header of its offset-0 copy, less the offset.
    prefixes = [Stamper("src").for_topic(t, t).stamp(None, 0)[0][1][:-1] for t in topics]  # type: ignore[index]
    topic_array = (ctypes.c_char_p * len(topics))(*encoded)
    prefix_array = (ctypes.c_char_p * len(topics))(*prefixes)
    length_array = (ctypes.c_size_t * len(topics))(*(len(p) for p in prefixes))
    runs = (_Run * BATCH)()
    result = _Result()
    failures: list[str] = []
    delivered: dict[tuple[int, int], int] = {}  # (topic index, partition) -> the newest run end delivered
    sent: dict[tuple[int, int], int] = {}  # ... and handed to the producer

    def on_run_delivered(error: Any, message: Any) -> None:
        if error is not None:
            failures.append(str(error))
        else:
            delivered[encoded.index(message.topic().encode()), message.partition()] = message.offset()

    callback = ctypes.py_object(on_run_delivered)
    increment = ctypes.pythonapi.Py_IncRef
    increment.argtypes = [ctypes.py_object]
    header = HEADER.encode()
    poll = producer.poll
    call = library.ferry_core_copy
    while not stopping():
        if call(
            consumer_handle,
            producer_handle,
            CONSUME_TIMEOUT_MS,
            BATCH,
            header,
            topic_array,
            prefix_array,
            length_array,
            len(topics),
            id(producer),
            id(on_run_delivered),
            runs,
            BATCH,
            ctypes.byref(result),
        ):
            raise BenchError("the core-copy loop ran out of memory")
        for _ in range(result.callbacks):  # each report's state holds a reference, released after its call
            increment(callback)
        for index in range(result.runs):  # Python's share: a summary per run, as a ledger takes it
            run = runs[index]
            sent[run.topic_index, run.partition] = run.last_offset
        if result.refused:
            failures.append(f"{result.refused} records refused by the producer")
        poll(0.05 if result.queue_full else 0)
    return failures
