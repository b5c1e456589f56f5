"""A route's destination producer and its commits: the producer's life (built, rebuilt with smaller
batches or after a fatal error, polled, flushed, purged), the offset-map segments written before each
commit, and the commit of the source offsets the destination acknowledged.

A commit stores, per partition, only the offset below which the destination acknowledged every
record (the delivery ledger's watermark, :mod:`worker.copying.ledger`), and only once the offset
map's segments that describe those records are acknowledged too (:mod:`worker.copying.map_writer`):
a worker killed right after a commit never leaves committed records that no segment describes.

With ``transactional_id`` (a route with ``delivery_guarantee: exactly_once``) the producer is
transactional: the copies sent since the last commit, and the map segments that describe them, commit
in one Kafka transaction on the destination, and only then are the source offsets committed. The
transaction opens with the first batch after a commit (:meth:`Committer.begin`); a commit flushes
it, writes the changed segments into it and commits it. A transaction that cannot commit is aborted:
nothing of it is visible to ``read_committed`` consumers, so every partition of the route restarts
from what the destination holds (the resume look-back reads committed records only), and none of
the copies acknowledged since the last committed transaction is ever committed at the source (the
partitions held then are *void* until released).

A ``commit_transaction`` that timed out (or failed retriably) has an unknown outcome: librdkafka
lacks the per-transaction epoch bump of KIP-890, so the coordinator may still commit it, and an
abort from here is no answer. The producer counts as failed for good: it is replaced, and the new
one's ``init_transactions`` with the same id returns only once the coordinator completed or aborted
the old transaction. :meth:`Committer.settle` makes sure of that before any partition of the route
reads the destination back (a new producer is registered before anything trusts the destination).

A producer fenced by the leader (another ``init_transactions`` with its id: it lost its partitions)
fails for good, and :attr:`Committer.fenced` tells the worker to stop and register again; it stays
fenced, releases and restarts included, until the worker registered again
(:meth:`Committer.renew_fenced` builds the new writer).

States of the producer::

    WORKING --a fatal error (fail)--> FAILED (delivers nothing more; flushes do not wait for it)
    WORKING --a transaction aborted (abort), or its commit's outcome unknown--> FAILED (nothing of
        the partitions held then is committed at the source until they are released)
    FAILED, not fenced --renew_if_failed (once the stopped partitions are released)--> WORKING (a new producer)
    FAILED, fenced --renew_if_failed--> FAILED, fenced (the worker must register again first)
    FAILED, fenced --renew_fenced (the worker registered again)--> WORKING (a new producer)
    WORKING --fit_batches_to a smaller max.message.bytes--> WORKING (flushed, a new producer with smaller batches)

A transactional producer is *registered* once its ``init_transactions`` returned (:meth:`Committer.settle`
before a partition of the route reads the destination back, else :meth:`Committer.begin`); a new
producer is not, until then.

and of a transactional producer's transaction, while WORKING::

    NONE --begin (the first batch after a commit, or a commit)--> OPEN
    OPEN --commit: flushed, segments written, committed--> NONE (the source offsets committed next)
    OPEN --commit_transaction refused (abortable), or segments not written--> aborted: FAILED
    OPEN --commit_transaction timed out or failed retriably--> outcome unknown: FAILED (settled by
        the next producer's registration, before the route's partitions restart)
    any --a fatal error (fenced: the leader moved the route's partitions away)--> FAILED, ``fenced``

Every poll, flush and purge settles the delivery reports it served (:meth:`DeliveryLedger.settle`),
except the waits inside :meth:`Committer.commit` for its map segments. Driven by the copier's one
thread (the worker's copy loop), so no state here needs a lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ferry.common import logs
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.worker.copying.ledger import DeliveryLedger
from ferry.worker.copying.map_writer import OffsetMapWriter
from ferry.worker.copying.names import TopicPartitionKey
from ferry.worker.copying.stopping import PartitionStopper
from ferry.worker.errors import FENCED_ERRORS, RETRY_BACKOFF_S, PartitionDeferred, ProducerFailed
from ferry.worker.metrics import WorkerMetrics

log = logging.getLogger(__name__)

# How long a release or SIGTERM waits for the destination to acknowledge what is in flight.
FLUSH_TIMEOUT_S = 30.0
# How long a release waits for the map segments its commit wrote.
SEGMENT_FLUSH_S = 5.0
# Between two tries of a refused commit, until the caller's deadline.
COMMIT_RETRY_S = 0.2
LIBRDKAFKA_BATCH_SIZE = 1_000_000  # librdkafka's default batch.size
# Room for the record batch's own framing under a topic's max.message.bytes.
BATCH_FRAMING_BYTES = 1024
# A transactional producer: how long init_transactions, a commit's flush and commit_transaction
# may take. The broker aborts a transaction left open longer than TRANSACTION_TIMEOUT_MS.
TRANSACTION_CALL_TIMEOUT_S = 10.0
# A registration (init_transactions) that timed out goes on inside librdkafka, and the next call
# resumes it: a retry only looks whether it finished, for this long. So a transaction coordinator
# that does not answer (its broker restarting, its state loading) holds the copy loop, which every
# route of the worker shares, this long per retry of the route's start, not a whole call timeout.
REGISTRATION_CHECK_S = 0.5
TRANSACTION_TIMEOUT_MS = 60_000
# An operator's opt-in (enable.gapless.guarantee: true). An idempotent producer with librdkafka's
# gap-less guarantee and no delivery timeout never writes a partition's record after an earlier one
# of it failed: a failed batch is fatal to the producer (not skipped under a new epoch), and no
# record times out. Its only other failures (a purge, an unknown
# topic) fail every later record of the partition as well. So when a delivery run's last record is
# delivered, every record before it was, and the records between the run's ends need no report.
GAPLESS_SETTINGS: dict[str, Any] = {"enable.gapless.guarantee": True, "message.timeout.ms": 0}
# How long, and in how many tries (each may raise the fatal error again), a failed producer's last
# delivery reports are waited for and served.
REPORTS_LEFT_S = 1.0
REPORTS_LEFT_TRIES = 3


class CommitAnswer(Protocol):
    """One partition of the answer to a commit not waited for: a confluent-kafka ``TopicPartition``, or the
    native copy core's :class:`worker.copying.core.CommittedPartition`."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def error(self) -> KafkaError | None: ...


