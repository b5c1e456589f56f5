"""The copy loop's per-record work in C: the native copy core (``worker/copying/native/copy_core.c``).

On the common path a route's records never become Python objects. :meth:`CopyCore.copy` has the library
take a batch from the source consumer's own queue, and for each run of a partition's records it decides
what :class:`worker.copying.sender.Sender` decides for a run (the destination topic, the delivery run and
its callbacks, how many value bytes it may hold, the partition's window), then has the library hand the
run's records to the destination producer, stamped with the provenance header, version 2, exactly as
:meth:`common.core.provenance.TopicStamper.stamp` stamps a record without one (an integration test holds
the two equal). The ledger is told what each run sent and closed, as the sender tells it.

What a record's copy gets (a prefix, or nothing: loop prevention, a tree level) depends only on its source
topic and its previous provenance header up to the last ``|``; the stamper decides it the first time and
the library learns it (:meth:`CopyCore._learn`). Whatever is not such a run goes to the Python sender as a
:class:`CoreMessage`, in order: a consumer error, a record whose previous header is not learned yet (or is
malformed), and every record of a partition the Python sender settles specially (offsets the resume rule
skips, a partition settled record by record). So both paths share one ledger and one set of rules; the
core only does the per-record work faster.

The records come from a fetch queue of the library's own, which every assigned partition's queue is
forwarded to (:meth:`CopyCore.copy` forwards them again after each change of the consumer's assignment:
librdkafka drops a forward when a partition is unassigned), a batch per call. The library reads the
consumer's own queue first, with librdkafka's event API, so the other events on that queue come back as
items here rather than through confluent-kafka's callbacks (which only run under confluent-kafka's own
calls): a log line goes to the log, the answer to a commit not waited for goes to ``on_commit``, an error
of no partition is logged; records fetched before their partition was forwarded come from there too,
ahead of the fetch queue's.

What it takes from confluent-kafka's internals is checked in :func:`load`: the known major version, a
client object's ``rd_kafka_t *`` right after its object header (checked by the handle's type), and the
per-record state its delivery callback reads (described in ``copy_core.c``). Without the library (``make
setup`` builds it; an installed wheel has none) or with another confluent-kafka, :func:`load` says why
and the copier runs the Python sender alone.

States of a run here: OPEN (records handed over; the producer's queue was full: waiting on the
destination) --its last record handed over with ``on_last``--> CLOSED (:meth:`DeliveryLedger.closed`);
OPEN --the producer refused a record, or the destination stalled--> CUT SHORT (the records handed over
settled as far as their reports prove, the partition stopped).

Driven by the copier's one thread; the library holds no state of its own between calls but the batch
it has taken and not handed out, which :meth:`CopyCore.copy` always empties before it returns.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from ferry.common.core.provenance import HEADER, ProvenanceError, Stamper
from ferry.common.logs import LibrdkafkaLog
from ferry.worker.copying.committer import CommitAnswer, Committer
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.names import TopicNames, TopicPartitionKey
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.copying.sender import WINDOW_RECORDS_PER_BATCH, Sender

log = logging.getLogger(__name__)

LIBRARY = Path(__file__).resolve().parent / "native" / "build" / "libferry-copy-core.so"
# confluent-kafka releases whose internals copy_core.c relies on (see its comment).
KNOWN_CONFLUENT_MAJOR = "2."

_COPY, _UNKNOWN, _ERROR, _LOG, _COMMIT, _OTHER, _SKIP = range(7)
_CLOSED, _QUEUE_FULL, _REFUSED = range(3)
_CONSUMER_TYPE, _PRODUCER_TYPE = 1, 0  # rd_kafka_type_t
_NO_TIMESTAMP = 0  # RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
# librdkafka's log levels (syslog's) -> Python's.
_LOG_LEVELS = {0: logging.CRITICAL, 1: logging.CRITICAL, 2: logging.CRITICAL, 3: logging.ERROR, 4: logging.WARNING}


class _Item(ctypes.Structure):
    _fields_ = [
        ("topic", ctypes.c_char_p),
        ("partition", ctypes.c_int32),
        ("kind", ctypes.c_int32),
        ("offset", ctypes.c_int64),
        ("size", ctypes.c_int64),
        ("error", ctypes.c_int32),
        ("unused", ctypes.c_int32),
    ]


class _Record(ctypes.Structure):
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("value_len", ctypes.c_size_t),
        ("key", ctypes.c_void_p),
        ("key_len", ctypes.c_size_t),
        ("timestamp", ctypes.c_int64),
        ("timestamp_type", ctypes.c_int32),
        ("headers", ctypes.c_int32),
    ]


class _RunArgs(ctypes.Structure):
    _fields_ = [
        ("producer", ctypes.c_void_p),
        ("destination_topic", ctypes.c_char_p),
        ("destination_partition", ctypes.c_int32),
        ("unused", ctypes.c_int32),
        ("producer_handle", ctypes.c_void_p),
        ("on_first", ctypes.c_void_p),
        ("on_between", ctypes.c_void_p),
        ("on_last", ctypes.c_void_p),
        ("room", ctypes.c_int64),
        ("alone_above", ctypes.c_int64),
        ("handed_before", ctypes.c_int64),
        ("bytes_before", ctypes.c_int64),
    ]


class _RunOut(ctypes.Structure):
    _fields_ = [
        ("handed", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("status", ctypes.c_int32),
        ("error", ctypes.c_int32),
        ("first_refs", ctypes.c_int32),
        ("between_refs", ctypes.c_int32),
        ("last_refs", ctypes.c_int32),
        ("unused", ctypes.c_int32),
        ("first_offset", ctypes.c_int64),
        ("last_offset", ctypes.c_int64),
    ]


def _signatures(library: ctypes.CDLL) -> None:
    p, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    table: dict[str, tuple[Any, list[Any]]] = {
        "ferry_core_new": (p, [ctypes.c_char_p]),
        "ferry_core_free": (None, [p]),
        "ferry_core_fetch": (ctypes.c_int, [p, p, ctypes.c_int, ctypes.c_int]),
        "ferry_core_forward": (ctypes.c_int, [p, p, ctypes.c_char_p, i32]),
        "ferry_core_peek": (ctypes.c_int, [p, ctypes.POINTER(_Item)]),
        "ferry_core_record": (ctypes.c_int, [p, ctypes.POINTER(_Record)]),
        "ferry_core_header": (
            ctypes.c_int,
            [p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(p), ctypes.POINTER(ctypes.c_size_t)],
        ),
        "ferry_core_error_text": (ctypes.c_int, [p, ctypes.c_char_p, ctypes.c_size_t]),
        "ferry_core_committed": (
            ctypes.c_int,
            [
                p,
                ctypes.c_int,
                ctypes.POINTER(ctypes.c_char_p),
                ctypes.POINTER(i32),
                ctypes.POINTER(i64),
                ctypes.POINTER(i32),
            ],
        ),
        "ferry_core_drop": (None, [p]),
        "ferry_core_learn": (
            ctypes.c_int,
            [
                p,
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_size_t,
            ],
        ),
        "ferry_core_drop_run": (i64, [p]),
        "ferry_core_pass_run": (i64, [p, ctypes.POINTER(i64), i64]),
        "ferry_core_send_run": (
            ctypes.c_int,
            [p, ctypes.POINTER(_RunArgs), ctypes.POINTER(i64), i64, ctypes.POINTER(_RunOut)],
        ),
        "rd_kafka_type": (ctypes.c_int, [p]),
        "rd_kafka_name": (ctypes.c_char_p, [p]),
        "ferry_core_log": (ctypes.c_int, [p, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p)]),
        "rd_kafka_err2str": (ctypes.c_char_p, [ctypes.c_int]),
    }
    for name, (result, arguments) in table.items():
        function = getattr(library, name)
        function.restype = result
        function.argtypes = arguments


_loaded: ctypes.CDLL | None = None


def _confluent_kafka_version() -> str:
    return importlib.metadata.version("confluent-kafka")


def load() -> tuple[ctypes.CDLL | None, str]:
    """The library, or None and why the copier runs the Python sender alone."""
    global _loaded
    if _loaded is not None:
        return _loaded, ""
    version = _confluent_kafka_version()
    if not version.startswith(KNOWN_CONFLUENT_MAJOR):
        return None, f"confluent-kafka {version} is not a release the native copy core knows"
    if not LIBRARY.exists():
        return None, f"no {LIBRARY.name} (built by `make setup`)"
    try:
        library = ctypes.CDLL(str(LIBRARY))
        _signatures(library)
    except (OSError, AttributeError) as exc:
        return None, f"{LIBRARY.name} does not load: {exc}"
    _loaded = library
    return library, ""


def client_handle(library: ctypes.CDLL, client: Any, consumer: bool) -> int | None:
    """The ``rd_kafka_t *`` of confluent-kafka ``client``, or None when its layout is not the known one."""
    pointer = ctypes.c_void_p.from_address(id(client) + object.__basicsize__).value
    if not pointer or library.rd_kafka_type(pointer) != (_CONSUMER_TYPE if consumer else _PRODUCER_TYPE):
        return None
    return int(pointer)


@dataclass(frozen=True)
class CommittedPartition:
    """One partition of a commit's answer, as the core reads it (``TopicPartition.error`` cannot be set)."""

    topic: str
    partition: int
    offset: int
    error: KafkaError | None


