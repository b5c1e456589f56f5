"""Copies one route's partitions: an ``assign()``-only consumer on the source, a producer on the destination.

Every record goes to the same partition of the route's destination topic (the source name, or
the route's renaming: :mod:`common.core.naming`) with its key, value, headers and timestamp, plus
Ferry's provenance header (:mod:`common.core.provenance`: the clusters it came through, its copy flags
and its source offset). A route with loop prevention or a tree distributor's level skips the
records it must not copy (:func:`common.core.topology.copy_flags`); a skipped record is settled at once
in the watermark, so it never holds commits back. Source offsets are committed (group ``ferry.<route name>``)
only up to the lowest offset the destination has not acknowledged yet, so a crash copies some records
again and loses none.

:class:`RouteCopier` owns the consumer and the consuming half of the copy loop, and composes the
parts that own the rest (:mod:`worker.copying`): the partitions held and their states
(:class:`PartitionStates`, where the states of a partition are drawn), their start
(:class:`PartitionStarter`), the producing half (:class:`Sender`: a batch handed to the producer,
stamped, in delivery runs), what was sent and acknowledged (:class:`DeliveryLedger`, which owns the
watermark), the destination producer with the commits (:class:`Committer`), what a consumer error
means (:class:`SourceErrors`), and stopping (:class:`PartitionStopper`): a failed delivery stops its
partition; a fatal producer error stops every partition of the route, and the producer is built anew
once they are released for their restart. The parts are handed what they need when they are built;
none calls back into the copier.

A route's throttle (:class:`common.core.operate.rate.RouteThrottle`, this worker's share of the
route's budget) is checked once per batch: it limits how many records the batch takes, and an
empty bucket takes none (the loop serves delivery reports meanwhile).

The copier is driven by one thread (the worker's copy loop); delivery callbacks run inside
``poll``/``flush`` on that same thread, so no state here needs a lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError

from ferry.common import logs
from ferry.common.config import InternalTopicsConfig, RouteConfig, WorkerConfig
from ferry.common.core.operate.rate import RouteThrottle
from ferry.common.core.provenance import Provenance, Stamper
from ferry.common.core.topology import copy_flags
from ferry.common.kafka import clients as kafka_clients
from ferry.common.model import PartitionStatus
from ferry.worker.copying import core as copy_core
from ferry.worker.copying.committer import FLUSH_TIMEOUT_S, CommitAnswer, Committer
from ferry.worker.copying.core import CopyCore
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.names import TopicNames, TopicPartitionKey
from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.copying.sender import Sender
from ferry.worker.copying.source_errors import SourceErrors
from ferry.worker.copying.starter import AcquireResult, PartitionStarter
from ferry.worker.copying.stopping import PartitionStopper
from ferry.worker.errors import WorkerError
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)


class RouteCopier:
    """One route's consumer and copy loop, over its parts (see the module docstring)."""

    def __init__(
        self,
        *,
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
        self._consume_batch = config.consume_batch
        self._metrics = metrics
        self._clock = clock
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
        names = TopicNames(route)
        self._states = PartitionStates(route_name=route.name, consumer=self._consumer, metrics=metrics, clock=clock)
        stopper = PartitionStopper(self._states)
        self._ledger = DeliveryLedger(
            route_name=route.name,
            source_name=names.source,
            stop=stopper.stop,
            metrics=metrics,
            wall_clock=wall_clock,
        )
        self._committer = Committer(
            route_name=route.name,
            destination=destination,
            settings={
                "client.id": f"{client_id}-{route.name}",
                "compression.type": route.compression,
                **config.producer,
            },
            consumer=self._consumer,
            ledger=self._ledger,
            stopper=stopper,
            destination_name=names.destination,
            metrics=metrics,
            clock=clock,
            sleep=sleep,
            transactional_id=transactional_id,
        )
        self._starter = PartitionStarter(
            route=route,
            config=config,
            source=source,
            destination=destination,
            client_id=client_id,
            consumer=self._consumer,
            names=names,
            states=self._states,
            ledger=self._ledger,
            committer=self._committer,
            metrics=metrics,
            clock=clock,
            sleep=sleep,
            topic_start=topic_start,
            internal_topics=internal_topics,
        )
        source_errors = SourceErrors(
            route_name=route.name, starter=self._starter, stopper=stopper, metrics=metrics, clock=clock
        )
        stamper = Stamper(route.source, _copy_decision(route, origins))
        self._sender = Sender(
            committer=self._committer,
            ledger=self._ledger,
            states=self._states,
            stopper=stopper,
            names=names,
            stamper=stamper,
            consumer_error=source_errors.handle,
            clock=clock,
            destination_stall_s=config.destination_stall_s,
        )
        self._core = self._native_core(config.copy_core, names, stamper)

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

    def _commit_answered(self, error: KafkaError | None, partitions: Sequence[CommitAnswer]) -> None:
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
        if self._core is not None:
            self._core.close()
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
        if self._core is not None:
            most = self._most(timeout)
            if not most:
                return 0
            copied, skipped, size = self._core.copy(most, timeout)
        else:
            messages = self._take(timeout)
            if not messages:
                return 0
            copied, skipped, size = self._sender.send(messages)
        self._committer.poll(0)
        self._metrics.records.labels(self.route.name).inc(copied)
        if skipped:
            self._metrics.skipped.labels(self.route.name).inc(skipped)
        self._metrics.bytes.labels(self.route.name).inc(size)
        if self.throttle is not None:
            self.throttle.used(copied + skipped, size, self._clock())
        return copied

    def _most(self, timeout: float) -> int:
        """How many records the next batch may take: as many as the throttle allows; none (after serving
        delivery reports) when its budget is spent."""
        most = self._consume_batch
        throttle = self.throttle
        if throttle is not None:
            most = throttle.records_allowed(most, self._clock())
            if not most:  # the route's budget is spent: serve deliveries until it refills
                self._committer.poll(min(timeout, throttle.wait_s(self._clock())))
        return most

    def _take(self, timeout: float) -> list[Any]:
        """The next batch, as many records as the throttle allows; none (after serving delivery
        reports) when its budget is spent or nothing comes within ``timeout``."""
        # consume(n, timeout) waits for n records or the whole timeout: at a modest rate that adds
        # the timeout to every record's latency. Take what is fetched already; when nothing is,
        # wait for the first record only (the native core takes a batch the same way).
        most = self._most(timeout)
        if not most:
            return []
        messages: list[Any] = self._consumer.consume(most, 0)
        if not messages:
            first = self._consumer.poll(timeout)
            if first is None:
                self._committer.poll(0)
                return []
            messages = [first, *self._consumer.consume(most - 1, 0)] if most > 1 else [first]
        return messages

    def _native_core(self, choice: str, names: TopicNames, stamper: Stamper) -> CopyCore | None:
        """The native copy core (``worker.copy_core``): None for the Python sender alone."""
        if choice == "python":
            return None
        library, why = copy_core.load()
        consumer_handle = None if library is None else copy_core.client_handle(library, self._consumer, consumer=True)
        if library is None or consumer_handle is None:
            why = why or "confluent-kafka's client layout is not the one the native copy core knows"
            if choice == "native":
                raise WorkerError(f"worker.copy_core is native, but {why}")
            log.info("route %s copies in Python: %s", self.route.name, why)
            return None
        log.debug("route %s copies with the native copy core", self.route.name)
        return CopyCore(
            library=library,
            consumer=self._consumer,
            consumer_handle=consumer_handle,
            committer=self._committer,
            ledger=self._ledger,
            states=self._states,
            names=names,
            stamper=stamper,
            sender=self._sender,
            on_commit=self._commit_answered,
            log=logs.LibrdkafkaLog(logs.current_fields()),
            clock=self._clock,
            most=self._consume_batch,
        )


def _copy_decision(
    route: RouteConfig, origins: frozenset[str] | None
) -> Callable[[Provenance | None], int | None] | None:
    """The route's copy decision for the stamper (:func:`common.core.topology.copy_flags`); None: copy every record."""
    level = route.copy_level
    if origins is None and level is None:
        return None
    destination = route.destination
    return lambda previous: copy_flags(previous, destination, origins, level)