class Committer:
    """One route's destination producer and its commits to the source group. See the module docstring for states."""

    def __init__(
        self,
        *,
        route_name: str,
        destination: Mapping[str, Any],
        settings: Mapping[str, Any],
        consumer: Any,
        ledger: DeliveryLedger,
        stopper: PartitionStopper,
        destination_name: Callable[[str], str],
        metrics: WorkerMetrics,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        transactional_id: str | None = None,
    ) -> None:
        """``settings``: the producer's librdkafka properties. ``consumer``: the source consumer, whose
        group the commits go to. ``stopper``: stops the route's partitions when the writer fails, and keeps
        whether it did. ``destination_name``: a source topic's destination topic, for the map's keys.
        ``transactional_id``: write in transactions under this id (exactly once); None: plain idempotent writes."""
        self._route_name = route_name
        self._log = logs.with_fields(log, route=route_name)
        self._destination = destination
        self._settings = dict(settings)
        self._transactional_id = transactional_id
        if transactional_id is not None:
            self._settings.update(
                {
                    "transactional.id": transactional_id,
                    "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
                    # librdkafka refuses a delivery timeout longer than the transaction's.
                    "message.timeout.ms": min(
                        int(self._settings.get("message.timeout.ms", TRANSACTION_TIMEOUT_MS)), TRANSACTION_TIMEOUT_MS
                    ),
                }
            )
        # Gap-less when the operator asks for it (worker.producer or the cluster: enable.gapless.guarantee);
        # otherwise librdkafka may skip a failed record, and the records between a run's ends carry reports.
        self._gapless = transactional_id is None and _gapless_applies({**destination, **self._settings})
        if self._gapless:
            self._settings.update(GAPLESS_SETTINGS)
        self._stopper = stopper
        # Partitions held when a transaction failed (aborted, or its outcome unknown), taken when the next
        # producer is built (nothing of the route starts in between): what they acknowledged since their last
        # committed transaction may not be on the destination, so nothing of them is committed at the source,
        # whatever producer comes next, until released.
        self._void: set[TopicPartitionKey] = set()
        self._initialized = False  # init_transactions done for this producer
        self._registering = False  # its init_transactions timed out: the registration goes on inside librdkafka
        self._in_transaction = False
        self._batch_size = int(self._settings.get("batch.size", LIBRDKAFKA_BATCH_SIZE))
        self._consumer = consumer
        self._ledger = ledger
        self._map_writer = OffsetMapWriter(
            route_name=route_name, destination_name=destination_name, maps=ledger.maps, metrics=metrics
        )
        self._metrics = metrics
        self._clock = clock
        self._sleep = sleep
        self._committed: dict[TopicPartitionKey, int] = {}
        self._sent: dict[TopicPartitionKey, int] = {}  # sent without waiting for the answer (not known committed)
        self._producer: Any = self._new_producer()

    @property
    def transactional(self) -> bool:
        """The route writes exactly once: in transactions, under a writer id the leader can fence."""
        return self._transactional_id is not None

    @property
    def reports_between(self) -> bool:
        """Whether the records between a delivery run's ends need a report each to prove they were not
        skipped (:mod:`worker.copying.ledger`): not in a transaction (a failed record fails it), and not
        with the gap-less guarantee (:data:`GAPLESS_SETTINGS`)."""
        return not (self.transactional or self._gapless)

    @property
    def fenced(self) -> bool:
        """The leader fenced this worker's writer (it moved the route's partitions away): the worker must
        stop copying and register again before it writes anything more. Stays so until
        :meth:`renew_fenced`."""
        return self._stopper.fenced

    @property
    def batch_size(self) -> int:
        """The producer's ``batch.size``: the most bytes of one partition's records one produce request carries."""
        return self._batch_size

    @property
    def record_alone_above(self) -> int:
        """Records with a value larger than this may travel alone in a producer batch, and so be refused
        alone (too large for the destination topic): the copy loop gives each its own delivery report."""
        return self._batch_size // 2

    @property
    def producer(self) -> Any:
        """The destination producer now (a new one after :meth:`fit_batches_to` or :meth:`renew_if_failed`)."""
        return self._producer

    def _new_producer(self) -> Any:
        self._initialized = False
        self._registering = False
        self._in_transaction = False
        # No default delivery callback: the copy loop gives one to the first and the last record of
        # each run (DeliveryLedger), the map writer one to each segment; the rest cost no Python call.
        with logs.context(route=self._route_name):  # its librdkafka messages carry the route
            return kafka_clients.producer(self._destination, **self._settings)

    # -- transactions -----------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        """A transaction is OPEN (a FAILED producer's went with it)."""
        return self._in_transaction and not self._stopper.writer_failed

    def begin(self) -> bool:
        """Opens a transaction (NONE -> OPEN), registering the writer first when it is new; False when
        that failed (every partition of the route is stopped: fenced, or the coordinator did not answer)."""
        if self.in_transaction or self.failed:
            return not self.failed
        try:
            if not self._initialized:
                self._producer.init_transactions(TRANSACTION_CALL_TIMEOUT_S)
                self._initialized = True
            self._producer.begin_transaction()
        except KafkaException as exc:
            self._transaction_failed(exc, "opening a transaction on the destination")
            return False
        self._in_transaction = True
        return True

    def settle(self) -> None:
        """Registers a transactional producer not registered yet (``init_transactions``), before a
        partition of the route reads the destination back: the registration returns only once the
        coordinator completed or aborted every earlier transaction of this writer id (a previous
        producer's, whose commit timed out; a previous run's, left open). Nothing for a plain producer.

        Raises :class:`PartitionDeferred` (the partition starts later) while the producer is FAILED
        (fenced: until the worker registered again; else until the route's stopped partitions are
        released and it is built anew) or when the coordinator does not answer in time. A registration
        that timed out goes on inside the producer: the next call only looks, for
        :data:`REGISTRATION_CHECK_S`, whether it finished."""
        if self._transactional_id is None:
            return
        if self.failed:
            raise PartitionDeferred(
                "the leader fenced this route's writer: nothing of the route starts until the worker registered again"
                if self.fenced
                else "the route's destination producer failed: it is built anew once its partitions are released",
                retry_after_s=RETRY_BACKOFF_S,
            )
        if self._initialized:
            return
        try:
            self._producer.init_transactions(REGISTRATION_CHECK_S if self._registering else TRANSACTION_CALL_TIMEOUT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal() or error.code() in FENCED_ERRORS:
                self._transaction_failed(exc, "registering the transactional writer")
            self._registering = error.code() == KafkaError._TIMED_OUT
            raise PartitionDeferred(
                "the destination's transaction coordinator did not confirm that the route's earlier transactions "
                f"are complete (registering the transactional writer: {kafka_error(exc)})",
                retry_after_s=RETRY_BACKOFF_S,
            ) from None
        self._initialized = True
        self._registering = False

    def _commit_transaction(self) -> bool:
        """Flushes the open transaction, writes its map segments into it and commits it; False (the
        route stopped) when it was aborted, its outcome is unknown, or the writer was fenced."""
        remaining = self.flush(TRANSACTION_CALL_TIMEOUT_S)
        if self.failed:
            return False
        if remaining:
            self._abort(f"{remaining} copies not acknowledged within {TRANSACTION_CALL_TIMEOUT_S:g}s")
            return False
        if not self._map_writer.write(self._producer):
            self._abort("the offset map's segments were not written")
            return False
        try:
            # Sends the segments at once and waits for them: one that failed fails the commit (abortable).
            self._producer.commit_transaction(TRANSACTION_CALL_TIMEOUT_S)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal() or error.code() in FENCED_ERRORS or (error.txn_requires_abort() and not error.retriable()):
                self._transaction_failed(exc, "committing the transaction")
            else:
                self._outcome_unknown(exc)
            return False
        self._in_transaction = False
        self._ledger.transaction_committed()
        self._metrics.transactions.labels(self._route_name).inc()
        return True

    def _transaction_failed(self, exc: KafkaException, doing: str) -> None:
        error: KafkaError = exc.args[0]
        if error.fatal() or error.code() in FENCED_ERRORS:
            fenced = error.code() in FENCED_ERRORS
            why = (
                "fenced: the leader gave this worker's partitions of the route to another worker"
                if fenced
                else f"{doing}: {kafka_error(exc)}"
            )
            self._log.warning("route %s: the transactional writer failed for good: %s", self._route_name, why)
            self._give_up(why, fenced)
            return
        self._abort(f"{doing}: {kafka_error(exc)}")

    def _outcome_unknown(self, exc: KafkaException) -> None:
        """``commit_transaction`` timed out or failed retriably: the coordinator may still commit the
        transaction, or abort it. Neither aborting nor retrying from here is a guarantee under the old
        transaction protocol (a late request of this producer may still land), so the producer counts as
        failed for good: nothing more goes through it, it is replaced once the route's partitions are
        released, and the new one's registration (:meth:`settle`, same id) waits for the coordinator to
        settle the transaction before any of them reads the destination back."""
        why = f"the outcome of the transaction is unknown (committing it: {kafka_error(exc)})"
        self._log.warning(
            "route %s: %s; a new producer settles it before the route's partitions restart", self._route_name, why
        )
        self._metrics.errors.labels(self._route_name, "transaction").inc()
        self._give_up(why)

    def _abort(self, why: str) -> None:
        """Aborts the open transaction: its copies are gone, so the route restarts from the destination."""
        self._log.warning("route %s: transaction aborted (%s); its partitions restart", self._route_name, why)
        self._metrics.errors.labels(self._route_name, "transaction").inc()
        fenced = False
        if self.in_transaction:
            try:
                self._producer.abort_transaction(TRANSACTION_CALL_TIMEOUT_S)
            except KafkaException as exc:  # the broker aborts it anyway after transaction.timeout.ms
                self._log.warning("route %s: aborting the transaction: %s", self._route_name, kafka_error(exc))
                fenced = kafka_error(exc).code in FENCED_ERRORS
        self._give_up(f"transaction aborted: {why}", fenced)

    def _give_up(self, why: str, fenced: bool = False) -> None:
        """FAILED: the open transaction (if any) goes with the producer, and every partition of the route stops."""
        self._in_transaction = False
        self._stopper.stop_route(ProducerFailed(PartitionDeferred(why, retry_after_s=RETRY_BACKOFF_S), fenced=fenced))

    # -- the producer -----------------------------------------------------------------------

    def poll(self, timeout: float) -> None:
        """Serves delivery reports."""
        try:
            self._producer.poll(timeout)
        except (KafkaException, SystemError) as exc:
            self._fatal(exc)
        self._ledger.settle()

    def flush(self, timeout: float) -> int:
        """Waits for the destination to acknowledge everything sent; returns what is still in flight."""
        try:
            remaining: int = self._producer.flush(timeout)
        except (KafkaException, SystemError) as exc:
            self._fatal(exc)
            remaining = len(self._producer)
        self._ledger.settle()
        return remaining

    def _fatal(self, exc: BaseException) -> None:
        """A poll or flush raised librdkafka's fatal error: FAILED. A fenced transactional producer
        raises it from the delivery callbacks, as a SystemError, with the KafkaException as its cause
        or without any: then a transactional writer counts as fenced (its only fatal errors are the
        epoch's: fenced by the leader, or its transaction timed out, which fences it too)."""
        cause = exc if isinstance(exc, KafkaException) else exc.__cause__
        if isinstance(cause, KafkaException):
            error: KafkaError = cause.args[0]
            fenced = error.code() in FENCED_ERRORS
            why = str(kafka_error(cause))
        else:
            fenced = self._transactional_id is not None
            why = f"the producer failed for good ({exc})"
        self._log.warning("route %s: the destination producer failed for good: %s", self._route_name, why)
        self.serve_reports_left()
        self._give_up(why, fenced)

    def serve_reports_left(self) -> None:
        """Serves and settles the delivery reports a failed plain producer still holds (for at most
        :data:`REPORTS_LEFT_S`), before its partitions stop for the failure itself: a gap-less producer
        fails for good on a batch the destination refused, and that batch's own reports carry the
        refusal. So a record the destination will never accept (too large for the topic) stops its
        partition for good, naming its offset, instead of restarting with the rest."""
        if self._transactional_id is not None:
            return
        for _ in range(REPORTS_LEFT_TRIES):
            try:
                self._producer.flush(REPORTS_LEFT_S)
                break
            except (KafkaException, SystemError):  # a callback met the fatal error again: serve the rest
                continue
        self._ledger.settle()

    def purge(self) -> None:
        """Drops everything the producer still holds (queued and in flight): this worker must stop writing now.

        The purged records fail their partitions for a temporary reason, so nothing is committed
        past them; whatever of them still reached the destination is found by the next owner's
        look-back and not copied again.
        """
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
        except KafkaException as exc:
            self._log.warning("route %s: purging the producer: %s", self._route_name, kafka_error(exc))
        self.poll(0)
        if self.in_transaction:
            self._abort("this worker must stop writing now")

    def drop_unacknowledged(self) -> None:
        """Purges what the destination has not acknowledged and serves the purged records' reports
        (each fails its offset); they are settled by the next flush or poll."""
        try:
            self._producer.purge()
        except KafkaException as exc:
            self._log.warning("route %s: purging the producer: %s", self._route_name, exc)
        try:
            self._producer.flush(0)
        except (KafkaException, SystemError) as exc:
            self._fatal(exc)
        if self.in_transaction:
            self._abort("the route's target is switched")

    @property
    def failed(self) -> bool:
        """The producer failed for good (FAILED): it delivers nothing more."""
        return self._stopper.writer_failed

    def renew_if_failed(self) -> None:
        """FAILED -> WORKING: a new producer (call once the partitions it stopped are released). A
        fenced writer stays FAILED: only :meth:`renew_fenced` renews it."""
        if self.failed and not self.fenced:
            self._log.warning("route %s: building a new destination producer after a fatal error", self._route_name)
            self._renew()

    def renew_fenced(self) -> None:
        """FAILED, fenced -> WORKING, a new producer: the worker registered again (and reads its
        assignment anew), so it may write under its id again. Nothing when not fenced."""
        if self.fenced:
            self._log.warning("route %s: building a new transactional writer after the fencing", self._route_name)
            self._renew()

    def _renew(self) -> None:
        """FAILED -> WORKING. A transactional writer's partitions still held are void (see ``_void``): a
        FAILED writer starts none (:meth:`settle` defers them), so they are the ones held when it failed."""
        if self._transactional_id is not None:
            self._void.update(self._ledger.maps)
        self._producer = self._new_producer()
        self._stopper.renewed()

    def fit_batches_to(self, topic: str, limit: int) -> None:
        """Keeps producer batches under the destination topic's ``max.message.bytes`` (``limit``).

        The broker checks a whole record batch against that limit and librdkafka does not split
        a rejected batch, so a batch bigger than the limit would fail every record in it, good
        ones included. A record bigger than ``batch.size`` still travels alone in its own batch,
        so when the destination refuses it, only it fails, at its own offset. An open transaction
        commits first: the new producer's registration would abort it.
        """
        fitting = max(1, limit - BATCH_FRAMING_BYTES)
        if fitting >= self._batch_size:
            return
        remaining = self.flush(FLUSH_TIMEOUT_S)
        if remaining:
            self._log.warning(
                "route %s: %d records unacknowledged; keeping the larger batches for now", self._route_name, remaining
            )
            return
        self._log.info(
            "route %s: producer batches capped at %d bytes to fit %s's max.message.bytes=%d",
            self._route_name,
            fitting,
            topic,
            limit,
        )
        if self.in_transaction and not self._commit_transaction():
            return  # aborted: the route's partitions restart, and this runs again when they do
        self._producer.flush(0)
        self._ledger.settle()
        self._batch_size = fitting
        self._settings["batch.size"] = fitting
        self._producer = self._new_producer()

    # -- committing -------------------------------------------------------------------------

    def commit(self, keys: Collection[TopicPartitionKey] | None = None, wait: bool = True) -> bool:
        """Commits the watermark of ``keys`` (all held partitions when None); False if Kafka refused.

        The offset map's changed segments are written first, and the source offsets are committed
        only once the destination acknowledged them: a worker killed right after a commit never
        leaves committed records that no map segment describes (the next owner's look-back starts
        at the committed offset, so it could not describe them again).

        A transactional producer commits its transaction first (every partition's copies, whatever
        ``keys``), then the source offsets. A FAILED one commits nothing and says True: what it
        acknowledged may have been aborted, so its partitions restart from the destination. A FAILED
        plain producer cannot write the offset map, which each commit waits for: it commits nothing
        either, and its partitions restart from the destination once they are released.

        ``wait`` False (an exactly-once route's commit every interval): the source offsets are sent
        without waiting for the source's answer, so the copy loop goes on at once (a round trip to the
        source per transaction, however far the source is). The transaction already holds what was
        copied, and a start reads the destination back from the committed offset, so an offset that
        did not arrive only makes that look-back longer. It is sent again by the next commit with a
        new offset, and by the next commit that waits (a release's): only those count as done.
        """
        if self.failed:
            return True
        if self._transactional_id is not None and self.in_transaction and not self._commit_transaction():
            return True
        self._ledger.settle()  # and none until the commit: see DeliveryLedger.settle
        # What may be committed is fixed before the map is written: every offset below it was
        # acknowledged, so recorded in the map, so described by the segments written now.
        # Deliveries acknowledged while waiting for the map's acknowledgements are queued, not
        # applied; they count from the next commit, once a segment describes them.
        committable = self._ledger.committables()
        if self._transactional_id is None and not self._map_writer.write_and_wait(self._producer, keys):
            self._log.warning(
                "route %s: the offset map was not written; the commit waits for the next round", self._route_name
            )
            return False
        offsets = []
        void = self._void
        for key, offset in committable.items():
            if (
                (keys is None or key in keys)
                and key not in void
                and self._committed.get(key) != offset
                and (wait or self._sent.get(key) != offset)
            ):
                offsets.append(TopicPartition(key[0], key[1], offset))
        if not offsets:
            return True
        try:
            self._consumer.commit(offsets=offsets, asynchronous=not wait)
        except KafkaException as exc:
            self._metrics.errors.labels(self._route_name, "commit").inc()
            self._log.warning("route %s: commit failed (will retry): %s", self._route_name, kafka_error(exc))
            return False
        done = self._committed if wait else self._sent
        for tp in offsets:
            done[(tp.topic, tp.partition)] = tp.offset
        return True

    def commit_answered(self, error: KafkaError | None, partitions: Sequence[CommitAnswer]) -> None:
        """The source's answer to a commit that was not waited for (the source consumer's ``on_commit``,
        served by its polls on the copy loop's thread): a refused one is counted and logged as a refused
        commit is, and its offsets are sent again by the next commit."""
        refused = partitions if error is not None else [tp for tp in partitions if tp.error is not None]
        if not refused:
            return
        self._metrics.errors.labels(self._route_name, "commit").inc()
        why = error if error is not None else refused[0].error
        self._log.warning("route %s: commit failed (will retry): %s", self._route_name, why)
        for tp in refused:
            self._sent.pop((tp.topic, tp.partition), None)

    def commit_within(self, keys: Collection[TopicPartitionKey], deadline_s: float) -> bool:
        """Commits ``keys``, trying again every ``COMMIT_RETRY_S`` until ``deadline_s`` has passed;
        False when the last try was refused too."""
        deadline = self._clock() + deadline_s
        while not self.commit(keys):
            if self._clock() >= deadline:
                return False
            self._sleep(COMMIT_RETRY_S)
        return True

    def hand_over(self, keys: Collection[TopicPartitionKey], flush_timeout: float, commit_deadline: float) -> None:
        """Flushes, commits the watermark of ``keys`` (retried until ``commit_deadline``), and waits for
        the map segments that commit wrote: what a release does before the consumer lets ``keys`` go.

        Anything the destination did not acknowledge stays uncommitted and is copied again, never lost.
        """
        # A failed producer delivers nothing more: waiting for it would only stall.
        remaining = self.flush(0 if self.failed else flush_timeout)
        if remaining and not self.failed:
            self._log.error(
                "route %s: %d records still unacknowledged after %.0fs; releasing anyway (they will be copied again)",
                self._route_name,
                remaining,
                flush_timeout,
            )
        if self.failed:  # its map segments cannot be written, so nothing can be committed:
            return  # the keys restart from their last commit (and the look-back skips what was copied)
        self.commit_within(keys, commit_deadline)
        self.flush(SEGMENT_FLUSH_S)

    def forget(self, key: TopicPartitionKey) -> None:
        """Drops what was committed for ``key`` (released): its next owner commits from scratch."""
        self._committed.pop(key, None)
        self._sent.pop(key, None)
        self._void.discard(key)

    def close(self, flush_timeout: float) -> None:
        """Flushes, commits every partition, and waits for the map segments that commit wrote."""
        if self.failed and self._transactional_id is not None:
            return  # aborted or fenced: nothing of it may be committed
        self.flush(flush_timeout)
        self.commit()
        self.flush(flush_timeout)


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def _gapless_applies(settings: Mapping[str, Any]) -> bool:
    """Whether a plain producer with ``settings`` (over Ferry's defaults) takes :data:`GAPLESS_SETTINGS`:
    the operator asked for the guarantee, the producer is idempotent, and no delivery timeout of the
    operator's own is set (0, none, is kept)."""
    effective = {**kafka_clients.PRODUCER_DEFAULTS, **settings}
    timeout = effective.get("message.timeout.ms", effective.get("delivery.timeout.ms", 0))
    return (
        _truthy(effective.get("enable.idempotence", False))
        and _truthy(effective.get("enable.gapless.guarantee", False))
        and str(timeout).strip() == "0"
    )