class CoreMessage:
    """A consumed message the core hands to the Python sender: what it reads of a confluent-kafka ``Message``."""

    __slots__ = ("_error", "_headers", "_key", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        *,
        topic: str | None,
        partition: int,
        offset: int,
        value: bytes | None = None,
        key: bytes | None = None,
        timestamp: tuple[int, int] = (_NO_TIMESTAMP, 0),
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._value, self._key, self._timestamp, self._headers, self._error = value, key, timestamp, headers, error

    def error(self) -> KafkaError | None:
        return self._error

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def key(self) -> bytes | None:
        return self._key

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)


class CopyCore:
    """A route's copy loop through the native library (see the module docstring)."""

    def __init__(
        self,
        *,
        library: ctypes.CDLL,
        consumer: Any,
        consumer_handle: int,
        committer: Committer,
        ledger: DeliveryLedger,
        states: PartitionStates,
        names: TopicNames,
        stamper: Stamper,
        sender: Sender,
        on_commit: Callable[[KafkaError | None, Sequence[CommitAnswer]], None],
        log: LibrdkafkaLog,
        clock: Callable[[], float],
        most: int,
    ) -> None:
        """``consumer_handle``: ``consumer``'s (:func:`client_handle`). ``sender``: the Python sender, for
        whatever is not a run the core hands over. ``on_commit``: the consumer's answer to a commit not waited for.
        ``log``: the consumer's librdkafka logger (its log lines come to the core). ``most``: the records one
        :meth:`copy` takes at most (``worker.consume_batch``), and so one run."""
        self._library = library
        self._consumer = consumer  # held: its handle is valid while it lives
        self._consumer_handle = consumer_handle
        self._committer = committer
        self._ledger = ledger
        self._states = states
        self._names = names
        self._stamper = stamper
        self._sender = sender
        self._on_commit = on_commit
        self._log = log
        self._client_name = (library.rd_kafka_name(consumer_handle) or b"").decode(errors="replace")
        self._clock = clock
        self._core = library.ferry_core_new(HEADER.encode())
        if not self._core:
            raise MemoryError("the native copy core")
        self._item = _Item()
        self._record = _Record()
        self._args = _RunArgs()
        self._out = _RunOut()
        self._most = most
        self._offsets = (ctypes.c_int64 * most)()  # a run's source offsets
        self._text = ctypes.create_string_buffer(1024)
        self._increment = ctypes.pythonapi.Py_IncRef
        self._increment.argtypes = [ctypes.py_object]
        # Per source topic: its destination, encoded (what its copies get is taught to the library).
        self._destinations: dict[str, bytes] = {}
        self._forwarded_changes = -1  # the states' assignment_changes when the partitions were last forwarded

    def close(self) -> None:
        """Frees the library's state (before the consumer closes: a pending event holds the consumer)."""
        if self._core:
            self._library.ferry_core_free(self._core)
            self._core = None

    def copy(self, most: int, timeout: float) -> tuple[int, int, int]:
        """Consumes a batch of up to ``most`` messages (waiting up to ``timeout`` for the first) and hands it to
        the producer; returns (records sent, records skipped, value bytes sent), as :meth:`Sender.send`."""
        library, core, item = self._library, self._core, self._item
        if self._states.assignment_changes != self._forwarded_changes:
            self._forward()
        if library.ferry_core_fetch(core, self._consumer_handle, int(timeout * 1000), most) < 0:
            raise MemoryError("the native copy core")
        producer = self._committer.producer
        producer_handle = client_handle(library, producer, consumer=False)
        stopped = self._states.stopped
        skips, exact = self._ledger.skips, self._ledger.exact
        windowed_from = self._committer.batch_size // WINDOW_RECORDS_PER_BATCH
        python: list[Any] = []  # messages for the Python sender, in order
        copied = skipped = size = 0
        while library.ferry_core_peek(core, ctypes.byref(item)):
            kind = item.kind
            if kind in (_COPY, _SKIP, _UNKNOWN):
                topic = item.topic.decode()
                key = (topic, item.partition)
                if stopped and key in stopped:
                    library.ferry_core_drop_run(core)  # fetched before the pause took effect; never committed past
                    continue
                encoded = self._destination(topic)
                if kind == _UNKNOWN or producer_handle is None or (skips and key in skips) or (exact and key in exact):
                    python.append(self._take(topic, learn=kind == _UNKNOWN))
                    continue
                if python:  # what came before goes first
                    sent = self._sender.send(python)
                    python = []
                    copied, skipped, size = copied + sent[0], skipped + sent[1], size + sent[2]
                    stopped = self._states.stopped
                    if stopped and key in stopped:
                        continue
                if kind == _SKIP:  # not for this route's destination: passed at once
                    count = library.ferry_core_pass_run(core, self._offsets, self._most)
                    for offset in self._offsets[:count]:
                        self._ledger.passed(key, offset)
                    skipped += count
                    continue
                if item.size >= windowed_from and not self._sender.window_opens(key, item.offset):
                    continue  # stopped meanwhile: the next turn drops its records
                run_copied, run_size = self._send_run(key, encoded, item.partition, producer, producer_handle)
                copied += run_copied
                size += run_size
            elif kind == _ERROR and item.topic:
                python.append(self._take(item.topic.decode(), learn=False))
            else:
                self._serve_event(kind)
        if python:
            sent = self._sender.send(python)
            copied, skipped, size = copied + sent[0], skipped + sent[1], size + sent[2]
        return copied, skipped, size

    def _forward(self) -> None:
        """Forwards every assigned partition's queue to the library's fetch queue (again: forwarding one
        that is forwarded already changes nothing)."""
        for topic, partition in sorted(self._states.assigned):
            if self._library.ferry_core_forward(self._core, self._consumer_handle, topic.encode(), partition):
                raise MemoryError("the native copy core")
        self._forwarded_changes = self._states.assignment_changes

    def _destination(self, topic: str) -> bytes:
        """``topic``'s destination topic, encoded; the first time, the library learns what its local records'
        copies get."""
        try:
            return self._destinations[topic]
        except KeyError:
            pass
        destination = self._names.destination(topic)
        self._learn(topic, None)
        encoded = self._destinations[topic] = destination.encode()
        return encoded

    def _learn(self, topic: str, own: bytes | None) -> None:
        """Teaches the library what the copy of ``topic``'s record gets when its provenance header is ``own``
        (None: a local record), as the stamper decides it; nothing for a header the stamper refuses."""
        destination = self._names.destination(topic)
        try:
            stamped = self._stamper.for_topic(topic, destination).stamp(None if own is None else [(HEADER, own)], 0)
        except ProvenanceError:
            return
        if own is None:
            head = b""
        elif own[:2] == b"3|":
            head = own
        else:
            head = own.rpartition(b"|")[0]
        # The copy of such a record at offset 0: its header's value less the "0" is the prefix.
        value = None if stamped is None else stamped[-1][1]
        prefix = b"" if value is None else value[:-1]
        if self._library.ferry_core_learn(
            self._core, topic.encode(), head, len(head), own is None, value is None, prefix, len(prefix)
        ):
            raise MemoryError("the native copy core")

    def _send_run(
        self, key: TopicPartitionKey, destination: bytes, partition: int, producer: Any, handle: int
    ) -> tuple[int, int]:
        """Hands the run that starts with the peeked record to the producer; returns (records, value bytes)."""
        library, core, args, out, offsets = self._library, self._core, self._args, self._out, self._offsets
        ledger, committer = self._ledger, self._committer
        delivery = ledger.open_run()
        on_first, on_last = delivery.on_first, delivery.on_last
        on_between = delivery.on_between if committer.reports_between else None
        args.producer = handle
        args.destination_topic = destination
        args.destination_partition = partition
        args.producer_handle = id(producer)
        args.on_first = id(on_first)
        args.on_between = None if on_between is None else id(on_between)
        args.on_last = id(on_last)
        args.room = committer.batch_size
        args.alone_above = committer.record_alone_above
        handed = handed_bytes = 0
        told_pending = -1  # a record told to the ledger as sent while the producer's queue was full
        full_since: float | None = None
        while True:
            args.handed_before = handed
            args.bytes_before = handed_bytes
            if library.ferry_core_send_run(core, ctypes.byref(args), offsets, self._most, ctypes.byref(out)) < 0:
                raise MemoryError("the native copy core")
            # Each callback's reference, taken before anything polls the producer (its report releases it).
            for callback, count in (
                (on_first, out.first_refs),
                (on_between, out.between_refs),
                (on_last, out.last_refs),
            ):
                for _ in range(count):
                    self._increment(callback)
            count = out.handed
            if count:
                first = out.first_offset
                if out.last_offset - first == count - 1:  # consecutive (the common case): one span
                    told = int(first == told_pending)
                    if count > told:
                        ledger.sent_span(key, first + told, count - told)
                else:
                    sent = offsets[:count]
                    if sent[0] == told_pending:
                        del sent[0]
                    if sent:
                        ledger.sent(key, sent)
                told_pending = -1
                handed += count
                handed_bytes += out.bytes
            if out.status == _CLOSED:
                ledger.closed(key, delivery, handed, handed_bytes)
                self._states.count_copied(key, handed, handed_bytes)
                return handed, handed_bytes
            # The record the producer did not take is told as sent (once), as the Python sender tells one it holds.
            library.ferry_core_peek(core, ctypes.byref(self._item))
            offset = self._item.offset
            if offset != told_pending:
                ledger.sent(key, [offset])
                told_pending = offset
            if out.status == _QUEUE_FULL:
                if full_since is None:
                    full_since = self._clock()
                if self._sender.wait_on_destination(key, offset, full_since):
                    continue
                library.ferry_core_drop(core)  # the destination stalled: the producer failed, the partition stopped
            else:
                reason = library.rd_kafka_err2str(out.error).decode()
                library.ferry_core_drop(core)
                self._sender.refused(key, offset, KafkaError(out.error, reason))
            self._sender.settle_cut_short(delivery, handed)
            if handed:
                self._states.count_copied(key, handed, handed_bytes)
            return handed, handed_bytes

    def _take(self, topic: str, learn: bool) -> CoreMessage:
        """The peeked item as a message for the Python sender (then dropped from the library's batch). With
        ``learn``, the library learns what the copies of records with its provenance header get."""
        library, core, item = self._library, self._core, self._item
        if item.kind == _ERROR:
            library.ferry_core_error_text(core, self._text, len(self._text))
            message = CoreMessage(
                topic=topic,
                partition=item.partition,
                offset=item.offset,
                error=KafkaError(item.error, self._text.value.decode(errors="replace")),
            )
            library.ferry_core_drop(core)
            return message
        record = self._record
        library.ferry_core_record(core, ctypes.byref(record))
        headers: list[tuple[str, bytes | None]] | None = None
        if record.headers:
            headers = []
            name, value, value_size = ctypes.c_char_p(), ctypes.c_void_p(), ctypes.c_size_t()
            for index in range(record.headers):
                library.ferry_core_header(
                    core, index, ctypes.byref(name), ctypes.byref(value), ctypes.byref(value_size)
                )
                header_value = None if value.value is None else ctypes.string_at(value.value, value_size.value)
                headers.append(((name.value or b"").decode(), header_value))
        message = CoreMessage(
            topic=topic,
            partition=item.partition,
            offset=item.offset,
            value=None if record.value is None else ctypes.string_at(record.value, record.value_len),
            key=None if record.key is None else ctypes.string_at(record.key, record.key_len),
            timestamp=(record.timestamp_type, record.timestamp),
            headers=headers,
        )
        library.ferry_core_drop(core)
        if learn:
            own = None
            for name_text, header_value in headers or ():
                if name_text == HEADER:
                    own = header_value if header_value is not None else b""  # the last one counts
            self._learn(topic, own)  # own None: a local record (the library forgets all beyond its bound)
        return message

    def _serve_event(self, kind: int) -> None:
        """A log line, a commit's answer, or another event of the consumer's queue: what confluent-kafka's
        callback for it would do, then dropped."""
        library, core, item = self._library, self._core, self._item
        if kind == _LOG:  # as confluent-kafka hands it to the client's logger
            facility, text = ctypes.c_char_p(), ctypes.c_char_p()
            library.ferry_core_log(core, ctypes.byref(facility), ctypes.byref(text))
            level = _LOG_LEVELS.get(item.error, logging.INFO if item.error <= 6 else logging.DEBUG)
            self._log.log(
                level,
                "%s [%s] %s",
                (facility.value or b"").decode(errors="replace"),
                self._client_name,
                (text.value or b"").decode(errors="replace"),
            )
        elif kind == _COMMIT:
            partitions: list[CommittedPartition] = []
            topic, partition, offset, error = ctypes.c_char_p(), ctypes.c_int32(), ctypes.c_int64(), ctypes.c_int32()
            index = 0
            while library.ferry_core_committed(
                core, index, ctypes.byref(topic), ctypes.byref(partition), ctypes.byref(offset), ctypes.byref(error)
            ):
                partitions.append(
                    CommittedPartition(
                        topic=(topic.value or b"").decode(),
                        partition=partition.value,
                        offset=offset.value,
                        error=KafkaError(error.value) if error.value else None,
                    )
                )
                index += 1
            self._on_commit(KafkaError(item.error) if item.error else None, partitions)
        elif kind == _ERROR:  # an error of no partition: the client retries by itself, as confluent-kafka's logs say
            library.ferry_core_error_text(core, self._text, len(self._text))
            log.debug("source consumer: %s", self._text.value.decode(errors="replace"))
        library.ferry_core_drop(core)
