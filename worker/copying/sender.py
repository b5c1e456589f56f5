"""The producing half of a route's copy loop: a consumed batch handed to the destination producer, stamped.

Every record goes to the same partition of the route's destination topic with its key, value,
headers and timestamp, plus Ferry's provenance header (:mod:`common.core.provenance`). A record the
route must not copy (loop prevention, a tree distributor's level) is settled at once in the
watermark, and one the destination already holds (the resume rule's skip set) too, so neither ever
holds commits back.

Each partition's records go to the producer as a delivery run (:class:`worker.copying.ledger.DeliveryRun`):
only its first and its last record carry a Python delivery callback (the records between: see
``between`` in :meth:`Sender.send`). Which record is the last is known only when the next message is
another partition's, or the batch ends, so the newest record is *held back* one step: handed over as
one between the ends when another record of its run follows, or with the run's closing callback when
the run ends. A run ends in one of two places: when the partition's records end (another partition's
follow, or the batch ends), or when the next record does not fit it (a record the destination may refuse
on its own, larger than ``Committer.record_alone_above``, and every record of a partition the ledger
settles record by record, ``exact``, is a run of its own; a run holds at most a producer batch,
``Committer.batch_size``, of value bytes).

A partition's next run of large records (:data:`WINDOW_RECORDS_PER_BATCH`) goes to the producer only
when that partition's runs in flight leave room for it, or the route's other partitions have a batch in
flight (:data:`WINDOW_BATCHES`). When neither holds, the partition's records left in the batch are
handed over after the other partitions', and the sender then serves delivery reports until one holds,
so one partition's full window never keeps the others from the producer.

A producer whose queue is full is served (its delivery reports) until it takes the record: back-pressure
on the source. A queue that stays full for ``worker.destination_stall_s`` fails the producer.

States of a delivery run here: OPEN (records handed over, the newest held back) --the partition's
records end, or the next record does not fit--> CLOSED (its last record handed over with the closing
callback: :meth:`DeliveryLedger.closed`). A record the producer refuses stops its partition
(:class:`worker.copying.stopping.PartitionStopper`); the run's records handed over before it are
settled as far as their reports prove (:meth:`DeliveryLedger.settle_cut_short`).

Driven by the copier's one thread (the worker's copy loop); delivery callbacks run inside ``poll`` and
``flush`` on that same thread, so no state here needs a lock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaException

from ferry.common.core.provenance import ProvenanceError, Stamper
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.copying.committer import FLUSH_TIMEOUT_S, Committer
from ferry.worker.copying.ledger import DeliveryLedger, DeliveryRun
from ferry.worker.copying.names import TopicNames, TopicPartitionKey
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.copying.stopping import PartitionStopper
from ferry.worker.errors import RETRY_BACKOFF_S, PartitionDeferred, PartitionStopped, ProducerFailed, delivery_failure

# A partition's window: how many producer batches (``batch.size``) of its records the copy loop lets the
# producer hold at once while the route's other partitions hold less than one batch. librdkafka's
# idempotent producer sends one request per partition at a time, and while it waits for the answer, the
# records queued behind it make its broker thread wake again and again without sending, at a cost that
# grows with the queue: at one partition of 10 KiB records that busy wait took most of the CPU. Two
# batches keep one in flight and the next one filling. With several busy partitions the window does not
# bind: their requests keep the producer busy, and waiting on one partition's window there cost more
# throughput, and so CPU per record, than it saved (BENCHMARKS.md, "One hot partition of large records").
WINDOW_BATCHES = 2
# The window binds only for records of at least this share of a batch (5 KB of the default 1 MB): a batch
# of smaller records takes the copy loop about as long to hand over as the destination takes to answer it,
# so waiting for the window there cost records per second (at 1 KiB, a quarter to a third) and saved no CPU.
WINDOW_RECORDS_PER_BATCH = 200


class _EndOfBatch:
    """What the sender appends to a batch: a message of no partition, which ends the last partition's run
    in the same place as any other partition's records end it."""

    __slots__ = ()

    def error(self) -> None:
        return None

    def partition(self) -> int:
        return -2

    def topic(self) -> None:
        return None


_END_OF_BATCH = _EndOfBatch()


