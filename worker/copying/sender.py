"""The producing half of a route's copy loop: a consumed batch handed to the destination producer, stamped.

Every record goes to the same partition of the route's destination topic with its key, value,
headers and timestamp, plus Ferry's provenance header (:mod:`common.core.provenance`), version 2: with the
copy's source offset. A record the
route must not copy (loop prevention, a tree distributor's level) is settled at once in the
watermark, and one the destination already holds (the resume rule's skip set) too, so neither ever
holds commits back.

Each partition's records go to the producer as a delivery run (:class:`worker.copying.ledger.DeliveryRun`):
only its first and its last record carry a Python delivery callback. The records between carry none
when a failed one cannot go unseen (on an exactly-once route it fails the transaction, which is aborted;
with the gap-less guarantee, an operator's opt-in, it fails the producer for good and every record after
it): a report per record costs a Message object and the GIL each (0.3-0.45 µs at 100 B, measured).
Otherwise (librdkafka's default: it may skip a failed record) each carries the run's C-level catcher, so
a failed one is seen and another writer's record in its place cannot pass for it.

Which record is the last is known only when the next message is another partition's, or the batch
ends, so the newest record is *held back* one step: handed over as one between the ends when another
record of its run follows, or with the run's closing callback when the run ends. A run ends in one of
two places: when the partition's records end (another partition's follow, or the batch ends), or when
the next record does not fit it (a record the destination may refuse
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

from confluent_kafka import KafkaError, KafkaException

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
        """Hands ``messages`` (the sender's from then on: their end is marked on them) to the producer, stamped;
        returns (records sent, records skipped, value bytes sent). With ``wait_for_windows``, a partition whose
        window is full is waited for instead of deferred. What every record calls is bound once per batch, the
        ledger and the load counters are told once per run of a partition's records, rare paths are methods."""
        committer = self._committer
        produce = self._produce = kafka_clients.positional_produce(committer.producer)
        ledger = self._ledger
        skips = ledger.skips
        exact = ledger.exact
        alone_above = committer.record_alone_above
        run_most = committer.batch_size
        windowed_from = run_most // WINDOW_RECORDS_PER_BATCH  # the smallest record the window binds for
        errors = self._states.stopped
        copied = skipped = size = 0
        # The partition whose records come now (its key, destination topic, offsets not told to the watermark
        # yet, load counters' start), and its delivery run: records the producer has, the callback the next
        # carries (the first's, then none or the catcher), the value bytes it may still take, the newest record
        # (held back), and whether that one is the last the run takes (it travels alone).
        run_topic: str | None = None
        run_partition, key, dest_topic, counted = -1, ("", -1), "", (0, 0)
        run: list[int] = []
        delivery: DeliveryRun | None = None
        handed, room, held, held_timestamp, held_headers = 0, run_most, None, 0, None
        ends_run: object = False
        callback: Callable[[Any, Any], None] | None = None
        between: Callable[[Any, Any], None] | None = None
        # Partitions whose window was full, and their records left in the batch, handed over after the rest.
        waiting: set[TopicPartitionKey] = set()
        deferred: list[Any] = []
        deferring = False
        messages.append(_END_OF_BATCH)
        for message in messages:
            if message.error() is not None:
                self._consumer_error(message)
                continue
            partition = message.partition()
            if partition != run_partition or message.topic() != run_topic:
                # The partition's records end here: its run closes with the held record (one place of two).
                if held is not None and delivery is not None:
                    if not self._close(delivery, handed, held, held_timestamp, held_headers, run, run_most - room):
                        copied -= 1
                        size -= len(held)
                    held = None
                self._partition_ends(key, run, copied - counted[0], size - counted[1])
                counted = (copied, size)
                if message is _END_OF_BATCH:
                    break
                run_topic, run_partition = message.topic(), partition
                key, dest_topic, stamp = self._partition_begins(run_topic, partition)
                delivery = None
                deferring = bool(waiting) and key in waiting
            if deferring:
                deferred.append(message)
                continue
            if errors and key in errors:
                continue  # stopped: fetched before the pause took effect; never committed past
            offset = message.offset()
            if skips and key in skips and self._already_written(key, offset, run):
                continue
            timestamp_type, timestamp = message.timestamp()
            try:
                headers = stamp(message.headers(), offset)
            except ProvenanceError as exc:
                self._stopper.stop(key, PartitionStopped(f"offset {offset}: {exc}"))
                continue
            if headers is None:  # loop prevention or the tree level: not for this route's destination
                self._passed(key, offset, run)
                skipped += 1
                continue
            record_size = len(message)
            # One the destination may refuse on its own (too large: alone in its producer batch), or any of a
            # partition settled record by record, is a run of its own.
            alone = record_size > alone_above or (exact and key in exact)
            if held is not None and delivery is not None:
                if ends_run or alone or record_size > room:
                    # The run takes no more: it closes with the held record (the other place of two).
                    if not self._close(delivery, handed, held, held_timestamp, held_headers, run, run_most - room):
                        copied -= 1
                        size -= len(held)
                    delivery = None
                else:  # another record of the run follows: the held one is not its last
                    try:  # positional: see common.kafka.clients.positional_produce
                        produce(
                            dest_topic,
                            held.value(),
                            held.key(),
                            partition,
                            callback,
                            None,
                            held_timestamp,
                            held_headers,
                        )
                    except (BufferError, KafkaException) as exc:
                        if not self._between_refused(
                            delivery, handed, held, held_timestamp, held_headers, callback, run, exc
                        ):
                            copied -= 1
                            size -= len(held)
                    handed += 1
                    callback = between
                held = None
                if errors and key in errors:
                    continue  # stopped while the producer's queue was full, or refused: its run ends here
            if delivery is None:
                if record_size >= windowed_from and self._window_full(key, message, run, wait_for_windows, deferred):
                    waiting.add(key)  # the partition's records go after the others' (or it stopped meanwhile)
                    deferring = True
                    continue
                delivery = ledger.open_run()
                handed = 0
                room = run_most
                callback = delivery.on_first
                between = delivery.on_between if committer.reports_between else None  # see the module docstring
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

    def _partition_ends(self, key: TopicPartitionKey, run: list[int], copied: int, size: int) -> None:
        """``key``'s records in the batch end: ``run`` (its offsets not told to the watermark yet) is told and
        emptied, and its load counters take the ``copied`` records of ``size`` value bytes."""
        if run:
            self._ledger.sent(key, run)
            run.clear()
        if copied:
            self._states.count_copied(key, copied, size)

    def _partition_begins(self, topic: str, partition: int) -> tuple[TopicPartitionKey, str, Callable[[Any, int], Any]]:
        """The records of ``topic``/``partition`` come now: its key, its destination topic and its stamper.

        Every route stamps its copies with their source offsets (provenance version 2), exactly-once ones
        included: their source offsets are committed at the source after the destination transaction
        that made the copies visible, so after a crash between the two, only the copies' headers (or the
        offset map committed with them) say which source records the destination already holds."""
        key = (topic, partition)
        self._topic = self._names.destination(topic)
        self._partition, self._key = partition, key
        return key, self._topic, self._stamper.for_topic(topic, self._topic).stamp

    def _already_written(self, key: TopicPartitionKey, offset: int, run: list[int]) -> bool:
        """Settles ``offset`` when the destination already has it (the resume rule's skip set): True then.
        ``run`` (the partition's offsets not told to the watermark yet) is told first."""
        if run:
            self._ledger.sent(key, run)
            run.clear()
        return self._ledger.settled_as_already_written(key, offset)

    def _passed(self, key: TopicPartitionKey, offset: int, run: list[int]) -> None:
        """``offset`` is not for this route's destination: settled at once, after ``run`` is told."""
        if run:
            self._ledger.sent(key, run)
            run.clear()
        self._ledger.passed(key, offset)

    def _between_refused(
        self,
        delivery: DeliveryRun,
        handed: int,
        message: Any,
        timestamp: int,
        headers: Any,
        callback: Callable[[Any, Any], None] | None,
        run: list[int],
        tried: BufferError | KafkaException,
    ) -> bool:
        """The producer did not take ``message``, a record of ``delivery`` before its last (``tried``): hands it
        over with ``callback`` once the queue has room; False when it refused it for good (the ``handed``
        records before it are then settled as far as their reports prove)."""
        if self._hand_over(message, timestamp, headers, callback, run, tried):
            return True
        self.settle_cut_short(delivery, handed)
        return False

    def window_opens(self, key: TopicPartitionKey, offset: int) -> bool:
        """Whether ``key``'s next run of large records (from ``offset`` on) may go to the producer, once delivery
        reports were served until its window left room (see :meth:`_window_full`); False when ``key`` stopped
        meanwhile. Every offset of ``key`` handed over before must be told to the ledger first."""
        ledger = self._ledger
        batch = self._committer.batch_size
        wait_above = batch * (WINDOW_BATCHES - 1)
        if ledger.bytes_in_flight.get(key, 0) <= wait_above or ledger.bytes_in_flight_beside(key) >= batch:
            return True
        return self._window_open(key, offset, [], wait_above, batch)

    def _window_full(
        self, key: TopicPartitionKey, message: Any, run: list[int], wait: bool, deferred: list[Any]
    ) -> bool:
        """Whether ``key``'s next run of large records (from ``message`` on) must not go to the producer now:
        its runs in flight leave no room for it and the route's other partitions hold less than a batch. Then,
        without ``wait``, ``message`` joins ``deferred`` (handed over after the other partitions'); with it,
        delivery reports are served until there is room (:meth:`_window_open`), and True means ``key`` stopped
        meanwhile."""
        ledger = self._ledger
        batch = self._committer.batch_size
        wait_above = batch * (WINDOW_BATCHES - 1)
        if ledger.bytes_in_flight.get(key, 0) <= wait_above or ledger.bytes_in_flight_beside(key) >= batch:
            return False
        if wait:
            return not self._window_open(key, message.offset(), run, wait_above, batch)
        deferred.append(message)
        return True

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
        self.settle_cut_short(delivery, handed)
        return False

    def settle_cut_short(self, delivery: DeliveryRun, handed: int) -> None:
        """The producer refused a record of ``delivery`` after ``handed`` of its records were handed over
        without the run's closing callback (its partition is stopped now): waits for those to be delivered,
        then settles them as far as their reports prove (:meth:`DeliveryLedger.settle_cut_short`)."""
        if not handed:
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
                if not self.wait_on_destination(key, message.offset(), full_since):
                    return False
            except KafkaException as exc:
                if run:
                    self._ledger.sent(key, run)
                    run.clear()
                self.refused(key, message.offset(), exc)
                return False

    def refused(self, key: TopicPartitionKey, offset: int, error: KafkaException | KafkaError) -> None:
        """The producer refused ``offset`` of ``key`` (already told to the ledger as sent) with ``error``: the
        offset fails and the partition stops as that error means."""
        failure_error = kafka_error(error)
        if failure_error.fatal:  # the producer failed for good: the reports of what failed it come first
            self._committer.serve_reports_left()
        failure = delivery_failure(failure_error, f"offset {offset}: the destination producer refused the record")
        self._ledger.failed(key, offset, str(failure))
        self._stopper.stop(key, failure)

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
            if not self.wait_on_destination(key, offset, since) or key in errors:
                return False
        return True

    def wait_on_destination(self, key: TopicPartitionKey, offset: int, since: float) -> bool:
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
