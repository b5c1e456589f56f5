"""Copies one route's partitions: an ``assign()``-only consumer on the source, a producer on the destination.

Every record goes to the same partition of the route's destination topic (the source name, or
the route's renaming: :mod:`common.core.naming`) with its key, value, headers and timestamp, plus
Ferry's provenance header (:mod:`common.core.provenance`: the clusters it came through, its copy flags
and its source offset). A route with loop prevention or a tree distributor's level skips the
records it must not copy (:func:`common.core.topology.copy_flags`); a skipped record is settled at once
in the watermark, so it never holds commits back. Source offsets are committed (group ``ferry.<route name>``)
only up to the lowest offset the destination has not acknowledged yet, so a crash copies some records
again and loses none.

:class:`RouteCopier` owns the consumer and the copy loop, and composes the parts that own the rest
(:mod:`worker.copying`): the partitions held and their states (:class:`PartitionStates`, where the
states of a partition are drawn), their start (:class:`PartitionStarter`), what was sent and
acknowledged (:class:`DeliveryLedger`), and the destination producer with the commits
(:class:`Committer`). A failed delivery stops its partition; a fatal producer error stops every
partition of the route, and the producer is built anew once they are released for their restart.

A route's throttle (:class:`common.core.operate.rate.RouteThrottle`, this worker's share of the
route's budget) is checked once per batch: it limits how many records the batch takes, and an
empty bucket takes none (the loop serves delivery reports meanwhile).

The copier is driven by one thread (the worker's copy loop); delivery callbacks run inside
``poll``/``flush`` on that same thread, so no state here needs a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from ferry.common import logs
from ferry.common.config import InternalTopicsConfig, RouteConfig, WorkerConfig
from ferry.common.core.operate.rate import RouteThrottle
from ferry.common.core.provenance import Provenance, ProvenanceError, Stamper
from ferry.common.core.topology import copy_flags
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.model import PartitionStatus
from ferry.worker.copying.committer import FLUSH_TIMEOUT_S, Committer
from ferry.worker.copying.ledger import DeliveryLedger, DeliveryRun
from ferry.worker.copying.names import TopicNames, TopicPartitionKey
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.copying.starter import AcquireResult, PartitionStarter
from ferry.worker.errors import (
    PERMANENT_CONSUMER_ERRORS,
    RETRY_BACKOFF_S,
    PartitionDeferred,
    PartitionStopped,
    ProducerFailed,
    delivery_failure,
)
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# librdkafka's answer when a position leaves the source log under auto.offset.reset=error.
_OUT_OF_RANGE = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})

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


class RouteCopier:
    """One route's consumer and copy loop, over its parts (see the module docstring)."""

    def __init__(
        self,
        route: RouteConfig,
        source: Mapping[str, Any],
        destination: Mapping[str, Any],
        config: WorkerConfig,
        metrics: WorkerMetrics,
        client_id: str,
        clock: Callable[[], float] = time.monotonic,
        origins: frozenset[str] | None = None,
        wall_clock: Callable[[], float] = time.time,
        topic_start: Callable[[str], str | int | None] = lambda topic: None,
        sleep: Callable[[float], None] = time.sleep,
        internal_topics: InternalTopicsConfig | None = None,
        transactional_id: str | None = None,
    ) -> None:
        """``origins``: with loop prevention, the origins whose records this route copies
        (``FerryConfig.copied_origins``); None copies every record (unless a tree level says otherwise).
        ``wall_clock`` (seconds since the epoch) is compared with record timestamps for the record age.
        ``topic_start``: a topic's own start (added with one), else None for the route's; asked only for
        partitions nothing of the route is on the destination for; may raise ``PartitionDeferred``.
        ``clock`` and ``sleep`` pace every retry: a refused commit, the committed offsets, the destination's
        metadata, a look-back waiting for a new topic's leader.
        ``internal_topics``: how the offset-map topic is created (default: 3 replicas, capped).
        ``transactional_id``: write exactly once, in transactions under this id (the route's
        ``transactional_id(worker)``, which the leader fences); None: at least once."""
        self.route = route
        self.throttle: RouteThrottle | None = None  # this worker's share of the route's throttle
        self._log = logs.with_fields(log, route=route.name)
        self._consume_batch = config.consume_batch
        self._destination_stall_s = config.destination_stall_s
        self._metrics = metrics
        self._clock = clock
        self._stamper = Stamper(route.source, _copy_decision(route, origins))
        # auto.offset.reset=error: every start is an explicit offset, so a reset only means the position left
        # the source log (records deleted before they were copied, a re-created topic): worker/position/data_loss.py.
        self._consumer = kafka_clients.consumer(
            source,
            route.group_id,
            **{
                "client.id": f"{client_id}-{route.name}",
                **config.consumer,
                "auto.offset.reset": "error",
                # The answers to the commits not waited for (exactly once: Committer.commit).
                "on_commit": self._commit_answered,
            },
        )
        self._warned_at: dict[int, float] = {}  # a consumer error's kind -> when it was last logged
        self._names = TopicNames(route)
        self._states = PartitionStates(route.name, self._consumer, metrics, clock)
        self._ledger = DeliveryLedger(route.name, self._names.source, self._stop, metrics, wall_clock)
        self._committer = Committer(
            route.name,
            destination,
            {"client.id": f"{client_id}-{route.name}", "compression.type": route.compression, **config.producer},
            self._consumer,
            self._ledger,
            self._names.destination,
            metrics,
            clock,
            sleep,
            self._stop_route,
            transactional_id,
        )
        self._starter = PartitionStarter(
            route,
            config,
            source,
            destination,
            client_id,
            self._consumer,
            self._names,
            self._states,
            self._ledger,
            self._committer,
            metrics,
            clock,
            sleep,
            topic_start,
            internal_topics,
        )

    # -- what the worker reads --------------------------------------------------------------

    @property
    def changed(self) -> bool:
        """A partition went to ERROR (or lost records) since the worker last looked; the worker clears it."""
        return self._states.changed

    @changed.setter
    def changed(self, value: bool) -> None:
        self._states.changed = value

    def statuses(self) -> dict[TopicPartitionKey, PartitionStatus]:
        """Every partition this copier holds: ONLINE, PAUSED, or ERROR with its reason."""
        return self._states.statuses()

    def held(self) -> set[TopicPartitionKey]:
        return self._states.held()

    def due_retries(self) -> list[TopicPartitionKey]:
        """Partitions stopped for a temporary reason whose backoff is over."""
        return self._states.due_retries()

    def take_copied(self) -> dict[TopicPartitionKey, tuple[int, int]]:
        """(records, value bytes) copied per partition since the last call, and starts counting again."""
        return self._states.take_copied()

    def lags(self) -> dict[TopicPartitionKey, int]:
        """The lag of each held partition as :meth:`update_lag` last measured it (absent: not measured yet)."""
        return self._states.lags()

    def in_flight(self) -> int:
        return self._ledger.in_flight()

    @property
    def fenced_writes(self) -> bool:
        """The route writes in transactions the leader can fence: it may copy on while ZooKeeper is away."""
        return self._committer.transactional

    @property
    def fenced(self) -> bool:
        """The leader fenced this route's writer: every partition of it stopped; the worker must register
        again. Stays so, releases included, until :meth:`registered_again`."""
        return self._committer.fenced

    def registered_again(self) -> None:
        """The worker registered again (its assignment read anew): a fenced writer is built anew, and
        registers (``init_transactions``) before the route's next partition reads the destination back."""
        self._committer.renew_fenced()

    # -- acquiring, pausing, releasing ------------------------------------------------------

    def acquire(self, keys: Iterable[TopicPartitionKey]) -> AcquireResult:
        """Starts copying ``keys`` where the destination's own record of progress says. A producer that
        failed while holding nothing is built anew first (no release would renew it)."""
        if not self._states.held():
            self._committer.renew_if_failed()
        return self._starter.acquire(keys)

    def set_paused(self, keys: set[TopicPartitionKey], commit_deadline: float) -> None:
        """Pauses exactly ``keys`` among the held partitions (level-triggered): newly paused ones are
        flushed and committed, then no longer consumed; the others consume again where they stopped."""
        states = self._states
        keys = keys & states.assigned
        pause, resume = keys - states.paused, states.paused - keys
        if pause:
            self._committer.flush(FLUSH_TIMEOUT_S)
            self._committer.commit_within(pause, commit_deadline)
            states.pause(pause)
        if resume:
            states.resume(resume)

    def release(self, keys: Collection[TopicPartitionKey], flush_timeout: float, commit_deadline: float) -> None:
        """Flushes, commits the watermark of ``keys``, and only then unassigns them.

        The new owner starts at the committed offset, so nothing is copied twice; anything the
        destination did not acknowledge stays uncommitted and is copied again, never lost.
        """
        if not keys:
            return
        self._committer.hand_over(keys, flush_timeout, commit_deadline)
        self._states.release(keys)
        for key in keys:
            self._committer.forget(key)
            self._ledger.forget(key)
        self._committer.renew_if_failed()  # its partitions stopped with it and are released now (unless fenced)

    def abandon(self, commit_deadline: float) -> None:
        """Releases every partition without waiting for the destination (a tree distributor
        switching away from an unreachable target): records not acknowledged yet are purged from
        the producer, so the committed offsets stay below them and the next copier (to the new
        target) copies them again. Nothing is lost; the old target may hold some of them too.
        """
        self._committer.drop_unacknowledged()
        self.release(self.held(), 0, commit_deadline)

    # -- the producer and the commits -------------------------------------------------------

    def commit(self, keys: Collection[TopicPartitionKey] | None = None) -> bool:
        """Commits the watermark of ``keys`` (all held partitions when None); False if Kafka refused.
        Exactly once, the source's answer is not waited for (:meth:`Committer.commit`)."""
        return self._committer.commit(keys, wait=not self._committer.transactional)

    def _commit_answered(self, error: KafkaError | None, partitions: list[Any]) -> None:
        self._committer.commit_answered(error, partitions)

    def purge(self) -> None:
        """Drops everything the producer still holds (queued and in flight): this worker must stop writing now."""
        self._committer.purge()

    def poll(self, timeout: float) -> None:
        """Serves delivery reports without consuming anything."""
        self._committer.poll(timeout)

    def flush(self, timeout: float) -> int:
        """Waits for the destination to acknowledge everything sent; returns what is still in flight."""
        return self._committer.flush(timeout)

    def update_lag(self) -> None:
        """Sets the lag gauge of each ONLINE partition from the consumer's cached log-end offsets.

        Runs every commit interval, so it also hands the librdkafka messages of the clients the copy
        loop does not poll now to the log: the look-back reader's, and a copier holding nothing's."""
        self._starter.serve_logs()
        if not self._states.assigned:
            kafka_clients.serve_logs(self._consumer)
            self._committer.poll(0)
            return
        self._states.measure_lags()

    def close(self, flush_timeout: float) -> None:
        self._committer.close(flush_timeout)
        self._consumer.close()
        self._starter.close()

    # -- copying ----------------------------------------------------------------------------

    def copy_batch(self, timeout: float) -> int:
        """Consumes one batch and hands it to the producer; returns the number of records sent."""
        committer = self._committer
        if committer.transactional and not committer.in_transaction and not committer.begin():
            # FAILED (aborted or fenced): the route's partitions are stopped until their restart.
            committer.poll(timeout)
            return 0
        messages = self._take(timeout)
        if not messages:
            return 0
        copied, skipped, size = self._send(messages)
        self._committer.poll(0)
        self._metrics.records.labels(self.route.name).inc(copied)
        if skipped:
            self._metrics.skipped.labels(self.route.name).inc(skipped)
        self._metrics.bytes.labels(self.route.name).inc(size)
        if self.throttle is not None:
            self.throttle.used(copied + skipped, size, self._clock())
        return copied

    def _take(self, timeout: float) -> list[Any]:
        """The next batch, as many records as the throttle allows; none (after serving delivery
        reports) when its budget is spent or nothing comes within ``timeout``."""
        # consume(n, timeout) waits for n records or the whole timeout: at a modest rate that adds
        # the timeout to every record's latency. Take what is fetched already; when nothing is,
        # wait for the first record only.
        most = self._consume_batch
        throttle = self.throttle
        if throttle is not None:
            most = throttle.records_allowed(most, self._clock())
            if not most:  # the route's budget is spent: serve deliveries until it refills
                self._committer.poll(min(timeout, throttle.wait_s(self._clock())))
                return []
        messages: list[Any] = self._consumer.consume(most, 0)
        if not messages:
            first = self._consumer.poll(timeout)
            if first is None:
                self._committer.poll(0)
                return []
            messages = [first, *self._consumer.consume(most - 1, 0)] if most > 1 else [first]
        return messages

    def _send(self, messages: list[Any], wait_for_windows: bool = False) -> tuple[int, int, int]:
        """Hands ``messages`` to the producer, stamped; returns (records sent, records skipped, value bytes sent).

        The per-record loop: every name it calls is bound once per batch, and the ledger and the
        load counters are told once per run of a partition's records. Each partition's records go
        to the producer as a delivery run (:class:`worker.copying.ledger.DeliveryRun`): only its first
        and its last record carry a Python delivery callback (the records between: see ``between``).
        Which record is the last is known only when the next message is another partition's, or the
        batch ends, so the newest record is held back one step: handed over as one between the ends
        when another of its partition follows, with the run's last callback otherwise. A record the
        destination may refuse on its own (larger than ``Committer.record_alone_above``), and every
        record of a partition the ledger settles record by record (``exact``), is a run of its own.

        A run holds at most a producer batch (``Committer.batch_size``) of value bytes. A partition's next run
        of large records (:data:`WINDOW_RECORDS_PER_BATCH`) goes to the producer only when that partition's
        runs in flight leave room for it, or the route's other partitions have a batch in flight
        (:data:`WINDOW_BATCHES`). When neither holds, the partition's records left in the batch are handed
        over after the other partitions' (with ``wait_for_windows``, the loop then serves delivery reports
        until one holds), so one partition's full window never keeps the others from the producer."""
        committer = self._committer
        produce = kafka_clients.positional_produce(committer.producer)
        stamper_for = self._stamper.for_topic
        stamp: Callable[[Any, int], Any]  # the run's topic's stamper (provenance.TopicStamper), taken once per run
        names = self._names.destinations
        destination_name = self._names.destination
        ledger = self._ledger
        watermarks = ledger.watermarks
        sent_run = watermarks.sent_run
        skips = ledger.skips
        exact = ledger.exact
        open_run = ledger.open_run
        settled_as_already_written = ledger.settled_as_already_written
        hand_over = self._hand_over
        close_run = self._close_run
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
        for message in messages:
            if message.error() is not None:
                self._consumer_error(message)
                continue
            partition = message.partition()
            if partition != run_partition or message.topic() != run_topic:
                if held is not None and delivery is not None:  # the last record of the partition's delivery run
                    if not close_run(
                        delivery,
                        handed,
                        produce,
                        destination_topic,
                        run_partition,
                        held,
                        held_timestamp,
                        held_headers,
                        key,
                        run,
                        run_most - room,
                    ):
                        copied -= 1
                        size -= len(held)
                    held = None
                if run:
                    sent_run(key, run)
                    run = []
                if copied != counted[0]:
                    count_copied(key, copied - counted[0], size - counted[1])
                    counted = (copied, size)
                run_topic, run_partition = message.topic(), partition
                key = (run_topic, partition)
                destination_topic = names.get(run_topic) or destination_name(run_topic)
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
                    sent_run(key, run)
                    run = []
                if settled_as_already_written(key, offset):
                    continue
            timestamp_type, timestamp = message.timestamp()
            try:
                headers = stamp(message.headers(), offset)
            except ProvenanceError as exc:
                self._stop(key, PartitionStopped(f"offset {offset}: {exc}"))
                continue
            if headers is None:  # loop prevention or the tree level: not for this route's destination
                if run:
                    sent_run(key, run)
                    run = []
                watermarks.passed(key, offset)
                skipped += 1
                continue
            record_size = len(message)
            # A record that may be refused on its own (one too large travels alone in its producer
            # batch), or any on a partition settled record by record, is a run of its own.
            alone = record_size > alone_above or (exact and key in exact)
            if held is not None:
                # The held record ends its run when this one is alone or would take the run past a batch.
                if (alone or record_size > room) and delivery is not None:
                    if not close_run(
                        delivery,
                        handed,
                        produce,
                        destination_topic,
                        partition,
                        held,
                        held_timestamp,
                        held_headers,
                        key,
                        run,
                        run_most - room,
                    ):
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
                        if not hand_over(
                            produce,
                            destination_topic,
                            partition,
                            held.value(),
                            held.key(),
                            held_timestamp,
                            held_headers,
                            callback,
                            key,
                            held.offset(),
                            run,
                            exc,
                        ):
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
            run.append(offset)
            copied += 1
            size += record_size
            room -= record_size
            if alone:
                if not close_run(
                    delivery,
                    0,
                    produce,
                    destination_topic,
                    partition,
                    held,
                    held_timestamp,
                    held_headers,
                    key,
                    run,
                    run_most - room,
                ):
                    copied -= 1
                    size -= len(held)
                held = None
                delivery = None
        if (
            held is not None
            and delivery is not None
            and not close_run(
                delivery,
                handed,
                produce,
                destination_topic,
                run_partition,
                held,
                held_timestamp,
                held_headers,
                key,
                run,
                run_most - room,
            )
        ):
            copied -= 1
            size -= len(held)
        if run:
            sent_run(key, run)
        if copied != counted[0]:
            count_copied(key, copied - counted[0], size - counted[1])
        if deferred:
            more_copied, more_skipped, more_size = self._send(deferred, wait_for_windows=True)
            return copied + more_copied, skipped + more_skipped, size + more_size
        return copied, skipped, size

    def _close_run(
        self,
        delivery: DeliveryRun,
        handed: int,
        produce: Callable[..., None],
        topic: str,
        partition: int,
        message: Any,
        timestamp: int,
        headers: Any,
        key: TopicPartitionKey,
        run: list[int],
        run_bytes: int,
    ) -> bool:
        """Hands over ``message``, the last record of ``delivery`` (``handed`` of its records went before,
        ``run_bytes`` value bytes with it), with the run's closing callback; False when the producer refused
        it (the records before it are then settled as far as their reports prove)."""
        if self._hand_over(
            produce,
            topic,
            partition,
            message.value(),
            message.key(),
            timestamp,
            headers,
            delivery.on_last,
            key,
            message.offset(),
            run,
        ):
            # No report can be served before this: the run's last one comes in a later poll.
            self._ledger.closed(key, delivery, handed + 1, run_bytes)
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
        produce: Callable[..., None],
        topic: str,
        partition: int,
        value: Any,
        record_key: Any,
        timestamp: int,
        headers: Any,
        on_delivery: Callable[[Any, Any], None] | None,
        key: TopicPartitionKey,
        offset: int,
        run: list[int],
        tried: BufferError | KafkaException | None = None,
    ) -> bool:
        """Hands one record to the producer, serving delivery reports while its queue is full (back-pressure
        on the source); False when the producer refused the record: its offset failed, its partition stopped.

        A queue that stays full for ``worker.destination_stall_s`` (the destination acknowledged nothing
        meanwhile) fails the producer: what it holds is purged and every partition of the route restarts
        from the destination once it answers. Records never time out inside a gap-less producer, so this
        is what frees the copy loop from a destination that does not answer.

        ``run``: the partition's offsets not told to the watermark yet, told (and emptied) before any poll.
        ``tried``: what the caller's own try of the same produce raised."""
        full_since: float | None = None
        while True:
            try:
                if tried is not None:
                    raise tried
                produce(topic, value, record_key, partition, on_delivery, None, timestamp, headers)
                return True
            except BufferError:
                tried = None
                if run:
                    self._ledger.watermarks.sent_run(key, run)
                    run.clear()
                if full_since is None:
                    full_since = self._clock()
                if not self._wait_on_destination(key, offset, full_since):
                    return False
            except KafkaException as exc:
                if run:
                    self._ledger.watermarks.sent_run(key, run)
                    run.clear()
                error = kafka_error(exc)
                if error.fatal:  # the producer failed for good: the reports of what failed it come first
                    self._committer.serve_reports_left()
                failure = delivery_failure(error, f"offset {offset}: the destination producer refused the record")
                self._ledger.watermarks.failed(key, offset, str(failure))
                self._stop(key, failure)
                return False

    def _window_open(self, key: TopicPartitionKey, offset: int, run: list[int], wait_above: int, batch: int) -> bool:
        """Serves delivery reports until ``key``'s runs in flight hold ``wait_above`` value bytes or fewer,
        or the route's other partitions a ``batch`` or more, so its next run (from ``offset`` on) may go to the
        producer; False when ``key`` stopped meanwhile, or when it stayed full for ``worker.destination_stall_s``
        (as a full queue: see :meth:`_hand_over`).

        ``run``: the partition's offsets not told to the watermark yet, told (and emptied) first."""
        if run:
            self._ledger.watermarks.sent_run(key, run)
            run.clear()
        ledger = self._ledger
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
            self._ledger.watermarks.failed(key, offset, why)
            self._committer.purge()  # the purged records fail their partitions: nothing is committed past them
            self._stop(key, ProducerFailed(PartitionDeferred(why, retry_after_s=RETRY_BACKOFF_S)))
            return False
        self._committer.poll(0.05)
        return True

    def _stop(self, key: TopicPartitionKey, failure: PartitionStopped | PartitionDeferred | ProducerFailed) -> None:
        """Stops ``key`` (ERROR). A :class:`ProducerFailed` leaves the producer unusable: every
        partition of the route stops too, for a temporary reason, and the producer is built anew when
        they are released for their restart."""
        if isinstance(failure, ProducerFailed):
            if self._committer.fail(failure.fenced):
                for other in self._states.running():
                    if other != key:
                        self._states.stop(
                            other,
                            PartitionDeferred(
                                f"the destination producer failed for good: {failure}", retry_after_s=RETRY_BACKOFF_S
                            ),
                        )
            failure = failure.record
        self._states.stop(key, failure)

    def _stop_route(self, failure: ProducerFailed) -> None:
        """Stops every running partition of the route for the reason ``failure`` carries (the
        committer already FAILED: an aborted transaction, or a fenced writer)."""
        for key in self._states.running():
            self._states.stop(key, failure.record)

    def _consumer_error(self, message: Any) -> None:
        error: KafkaError = message.error()
        topic, partition = message.topic(), message.partition()
        if error.code() in _OUT_OF_RANGE and topic and partition is not None and partition >= 0:
            self._starter.left_the_log((topic, partition), message.offset())
            return
        if error.code() in PERMANENT_CONSUMER_ERRORS and topic and partition is not None and partition >= 0:
            self._states.stop((topic, partition), PartitionStopped(f"the source reports: {error.str()}"))
            return
        self._metrics.errors.labels(self.route.name, "consumer").inc()
        now = self._clock()
        if now - self._warned_at.get(error.code(), -1e9) > 30:  # one line per kind per 30 s
            self._warned_at[error.code()] = now
            self._log.warning("route %s: source consumer: %s", self.route.name, error.str())


def _copy_decision(
    route: RouteConfig, origins: frozenset[str] | None
) -> Callable[[Provenance | None], int | None] | None:
    """The route's copy decision for the stamper (:func:`common.core.topology.copy_flags`); None: copy every record."""
    level = route.copy_level
    if origins is None and level is None:
        return None
    destination = route.destination
    return lambda previous: copy_flags(previous, destination, origins, level)