class Sender:
    """Hands a route's consumed batches to its destination producer (see the module docstring)."""

    def __init__(
        self,
        *,
        committer: Committer,
        ledger: DeliveryLedger,
        states: PartitionStates,
        stopper: PartitionStopper,
        names: TopicNames,
        stamper: Stamper,
        consumer_error: Callable[[Any], None],
        clock: Callable[[], float],
        destination_stall_s: float,
    ) -> None:
        """``consumer_error``: what a consumed message carrying an error means (:class:`SourceErrors`).
        ``destination_stall_s``: how long a full producer queue may stay full before the producer fails."""
        self._committer = committer
        self._ledger = ledger
        self._states = states
        self._stopper = stopper
        self._names = names
        self._stamper = stamper
        self._consumer_error = consumer_error
        self._clock = clock
        self._destination_stall_s = destination_stall_s
        # The producer's produce, bound once per batch, and the partition whose run is open: what a run's
        # close and a refused record need besides the record itself.
        self._produce: Callable[..., None] = kafka_clients.positional_produce(committer.producer)
        self._topic = ""  # the destination topic
        self._partition = -1
        self._key: TopicPartitionKey = ("", -1)  # the source topic and partition

    def send(self, messages: list[Any], wait_for_windows: bool = False) -> tuple[int, int, int]:
        """Hands ``messages`` to the producer, stamped; returns (records sent, records skipped, value bytes
        sent). ``messages`` is the sender's from then on (its end is marked on it).

        The per-record loop: every name it calls is bound once per batch, and the ledger and the load
        counters are told once per run of a partition's records. With ``wait_for_windows``, a partition
        whose window is full is waited for (delivery reports served) instead of deferred."""
        committer = self._committer
        produce = self._produce = kafka_clients.positional_produce(committer.producer)
        stamper_for = self._stamper.for_topic
        stamp: Callable[[Any, int], Any]  # the run's topic's stamper (provenance.TopicStamper), taken once per run
        names = self._names.destinations
        destination_name = self._names.destination
        ledger = self._ledger
        sent = ledger.sent
        passed = ledger.passed
        skips = ledger.skips
        exact = ledger.exact
        open_run = ledger.open_run
        settled_as_already_written = ledger.settled_as_already_written
        hand_over = self._hand_over
        close = self._close
        consumer_error = self._consumer_error
        stop = self._stopper.stop
        alone_above = committer.record_alone_above
        run_most = committer.batch_size
        wait_above = run_most * (WINDOW_BATCHES - 1)
        windowed_from = run_most // WINDOW_RECORDS_PER_BATCH  # the smallest record the window binds for
        in_flight_of = ledger.bytes_in_flight.get
        in_flight_beside = ledger.bytes_in_flight_beside
        window_open = self._window_open
        errors = self._states.stopped
        count_copied = self._states.count_copied
        copied = 0
        skipped = 0
        size = 0
        # librdkafka hands a partition's fetched records out in runs: per run, the key and the
        # destination topic are looked up once, and the offsets handed to the producer go to the
        # watermark in one call (before anything that may serve delivery reports or settle the key).
        run_topic: str | None = None
        run_partition = -1
        key: TopicPartitionKey = ("", -1)
        destination_topic = ""
        run: list[int] = []
        counted = (0, 0)  # copied and size when this partition's run began, for its load counters
        # The partition's delivery run: how many of its records the producer has, the callback the
        # next one carries (the first's, then none), and the newest record, held back (see above).
        delivery: DeliveryRun | None = None
        handed = 0
        room = run_most  # value bytes the delivery run may still take
        ends_run: object = False  # the held record is the last its run takes (it travels alone): truthy
        # Partitions whose window was full, and their records left in the batch, handed over after the rest.
        waiting: set[TopicPartitionKey] = set()
        deferred: list[Any] = []
        deferring = False  # the current partition is waiting
        callback: Callable[[Any, Any], None] | None = None
        between: Callable[[Any, Any], None] | None = None
        # The records between a run's ends carry no callback when a failed one cannot go unseen: on an
        # exactly-once route it fails the transaction, which is aborted; with the gap-less guarantee (an
        # operator's opt-in) it fails the producer for good and every record after it. A report
        # per record costs a Message object and the GIL each (0.3-0.45 µs at 100 B, measured). Otherwise
        # (librdkafka's default: it may skip a failed record) each carries the run's C-level catcher, so
        # a failed one is seen and another writer's record in its place cannot pass for it.
        reports_between = committer.reports_between
        held: Any = None  # the newest record of the run, not handed over yet (see above)
        held_timestamp = 0
        held_headers: Any = None
        messages.append(_END_OF_BATCH)
        for message in messages:
            if message.error() is not None:
                consumer_error(message)
                continue
            partition = message.partition()
            if partition != run_partition or message.topic() != run_topic:
                # The partition's records end here: its run closes with the held record (one place of two).
                if held is not None and delivery is not None:
                    if not close(delivery, handed, held, held_timestamp, held_headers, run, run_most - room):
                        copied -= 1
                        size -= len(held)
                    held = None
                if run:
                    sent(key, run)
                    run = []
                if copied != counted[0]:
                    count_copied(key, copied - counted[0], size - counted[1])
                    counted = (copied, size)
                if message is _END_OF_BATCH:
                    break
                run_topic, run_partition = message.topic(), partition
                key = (run_topic, partition)
                destination_topic = names.get(run_topic) or destination_name(run_topic)
                self._topic, self._partition, self._key = destination_topic, partition, key
                stamp = stamper_for(run_topic, destination_topic).stamp
                delivery = None
                deferring = bool(waiting) and key in waiting
            if deferring:
                deferred.append(message)
                continue
            if errors and key in errors:
                continue  # stopped: fetched before the pause took effect; never committed past
            offset = message.offset()
            if skips and key in skips:
                if run:
                    sent(key, run)
                    run = []
                if settled_as_already_written(key, offset):
                    continue
            timestamp_type, timestamp = message.timestamp()
            try:
                headers = stamp(message.headers(), offset)
            except ProvenanceError as exc:
                stop(key, PartitionStopped(f"offset {offset}: {exc}"))
                continue
            if headers is None:  # loop prevention or the tree level: not for this route's destination
                if run:
                    sent(key, run)
                    run = []
                passed(key, offset)
                skipped += 1
                continue
            record_size = len(message)
            # A record that may be refused on its own (one too large travels alone in its producer
            # batch), or any on a partition settled record by record, is a run of its own.
            alone = record_size > alone_above or (exact and key in exact)
            if held is not None and delivery is not None:
                if ends_run or alone or record_size > room:
                    # The run takes no more: it closes with the held record (the other place of two).
                    if not close(delivery, handed, held, held_timestamp, held_headers, run, run_most - room):
                        copied -= 1
                        size -= len(held)
                    delivery = None
                else:  # another record of the run follows: the held one is not its last
                    try:
                        produce(  # positional: see common.kafka.clients.positional_produce
                            destination_topic,
                            held.value(),
                            held.key(),
                            partition,
                            callback,
                            None,
                            held_timestamp,
                            held_headers,
                        )
                    except (BufferError, KafkaException) as exc:
                        if not hand_over(held, held_timestamp, held_headers, callback, run, exc):
                            copied -= 1
                            size -= len(held)
                            self._settle_cut_short(delivery, handed)
                    handed += 1
                    callback = between
                held = None
                if errors and key in errors:
                    continue  # stopped while the producer's queue was full, or refused: its run ends here
            if (
                delivery is None
                and record_size >= windowed_from
                and in_flight_of(key, 0) > wait_above
                and in_flight_beside(key) < run_most
            ):
                # The partition's window is full.
                if not wait_for_windows:
                    waiting.add(key)
                    deferring = True
                    deferred.append(message)
                    continue
                if not window_open(key, offset, run, wait_above, run_most):
                    continue  # stopped while it waited
            if delivery is None:
                delivery = open_run()
                handed = 0
                room = run_most
                callback = delivery.on_first
                between = delivery.on_between if reports_between else None
            held = message
            held_timestamp = timestamp if timestamp_type else 0
            held_headers = headers
            ends_run = alone
            run.append(offset)
            copied += 1
            size += record_size
            room -= record_size
        if deferred:
            more_copied, more_skipped, more_size = self.send(deferred, wait_for_windows=True)
            return copied + more_copied, skipped + more_skipped, size + more_size
        return copied, skipped, size

    def _close(
        self, delivery: DeliveryRun, handed: int, message: Any, timestamp: int, headers: Any, run: list[int], size: int
    ) -> bool:
        """Hands over ``message``, the last record of ``delivery`` (``handed`` of its records went before,
        ``size`` value bytes with it), with the run's closing callback; False when the producer refused it
        (the records before it are then settled as far as their reports prove)."""
        if self._hand_over(message, timestamp, headers, delivery.on_last, run):
            # No report can be served before this: the run's last one comes in a later poll.
            self._ledger.closed(self._key, delivery, handed + 1, size)
            return True
        self._settle_cut_short(delivery, handed)
        return False

    def _settle_cut_short(self, delivery: DeliveryRun | None, handed: int) -> None:
        """The producer refused a record of ``delivery`` after ``handed`` of its records were handed over
        without the run's closing callback (its partition is stopped now): waits for those to be delivered,
        then settles them as far as their reports prove (:meth:`DeliveryLedger.settle_cut_short`)."""
        if delivery is None or not handed:
            return
        self._committer.flush(FLUSH_TIMEOUT_S)
        self._ledger.settle_cut_short(delivery, handed)

    def _hand_over(
        self,
        message: Any,
        timestamp: int,
        headers: Any,
        on_delivery: Callable[[Any, Any], None] | None,
        run: list[int],
        tried: BufferError | KafkaException | None = None,
    ) -> bool:
        """Hands ``message`` of the open run's partition to the producer, serving delivery reports while its
        queue is full (back-pressure on the source); False when the producer refused the record: its offset
        failed, its partition stopped.

        A queue that stays full for ``worker.destination_stall_s`` (the destination acknowledged nothing
        meanwhile) fails the producer: what it holds is purged and every partition of the route restarts
        from the destination once it answers. Records never time out inside a gap-less producer, so this
        is what frees the copy loop from a destination that does not answer.

        ``run``: the partition's offsets not told to the watermark yet, told (and emptied) before any poll.
        ``tried``: what the caller's own try of the same produce raised."""
        key = self._key
        full_since: float | None = None
        while True:
            try:
                if tried is not None:
                    raise tried
                self._produce(
                    self._topic,
                    message.value(),
                    message.key(),
                    self._partition,
                    on_delivery,
                    None,
                    timestamp,
                    headers,
                )
                return True
            except BufferError:
                tried = None
                if run:
                    self._ledger.sent(key, run)
                    run.clear()
                if full_since is None:
                    full_since = self._clock()
                if not self._wait_on_destination(key, message.offset(), full_since):
                    return False
            except KafkaException as exc:
                if run:
                    self._ledger.sent(key, run)
                    run.clear()
                error = kafka_error(exc)
                if error.fatal:  # the producer failed for good: the reports of what failed it come first
                    self._committer.serve_reports_left()
                offset = message.offset()
                failure = delivery_failure(error, f"offset {offset}: the destination producer refused the record")
                self._ledger.failed(key, offset, str(failure))
                self._stopper.stop(key, failure)
                return False

    def _window_open(self, key: TopicPartitionKey, offset: int, run: list[int], wait_above: int, batch: int) -> bool:
        """Serves delivery reports until ``key``'s runs in flight hold ``wait_above`` value bytes or fewer,
        or the route's other partitions a ``batch`` or more, so its next run (from ``offset`` on) may go to the
        producer; False when ``key`` stopped meanwhile, or when it stayed full for ``worker.destination_stall_s``
        (as a full queue: see :meth:`_hand_over`).

        ``run``: the partition's offsets not told to the watermark yet, told (and emptied) first."""
        ledger = self._ledger
        if run:
            ledger.sent(key, run)
            run.clear()
        in_flight = ledger.bytes_in_flight
        errors = self._states.stopped
        since = self._clock()
        while in_flight.get(key, 0) > wait_above and ledger.bytes_in_flight_beside(key) < batch:
            if not self._wait_on_destination(key, offset, since) or key in errors:
                return False
        return True

    def _wait_on_destination(self, key: TopicPartitionKey, offset: int, since: float) -> bool:
        """Serves delivery reports for a while (a failure among them stops its partition now), waiting for
        the destination to take more of ``key``'s records since ``since``; once it took none for
        ``worker.destination_stall_s``, fails the producer instead and says False: what it holds is purged,
        and every partition of the route restarts from the destination once it answers."""
        if self._clock() - since >= self._destination_stall_s:
            why = f"offset {offset}: the destination acknowledged nothing for {self._destination_stall_s:g}s"
            self._ledger.failed(key, offset, why)
            self._committer.purge()  # the purged records fail their partitions: nothing is committed past them
            self._stopper.stop(key, ProducerFailed(PartitionDeferred(why, retry_after_s=RETRY_BACKOFF_S)))
            return False
        self._committer.poll(0.05)
        return True
