"""RouteCopier's bookkeeping with fake clients in place of Ferry's Kafka client adapter.

Only ``common.kafka.clients`` (Ferry's own adapter) is replaced; the fakes hand back plain
messages and delivery reports so the copy path, the watermark and the ERROR states can be
checked without servers. The real clients are exercised by tests/integration/test_worker.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.config import MirrorMaker2Config, RouteConfig, WorkerConfig
from ferry.common.core.offset_map import MAP_TOPIC, Segment, parse_segment
from ferry.common.core.provenance import encode
from ferry.common.mm2.records import OffsetSync, encode_offset_sync
from ferry.worker import copier as copier_module
from ferry.worker.copier import RouteCopier
from ferry.worker.copying.committer import COMMIT_RETRY_S
from ferry.worker.errors import RETRY_BACKOFF_S
from ferry.worker.metrics import WorkerMetrics
from ferry.worker.position import lookback, mm2_takeover
from tests.fakes import TOPIC, FakeAdmin, FakeClock, FakeConsumer, FakeMessage, FakeProducer


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    return _rig(monkeypatch)


@pytest.fixture
def timeout_rig(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """An operator's own delivery timeout: records may fail alone (timed out), so the records between a
    run's ends carry the run's catcher."""
    return _rig(monkeypatch, {"message.timeout.ms": 30_000})


@pytest.fixture
def gapless_rig(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """The operator asked for librdkafka's gap-less guarantee: the records between a run's ends carry nothing."""
    return _rig(monkeypatch, GAPLESS)


GAPLESS = {"enable.gapless.guarantee": True}


def _rig(monkeypatch: pytest.MonkeyPatch, producer: dict[str, Any] | None = None, **worker: Any) -> SimpleNamespace:
    calls: list[tuple[str, Any]] = []
    rig = SimpleNamespace(
        calls=calls, clock=FakeClock(1000.0), admin=FakeAdmin(destination_partitions=None), metrics=WorkerMetrics()
    )
    # Wall-clock time: 2 s after the FakeMessage timestamps (1_700_000_000_000 ms + the offset).
    rig.wall = 1_700_000_002.0
    rig.consumer = FakeConsumer(calls)

    def make_producer(cluster: Any, **overrides: Any) -> FakeProducer:
        rig.producer = FakeProducer(calls, gapless=overrides.get("enable.gapless.guarantee") is True)
        rig.producer_settings = overrides
        return rig.producer

    monkeypatch.setattr(copier_module.kafka_clients, "consumer", lambda cluster, group, **kw: rig.consumer)
    monkeypatch.setattr(copier_module.kafka_clients, "producer", make_producer)
    monkeypatch.setattr(copier_module.kafka_clients, "admin", lambda cluster, **kw: rig.admin)
    rig.copier = _copier(rig, config=WorkerConfig(producer=producer or {}, **worker))
    return rig


def _copier(
    rig: SimpleNamespace,
    route: RouteConfig | None = None,
    config: WorkerConfig | None = None,
    **options: Any,
) -> RouteCopier:
    """A copier of ``rig``'s fake clients, on its clocks and metrics (``options``: the copier's own)."""
    return RouteCopier(
        route=route or RouteConfig(source="src", destination="dst"),
        source={},
        destination={},
        config=config or WorkerConfig(),
        metrics=rig.metrics,
        client_id="test",
        clock=rig.clock,
        wall_clock=lambda: rig.wall,
        sleep=rig.clock.sleep,
        **options,
    )


def _feed(rig: SimpleNamespace, partition: int, offsets: range) -> None:
    rig.consumer.queue.extend(FakeMessage(TOPIC, partition, o) for o in offsets)


def test_acquire_creates_the_destination_topic_and_copying_commits_what_was_acknowledged(rig: SimpleNamespace) -> None:
    result = rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    assert sorted(result.online) == [(TOPIC, 0), (TOPIC, 1)] and not result.errors and not result.deferred
    assert rig.admin.created == [(TOPIC, 2)]
    _feed(rig, 0, range(10, 15))
    assert rig.copier.copy_batch(0.1) == 5
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 15)]) in rig.calls
    assert {k: s.state for k, s in rig.copier.statuses().items()} == {(TOPIC, 0): "ONLINE", (TOPIC, 1): "ONLINE"}


def test_a_partition_missing_at_the_source_is_an_error_not_a_skip(rig: SimpleNamespace) -> None:
    result = rig.copier.acquire([(TOPIC, 0), (TOPIC, 5)])
    assert result.online == [(TOPIC, 0)]
    assert "does not exist at the source" in result.errors[(TOPIC, 5)]
    assert rig.copier.statuses()[(TOPIC, 5)].state == "ERROR"


def test_a_permanent_rejection_stops_the_partition_and_holds_the_watermark(timeout_rig: SimpleNamespace) -> None:
    """With a delivery timeout of the operator's own librdkafka skips a failed record and goes on, so only
    its partition stops (gap-less, the producer fails: see the gap-less tests below)."""
    rig = timeout_rig
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)  # creates the producer's pending list
    rig.producer.fail[(TOPIC, 0, 3)] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)  # the 3rd record: offset 2
    _feed(rig, 0, range(0, 3))
    _feed(rig, 1, range(0, 2))
    rig.copier.copy_batch(0.1)
    status = rig.copier.statuses()[(TOPIC, 0)]
    assert status.state == "ERROR" and "offset 2" in status.reason and "temporary" not in status.reason
    assert ("pause", [(TOPIC, 0)]) in rig.calls
    _feed(rig, 0, range(3, 6))  # fetched before the pause took effect: never sent
    produced_before = len(rig.producer.produced)
    rig.copier.copy_batch(0.1)
    assert len(rig.producer.produced) == produced_before
    rig.copier.commit()
    # Offset 1 has no report of its own (its run's last failed): not proven, so not committed past;
    # the partition's restart finds it on the destination and does not copy it again.
    assert ("commit", [(TOPIC, 0, 1), (TOPIC, 1, 2)]) in rig.calls
    rig.clock.now += 3600
    assert rig.copier.due_retries() == []


def test_a_temporary_failure_restarts_the_partition_after_the_backoff(timeout_rig: SimpleNamespace) -> None:
    rig = timeout_rig
    rig.copier.acquire([(TOPIC, 0)])
    rig.copier.copy_batch(0.1)
    rig.producer.fail[(TOPIC, 0, 2)] = KafkaError(KafkaError._MSG_TIMED_OUT)
    _feed(rig, 0, range(0, 4))
    rig.copier.copy_batch(0.1)
    assert "temporary" in rig.copier.statuses()[(TOPIC, 0)].reason
    assert rig.copier.due_retries() == []
    rig.clock.now += RETRY_BACKOFF_S
    assert rig.copier.due_retries() == [(TOPIC, 0)]
    rig.copier.release([(TOPIC, 0)], flush_timeout=1, commit_deadline=1)
    assert ("commit", [(TOPIC, 0, 1)]) in rig.calls  # up to the failed record, not past it
    assert rig.copier.held() == set() and rig.copier.due_retries() == []


def test_release_flushes_then_commits_then_unassigns(rig: SimpleNamespace) -> None:
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    rig.calls.clear()
    _feed(rig, 0, range(3, 5))
    rig.copier.copy_batch(0.1)
    rig.calls.clear()
    rig.copier.release([(TOPIC, 0)], flush_timeout=1, commit_deadline=1)
    kinds = [kind for kind, _ in rig.calls]
    assert kinds.index("flush") < kinds.index("commit") < kinds.index("unassign")
    assert ("commit", [(TOPIC, 0, 5)]) in rig.calls


def _refuse_every_commit(rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(offsets: Any, asynchronous: bool) -> None:
        rig.calls.append(("commit refused", None))
        raise KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE))

    monkeypatch.setattr(rig.consumer, "commit", refuse)


def test_a_release_whose_commit_keeps_failing_ends_at_its_deadline(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    _refuse_every_commit(rig, monkeypatch)
    rig.copier.release([(TOPIC, 0)], flush_timeout=1, commit_deadline=3)
    assert rig.clock.now >= 1003.0 and rig.clock.sleeps and set(rig.clock.sleeps) == {COMMIT_RETRY_S}
    assert ("unassign", [(TOPIC, 0)]) in rig.calls and rig.copier.held() == set()  # released all the same


def test_a_pause_whose_commit_keeps_failing_ends_at_its_deadline(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    _refuse_every_commit(rig, monkeypatch)
    rig.copier.set_paused({(TOPIC, 0)}, commit_deadline=3)
    assert rig.clock.now >= 1003.0 and rig.clock.sleeps and set(rig.clock.sleeps) == {COMMIT_RETRY_S}
    assert ("pause", [(TOPIC, 0)]) in rig.calls
    assert {k: s.state for k, s in rig.copier.statuses().items()} == {(TOPIC, 0): "PAUSED", (TOPIC, 1): "ONLINE"}


def test_records_acknowledged_while_the_map_is_written_are_committed_with_the_next_map_write(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Delivery reports are applied in runs (DeliveryLedger.settle), not while commit() waits for its
    # offset-map segments: a commit never passes what the segments it just wrote describe.
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 5))
    rig.copier.copy_batch(0.1)  # the fake delivers at once: 0..4 acknowledged
    _feed(rig, 0, range(5, 8))
    with monkeypatch.context() as patch:
        patch.setattr(rig.producer, "poll", lambda timeout: 0)  # 5..7 stay in flight
        rig.copier.copy_batch(0.1)
    assert rig.copier.commit()  # its wait for the map write delivers 5..7 as well
    assert ("commit", [(TOPIC, 0, 5)]) in rig.calls and rig.producer.map_writes[-1][1] == b"1|0|5"
    assert rig.copier.in_flight() == 0
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 8)]) in rig.calls and rig.producer.map_writes[-1][1] == b"1|0|8"


def test_a_failure_reported_while_the_map_is_written_holds_the_watermark_and_stops_the_partition_after(
    timeout_rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig = timeout_rig
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)  # 0..2 acknowledged
    rig.producer.fail[(TOPIC, 0, 5)] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)  # offset 4
    _feed(rig, 0, range(3, 6))
    with monkeypatch.context() as patch:
        patch.setattr(rig.producer, "poll", lambda timeout: 0)
        rig.copier.copy_batch(0.1)
    assert rig.copier.commit()  # 3 ok, 4 failed, 5 ok: all reported during the map write's wait
    assert ("commit", [(TOPIC, 0, 3)]) in rig.calls
    assert rig.copier.in_flight() == 0 and rig.copier.statuses()[(TOPIC, 0)].state == "ERROR"
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 4)]) in rig.calls  # up to the failed record, never past it


def test_producer_batches_shrink_to_fit_the_destination_topic_limit(rig: SimpleNamespace) -> None:
    first = rig.producer
    rig.admin.max_message_bytes = 50_000
    rig.copier.acquire([(TOPIC, 0)])
    assert rig.producer is not first  # rebuilt, after a flush, with smaller batches
    assert rig.producer_settings["batch.size"] == 50_000 - 1024
    second = rig.producer
    rig.copier.acquire([(TOPIC, 1)])
    assert rig.producer is second  # already fits


def test_a_fatal_producer_error_stops_the_route_and_a_new_producer_takes_over(rig: SimpleNamespace) -> None:
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    broken = rig.producer
    broken.fail[(TOPIC, 0, 1)] = KafkaError(KafkaError._FATAL, fatal=True)
    _feed(rig, 0, range(0, 2))
    rig.copier.copy_batch(0.1)
    assert {k: s.state for k, s in rig.copier.statuses().items()} == {(TOPIC, 0): "ERROR", (TOPIC, 1): "ERROR"}
    rig.clock.now += RETRY_BACKOFF_S
    due = rig.copier.due_retries()
    assert sorted(due) == [(TOPIC, 0), (TOPIC, 1)]
    rig.copier.release(due, flush_timeout=1, commit_deadline=1)
    assert rig.producer is not broken
    assert sorted(rig.copier.acquire(due).online) == sorted(due)  # copying again, with the new producer


def _copy_of(source_offset: int, cluster: str = "src") -> list[tuple[str, bytes]]:
    return [("ferry.provenance", encode([cluster], 0, source_offset))]


def test_a_new_owner_resumes_from_the_destination_skipping_what_is_there(rig: SimpleNamespace) -> None:
    """Committed 3; the destination holds 0-4 and 6 of this route (5 lost to a producer timeout
    gap) and another writer's record: 3, 4 and 6 are not copied again, 5 and 7 are."""
    rig.consumer.committed_offsets = {0: 3}
    rig.consumer.destination = {
        0: [_copy_of(0), _copy_of(1), _copy_of(2), _copy_of(3), _copy_of(9, "other"), _copy_of(4), _copy_of(6)]
    }
    result = rig.copier.acquire([(TOPIC, 0)])
    assert result.online == [(TOPIC, 0)]
    _feed(rig, 0, range(3, 8))
    rig.producer.delivered[(TOPIC, 0)] = 7  # the destination's next offset
    rig.copier.copy_batch(0)
    rig.producer.flush(0)
    assert [v for t, p, v in rig.producer.produced] == [b"v", b"v"]  # 5 and 7 only
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 8)]) in rig.calls
    # The map: the look-back's own records and the two new deliveries, persisted by the commit.
    segments = sorted(
        (parse_segment(k, v)[2] for k, v in rig.producer.map_writes), key=lambda s: s.dst_start if s else -1
    )
    assert segments == [Segment(0, 0, 4), Segment(4, 5, 1), Segment(6, 6, 1), Segment(5, 7, 1), Segment(7, 8, 1)]


def test_without_a_committed_offset_the_start_is_after_the_last_own_record(rig: SimpleNamespace) -> None:
    rig.consumer.destination = {0: [_copy_of(10), _copy_of(11)]}
    starts = rig.copier._starter.resume_at(TOPIC, [0])
    assert starts == {0: 12}


def test_without_a_committed_offset_the_look_back_maps_everything_the_previous_owner_copied(
    rig: SimpleNamespace,
) -> None:
    """A previous owner copied 0-2,499 and was killed before its first commit (its map segments
    lost with it): the look-back goes on past its first window to the log start, so the new owner's
    map describes every one of them (stopping at the newest left 0-1,499 to the timestamp method)."""
    rig.consumer.destination = {0: [_copy_of(o) for o in range(2_500)]}
    assert rig.copier._starter.resume_at(TOPIC, [0]) == {0: 2_500}
    assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, 2_500)]


def test_a_commit_never_passes_what_the_map_segments_it_wrote_describe(rig: SimpleNamespace) -> None:
    """Deliveries served while a commit waits for its map segments move the watermark on; the
    commit stays at what those segments describe, the next one goes on (exact offsets: the next owner's
    look-back stops just below the committed offset, so a commit past the map left a stretch that
    no segment described)."""
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 5))
    rig.copier.copy_batch(0)
    rig.producer.flush(0)  # 0-4 acknowledged: the map describes them
    _feed(rig, 0, range(5, 10))
    rig.producer.poll = lambda timeout: 0  # copy_batch's poll serves nothing: 5-9 stay in flight
    rig.copier.copy_batch(0)
    del rig.producer.poll  # the commit's wait for its segment serves them: acknowledged meanwhile
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 5)]) in rig.calls
    assert parse_segment(*rig.producer.map_writes[-1])[2] == Segment(0, 0, 5)
    assert rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 10)]) in rig.calls
    assert parse_segment(*rig.producer.map_writes[-1])[2] == Segment(0, 0, 10)


# -- multi-cluster: renamed destination, loop prevention, copy flags ------------------------------


@dataclass
class HeaderedMessage(FakeMessage):
    _headers: list[tuple[str, bytes]] = field(default_factory=list)

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers


class _AnyTopic(dict[str, Any]):
    """Metadata's topics where every name asked for is one topic; a whole cluster's lists none."""

    def __init__(self, meta: Any) -> None:
        super().__init__()
        self.meta = meta

    def get(self, topic: str, default: Any = None) -> Any:
        return self.meta if self.meta is not None else default


def _any_topic_metadata(partitions: int | None) -> Any:
    meta = SimpleNamespace(partitions=dict.fromkeys(range(partitions or 0)), error=None)
    return SimpleNamespace(topics=_AnyTopic(meta if partitions is not None else None), brokers={1: None})


def _copier_for(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, route: RouteConfig, origins: frozenset[str] | None = None
) -> RouteCopier:
    monkeypatch.setattr(FakeProducer, "list_topics", lambda self, topic, timeout: _any_topic_metadata(2))
    monkeypatch.setattr(
        FakeAdmin,
        "list_topics",
        lambda self, topic=None, timeout=-1: _any_topic_metadata(self.destination_partitions),
    )
    return _copier(rig, route, origins=origins)


def test_a_renamed_route_creates_and_writes_the_destination_name_and_commits_the_source(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    copier = _copier_for(rig, monkeypatch, RouteConfig(source="src", destination="dst", naming="prefix"))
    assert copier.acquire([(TOPIC, 0)]).online == [(TOPIC, 0)]
    assert rig.admin.created == [("src.orders", 2)]
    _feed(rig, 0, range(3))
    assert copier.copy_batch(0.1) == 3
    assert {t for t, _, _ in rig.producer.produced} == {"src.orders"}
    rig.producer.flush(0)
    assert copier.commit() and ("commit", [(TOPIC, 0, 3)]) in rig.calls


def test_prefix_naming_stops_a_topic_that_came_from_the_destination(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    copier = _copier_for(rig, monkeypatch, RouteConfig(source="src", destination="dst", naming="prefix"))
    result = copier.acquire([("dst.orders", 0)])
    assert "came from dst" in result.errors[("dst.orders", 0)] and not rig.admin.created


def test_loop_prevention_skips_what_came_through_the_destination_and_commits_past_it(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    copier = _copier_for(
        rig, monkeypatch, RouteConfig(source="src", destination="dst", loop_prevention=True), origins=frozenset({"src"})
    )
    copier.acquire([(TOPIC, 0)])
    back = [("app", b"x"), ("ferry.provenance", b"1|dst|0|7")]
    rig.consumer.queue.extend(
        [
            HeaderedMessage(TOPIC, 0, 0, _headers=[("app", b"x")]),  # local: copied
            HeaderedMessage(TOPIC, 0, 1, _headers=back),  # came from dst: skipped
            HeaderedMessage(TOPIC, 0, 2, _headers=back),
        ]
    )
    assert copier.copy_batch(0.1) == 1
    rig.producer.flush(0)
    assert copier.commit() and ("commit", [(TOPIC, 0, 3)]) in rig.calls  # the skips did not stall it


def test_a_distributor_copies_by_its_level_and_sets_its_bit(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = RouteConfig(source="c3", destination="c4", copy_level=1, distributor="c3.L1")
    copier = _copier_for(rig, monkeypatch, route)
    sent: list[Any] = []
    copier.acquire([(TOPIC, 0)])
    monkeypatch.setattr(
        rig.producer,
        "produce",
        lambda topic, value, key, partition, callback, on_delivery, timestamp, headers: sent.append(headers),
    )
    rig.consumer.queue.extend(
        [
            HeaderedMessage(TOPIC, 0, 0, _headers=[("ferry.provenance", b"1|c1|4|9")]),  # 0100 from level 3: copy
            HeaderedMessage(TOPIC, 0, 1, _headers=[("ferry.provenance", b"1|c4|1|9")]),  # 0001: already done
        ]
    )
    assert copier.copy_batch(0.1) == 1
    assert sent == [[("ferry.provenance", encode(["c1", "c3"], 5, 0, TOPIC))]]  # Axual's 0101


def test_every_partition_is_assigned_at_an_explicit_offset(rig: SimpleNamespace) -> None:
    # librdkafka#5586: assign() without an offset may never fetch; nothing committed -> the reset
    # policy's logical offset.
    assigned: list[TopicPartition] = []
    rig.consumer.incremental_assign = assigned.extend
    rig.consumer.committed_offsets = {1: 7}
    rig.admin.destination_partitions = 2  # the destination topic exists
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    assert sorted((tp.partition, tp.offset) for tp in assigned) == [(0, OFFSET_BEGINNING), (1, 7)]


def test_a_destination_topic_missing_while_offsets_are_committed_is_copied_again_from_the_log_start(
    rig: SimpleNamespace,
) -> None:
    assigned: list[TopicPartition] = []
    rig.consumer.incremental_assign = assigned.extend
    rig.consumer.committed_offsets = {1: 7}
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])  # the copier creates the destination topic
    assert sorted((tp.partition, tp.offset) for tp in assigned) == [(0, OFFSET_BEGINNING), (1, OFFSET_BEGINNING)]
    reason = rig.copier.statuses()[(TOPIC, 1)].reason
    assert reason and "destination topic was deleted under Ferry" in reason
    assert rig.copier.statuses()[(TOPIC, 0)].reason is None


def test_map_segments_refused_by_a_full_producer_queue_are_all_written_at_the_next_commit(rig: SimpleNamespace) -> None:
    rig.copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, [*range(0, 3), *range(5, 8)])  # a source gap (e.g. transaction markers): two segments
    rig.copier.copy_batch(0)
    produce = rig.producer.produce

    def full_for_the_map(topic: str, *args: Any, **kwargs: Any) -> None:
        if topic == MAP_TOPIC:
            raise BufferError("queue full")
        produce(topic, *args, **kwargs)

    rig.producer.produce = full_for_the_map
    assert not rig.copier.commit()  # nothing committed past an unwritten map
    assert not [c for c in rig.calls if c[0] == "commit"]
    del rig.producer.produce
    assert rig.copier.commit()
    assert [parse_segment(*w)[2] for w in rig.producer.map_writes] == [Segment(0, 0, 3), Segment(5, 3, 3)]
    assert ("commit", [(TOPIC, 0, 8)]) in rig.calls


def test_record_age_is_observed_once_per_acknowledged_run_with_its_oldest_record(rig: SimpleNamespace) -> None:
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    _feed(rig, 0, range(10, 15))
    _feed(rig, 1, range(20, 23))
    assert rig.copier.copy_batch(0.1) == 8  # two runs acknowledged: partition 0's, then partition 1's
    registry = rig.metrics.registry
    labels = {"route": "src.dst"}
    assert registry.get_sample_value("ferry_worker_record_age_seconds_count", labels) == 2
    # Acknowledged at 2 s past the base; the runs' first records were stamped 10 ms and 20 ms past it.
    assert registry.get_sample_value("ferry_worker_record_age_seconds_sum", labels) == pytest.approx(1.99 + 1.98)
    assert registry.get_sample_value("ferry_worker_record_age_seconds_bucket", {**labels, "le": "1.0"}) == 0
    assert registry.get_sample_value("ferry_worker_record_age_seconds_bucket", {**labels, "le": "2.5"}) == 2


def test_the_destination_producer_compresses_by_the_route_unless_worker_producer_says_otherwise(
    rig: SimpleNamespace,
) -> None:
    assert rig.producer_settings["compression.type"] == "lz4"  # the route's default
    route = RouteConfig(source="src", destination="dst", compression="zstd")
    _copier(rig, route)
    assert rig.producer_settings["compression.type"] == "zstd"
    _copier(rig, route, WorkerConfig(producer={"compression.type": "gzip"}))
    assert rig.producer_settings["compression.type"] == "gzip"


def test_a_route_taking_over_from_mirrormaker2_starts_where_it_last_flushed(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MirrorMaker 2 flushed offset 99 of partition 0 and wrote 125 records (sync: source 49 is destination 49);
    it never copied partition 1, which starts as a new partition. Once committed, the route's own offset wins."""
    topics = {
        "mm2-offsets.src.internal": [
            (b'["MirrorSourceConnector",{"cluster":"src","partition":0,"topic":"orders"}]', b'{"offset":99}'),
            (b'["MirrorSourceConnector",{"cluster":"other","partition":1,"topic":"orders"}]', b'{"offset":5}'),
        ],
        "mm2-offset-syncs.dst.internal": [encode_offset_sync(OffsetSync(TOPIC, 0, 49, 49))],
    }
    monkeypatch.setattr(mm2_takeover, "read_topic", lambda cluster, topic, client_id: topics.get(topic, []))
    route = RouteConfig(source="src", destination="dst", naming="prefix", mirrormaker2=MirrorMaker2Config())
    copier = _copier_for(rig, monkeypatch, route)
    metrics = copier._metrics
    rig.consumer.destination = {0: [[("origin", b"mm2")]] * 125}  # MirrorMaker 2's copies: no provenance header
    assigned: list[TopicPartition] = []
    rig.consumer.incremental_assign = assigned.extend
    assert sorted(copier.acquire([(TOPIC, 0), (TOPIC, 1)]).online) == [(TOPIC, 0), (TOPIC, 1)]
    assert sorted((tp.partition, tp.offset) for tp in assigned) == [(0, 100), (1, OFFSET_BEGINNING)]
    assert metrics.mm2_recopied.labels("src.dst", TOPIC, "0")._value.get() == 25
    rig.consumer.committed_offsets = {0: 130}
    assert copier._starter.resume_at(TOPIC, [0]) == {0: 130}


def test_copied_records_and_bytes_are_counted_per_partition_for_the_load_report(rig: SimpleNamespace) -> None:
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    _feed(rig, 0, range(0, 3))
    _feed(rig, 1, range(0, 2))
    _feed(rig, 0, range(3, 4))
    assert rig.copier.copy_batch(0.1) == 6
    copied = rig.copier.take_copied()
    size = len(FakeMessage(TOPIC, 0, 0))
    assert copied == {(TOPIC, 0): (4, 4 * size), (TOPIC, 1): (2, 2 * size)}
    assert rig.copier.take_copied() == {}


def _recording_callbacks(rig: SimpleNamespace) -> list[tuple[int, str]]:
    """Wraps the producer's produce: each record's partition, and the delivery callback it carries
    (on_first, on_last, the C-level catcher ``__setitem__`` of the records between the ends, or "")."""
    produce = rig.producer.produce
    callbacks: list[tuple[int, str]] = []

    def recording(
        topic: str,
        value: bytes,
        key: bytes,
        partition: int = -1,
        callback: Any = None,
        on_delivery: Any = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        callbacks.append((partition, getattr(callback or on_delivery, "__name__", "")))
        produce(topic, value, key, partition, callback, on_delivery, timestamp, headers)

    rig.producer.produce = recording
    return callbacks


@pytest.mark.parametrize(("producer", "between_callback"), [(GAPLESS, ""), ({}, "__setitem__")])
def test_only_the_first_and_the_last_record_of_a_partitions_run_carry_a_python_delivery_callback(
    monkeypatch: pytest.MonkeyPatch, producer: dict[str, Any], between_callback: str
) -> None:
    """Gap-less (the operator's choice) the records between a run's ends carry nothing; by default
    (librdkafka may skip a failed record), the run's C-level catcher."""
    rig = _rig(monkeypatch, producer)
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    callbacks = _recording_callbacks(rig)
    _feed(rig, 0, range(0, 4))
    _feed(rig, 1, range(0, 1))
    _feed(rig, 0, range(4, 6))
    assert rig.copier.copy_batch(0.1) == 7
    between = (0, between_callback)
    assert callbacks == [
        (0, "on_first"),
        between,
        between,
        (0, "on_last"),
        (1, "on_last"),
        (0, "on_first"),
        (0, "on_last"),
    ]
    rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 6), (TOPIC, 1, 1)]) in rig.calls
    assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, 6)]


def test_another_writer_within_a_run_restarts_the_partition_which_then_reports_record_by_record(
    rig: SimpleNamespace,
) -> None:
    rig.copier.acquire([(TOPIC, 0)])
    rig.copier.copy_batch(0.1)
    rig.producer.foreign[(TOPIC, 0, 2)] = 1  # another writer's record lands just before the 2nd copy
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    status = rig.copier.statuses()[(TOPIC, 0)]
    assert status.state == "ERROR" and "another writer" in status.reason
    rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 1)]) in rig.calls  # 0 proven at 0; 1 not proven
    rig.copier.release([(TOPIC, 0)], 0, 1)
    rig.copier.acquire([(TOPIC, 0)])
    callbacks = _recording_callbacks(rig)
    _feed(rig, 0, range(1, 4))
    rig.copier.copy_batch(0.1)
    assert callbacks == [(0, "on_last")] * 3


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    foreign=st.dictionaries(st.integers(1, 16), st.integers(1, 3), max_size=4),
    refused=st.sets(st.integers(1, 16), max_size=2),
    gapless=st.booleans(),
    batch_size=st.sampled_from([None, 8]),
)
def test_another_writer_and_failures_anywhere_keep_the_offset_map_and_the_commit_exact(
    batches: list[int], foreign: dict[int, int], refused: set[int], gapless: bool, batch_size: int | None
) -> None:
    """Batches of one partition's records, another writer's records landing before any of the copies,
    and any copies refused: every offset-map entry names the destination offset that holds that
    source record, and every source offset below the committed one is on the destination and mapped.
    Gap-less (a refused record fails the producer for good) or librdkafka's default (a record times
    out alone); runs of a whole batch, or of 2-4 records (batch.size 8), which wait for their window."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        settings = GAPLESS if gapless else {}
        rig = _rig(monkeypatch, settings if batch_size is None else {**settings, "batch.size": batch_size})
        key = (TOPIC, 0)
        rig.copier.acquire([key])
        rig.copier.copy_batch(0.1)
        rig.producer.foreign = {(TOPIC, 0, nth): count for nth, count in foreign.items()}
        error = KafkaError.NOT_ENOUGH_REPLICAS if gapless else KafkaError._MSG_TIMED_OUT
        rig.producer.fail = {(TOPIC, 0, nth): KafkaError(error) for nth in refused}
        offset = 0
        for size in batches:
            rig.consumer.queue.extend(FakeMessage(TOPIC, 0, o, _value=b"r%d" % o) for o in range(offset, offset + size))
            offset += size
            rig.copier.copy_batch(0.1)
        rig.copier.flush(0)
        rig.copier.commit()
        landed = rig.producer.landed.get((TOPIC, 0), {})
        offsets = rig.copier._ledger.maps[key]
        mapped: dict[int, int] = {}
        for segment in offsets.segments():
            for source in range(segment.src_start, segment.src_end):
                destination = segment.destination_of(source)
                assert destination is not None and landed.get(destination) == b"r%d" % source
                mapped[source] = destination
        commits = [dict(((t, p), o) for t, p, o in stored) for name, stored in rig.calls if name == "commit"]
        committed = commits[-1].get(key, 0) if commits else 0
        assert all(source in mapped for source in range(committed))
        if not foreign and not refused:
            assert committed == offset and rig.copier.statuses()[key].state == "ONLINE"


def test_a_failed_record_between_a_runs_ends_is_not_hidden_by_another_writers_record_in_its_place(
    timeout_rig: SimpleNamespace,
) -> None:
    """Three records; the second times out (it takes no offset) and another writer's record lands
    where it would have: the ends look contiguous, but the run's catcher saw the failure."""
    rig = timeout_rig
    rig.copier.acquire([(TOPIC, 0)])
    rig.copier.copy_batch(0.1)
    rig.producer.fail[(TOPIC, 0, 2)] = KafkaError(KafkaError._MSG_TIMED_OUT)
    rig.producer.foreign[(TOPIC, 0, 3)] = 1
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    status = rig.copier.statuses()[(TOPIC, 0)]
    assert status.state == "ERROR" and "failed" in status.reason
    rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 1)]) in rig.calls
    segments = rig.copier._ledger.maps[(TOPIC, 0)].segments()
    assert [(s.src_start, s.dst_start, s.length) for s in segments] == [(0, 0, 1), (2, 2, 1)]


def test_gapless_a_failed_record_between_a_runs_ends_fails_the_producer_and_every_partition_restarts(
    gapless_rig: SimpleNamespace,
) -> None:
    """A gap-less producer: so the records between a run's ends carry no report: the second
    of three fails unreported and another writer's record lands in its place. The failure fails the
    producer for good, so the run's last report fails too: nothing past the first record is committed,
    every partition of the route restarts for a temporary reason, and the producer is built anew."""
    rig = gapless_rig
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    first_producer = rig.producer
    rig.producer.fail[(TOPIC, 0, 2)] = KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)
    rig.producer.foreign[(TOPIC, 0, 3)] = 1
    _feed(rig, 0, range(0, 3))
    rig.copier.copy_batch(0.1)
    statuses = rig.copier.statuses()
    assert {k: s.state for k, s in statuses.items()} == {(TOPIC, 0): "ERROR", (TOPIC, 1): "ERROR"}
    assert all("temporary" in s.reason for s in statuses.values())
    assert rig.copier.commit()  # nothing to commit through a failed producer: it cannot write the map
    assert not [call for call in rig.calls if call[0] == "commit"]
    assert [(s.src_start, s.dst_start, s.length) for s in rig.copier._ledger.maps[(TOPIC, 0)].segments()] == [(0, 0, 1)]
    assert (TOPIC, 0) in rig.copier._ledger.exact  # it restarts record by record: a failure names its record
    rig.copier.release([(TOPIC, 0), (TOPIC, 1)], 0, 1)
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    assert rig.producer is not first_producer and rig.producer.fatal is None


def test_a_destination_that_accepts_nothing_for_the_stall_limit_fails_the_producer_and_frees_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records never time out in a gap-less producer: a queue that stays full for the worker's
    ``destination_stall_s`` purges the producer and stops every partition of the route for a temporary
    reason; what was in flight is not committed."""
    rig = _rig(monkeypatch, GAPLESS, destination_stall_s=30)
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    producer = rig.producer
    produce = producer.produce
    full_after = 3

    def full(*args: Any, **kwargs: Any) -> None:
        if producer.counts.get((TOPIC, 0), 0) >= full_after:
            raise BufferError("Local: Queue full")
        produce(*args, **kwargs)

    def waiting(timeout: float) -> int:  # delivers nothing; the wait takes its time
        rig.clock.now += timeout
        return 0

    producer.produce = full
    monkeypatch.setattr(producer, "poll", waiting)
    monkeypatch.setattr(producer, "purge", lambda **kwargs: producer.calls.append(("purge", None)), raising=False)
    _feed(rig, 0, range(0, 6))
    started = rig.clock.now
    rig.copier.copy_batch(0.1)
    assert 30 <= rig.clock.now - started < 60
    assert ("purge", None) in rig.calls
    statuses = rig.copier.statuses()
    assert {k: s.state for k, s in statuses.items()} == {(TOPIC, 0): "ERROR", (TOPIC, 1): "ERROR"}
    assert "acknowledged nothing" in statuses[(TOPIC, 0)].reason and "temporary" in statuses[(TOPIC, 0)].reason
    rig.copier.commit()
    assert not [call for call in rig.calls if call[0] == "commit" and call[1] and call[1][0][2] > 0]


def _recording_polls(rig: SimpleNamespace, callbacks: list[tuple[int, str]]) -> None:
    """Marks each poll of the producer in ``callbacks`` (as ``(-1, "poll")``) among the records produced."""
    poll = rig.producer.poll

    def recording(timeout: float) -> int:
        callbacks.append((-1, "poll"))
        return int(poll(timeout))

    rig.producer.poll = recording


def test_a_run_holds_a_producer_batch_at_most_and_a_partition_waits_until_one_batch_is_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """batch.size 100 and records of 30 B: a run closes at 90 B (a fourth record would take it past a
    batch). Partition 0's third run waits until the destination acknowledged its first two (180 B in
    flight, more than one batch), so the producer never holds more than two batches of a partition; and
    it waits after partition 1's records, which come later in the batch, went to the producer."""
    rig = _rig(monkeypatch, {"batch.size": 100})
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    callbacks = _recording_callbacks(rig)
    _recording_polls(rig, callbacks)
    rig.consumer.queue.extend(FakeMessage(TOPIC, 0, o, _value=b"x" * 30) for o in range(9))
    rig.consumer.queue.extend(FakeMessage(TOPIC, 1, o, _value=b"x" * 30) for o in range(3))
    assert rig.copier.copy_batch(0.1) == 12
    run = [(0, "on_first"), (0, "__setitem__"), (0, "on_last")]
    other = [(1, "on_first"), (1, "__setitem__"), (1, "on_last")]
    assert callbacks == [*run, *run, *other, (-1, "poll"), *run, (-1, "poll")]
    rig.copier.commit()
    assert ("commit", [(TOPIC, 0, 9), (TOPIC, 1, 3)]) in rig.calls
    assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, 9)]
    assert rig.copier._ledger.bytes_in_flight == {(TOPIC, 0): 0, (TOPIC, 1): 0}


def test_a_partition_whose_window_stays_full_for_the_stall_limit_fails_the_producer_and_frees_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The destination acknowledges nothing: the partition's third run waits for its window, and after the
    worker's ``destination_stall_s`` the producer is purged and every partition of the route stops for a
    temporary reason, the record that waited named; nothing unacknowledged is committed."""
    rig = _rig(monkeypatch, {"batch.size": 100}, destination_stall_s=30)
    rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    rig.copier.copy_batch(0.1)
    producer = rig.producer

    def waiting(timeout: float) -> int:  # delivers nothing; the wait takes its time
        rig.clock.now += timeout
        return 0

    monkeypatch.setattr(producer, "poll", waiting)
    monkeypatch.setattr(producer, "purge", lambda **kwargs: producer.calls.append(("purge", None)), raising=False)
    rig.consumer.queue.extend(FakeMessage(TOPIC, 0, o, _value=b"x" * 30) for o in range(9))
    started = rig.clock.now
    rig.copier.copy_batch(0.1)
    assert 30 <= rig.clock.now - started < 60
    assert ("purge", None) in rig.calls and producer.counts[(TOPIC, 0)] == 6
    statuses = rig.copier.statuses()
    assert {k: s.state for k, s in statuses.items()} == {(TOPIC, 0): "ERROR", (TOPIC, 1): "ERROR"}
    assert "offset 6: the destination acknowledged nothing" in statuses[(TOPIC, 0)].reason
    assert "temporary" in statuses[(TOPIC, 0)].reason
    rig.copier.commit()
    assert not [call for call in rig.calls if call[0] == "commit" and call[1] and call[1][0][2] > 0]


@pytest.mark.parametrize(("producer", "proven"), [({}, 5), (GAPLESS, 1)])
def test_a_record_the_producer_refuses_settles_the_run_before_it_and_stops_its_partition_for_good(
    monkeypatch: pytest.MonkeyPatch, producer: dict[str, Any], proven: int
) -> None:
    """Records 0-4 go without the run's closing callback (5 follows them); 5 is refused by produce():
    0-4 are settled once delivered as far as their reports prove, the commit stops there, and the
    partition's reason names 5. With the run's catcher (a delivery timeout of the operator's own) its
    newest success stands for the last record: all five are proven. Gap-less, nothing reports between
    the ends: only the first is, and the rest are copied again after the look-back, record by record."""
    rig = _rig(monkeypatch, producer)
    rig.copier.acquire([(TOPIC, 0)])
    rig.copier.copy_batch(0.1)
    rig.producer.refuse[(TOPIC, 0, 6)] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    _feed(rig, 0, range(0, 8))
    rig.copier.copy_batch(0.1)
    status = rig.copier.statuses()[(TOPIC, 0)]
    assert status.state == "ERROR" and "offset 5" in status.reason and "temporary" not in status.reason
    rig.copier.commit()
    assert ("commit", [(TOPIC, 0, proven)]) in rig.calls
    assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, proven)]


@pytest.mark.parametrize("gapless", [False, True])
def test_a_record_that_may_be_refused_alone_is_a_run_of_its_own_and_named_by_its_offset(
    monkeypatch: pytest.MonkeyPatch, gapless: bool
) -> None:
    """A record larger than half a producer batch travels alone, so the destination may refuse it alone
    (too large): it carries its own report, and its partition stops for good naming its offset. Gap-less,
    the refusal also fails the producer, which is built anew; the partition stays stopped."""
    rig = _rig(monkeypatch, GAPLESS if gapless else {})
    rig.copier.acquire([(TOPIC, 0)])
    rig.copier.copy_batch(0.1)
    callbacks = _recording_callbacks(rig)
    rig.producer.fail[(TOPIC, 0, 3)] = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
    big = rig.copier._committer.record_alone_above + 1
    rig.consumer.queue.extend(FakeMessage(TOPIC, 0, o, _value=b"x" * big if o == 2 else b"v") for o in range(5))
    rig.copier.copy_batch(0.1)
    assert callbacks == [(0, "on_first"), (0, "on_last"), (0, "on_last"), (0, "on_first"), (0, "on_last")]
    status = rig.copier.statuses()[(TOPIC, 0)]
    assert status.state == "ERROR" and "offset 2" in status.reason and "temporary" not in status.reason
    rig.copier.commit()
    if gapless:  # nothing is committed through a failed producer; the next one commits 0-1 (mapped)
        assert rig.producer.fatal is not None and not [call for call in rig.calls if call[0] == "commit"]
        assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, 2)]
    else:
        assert ("commit", [(TOPIC, 0, 2)]) in rig.calls


def test_on_an_exactly_once_route_a_failed_record_between_a_runs_ends_aborts_the_transaction(
    rig: SimpleNamespace,
) -> None:
    """The records between a run's ends carry no callback on an exactly-once route: the second of three
    fails unreported and another writer's record lands in its place, so the run looks proven; but the
    failure fails the transaction, which is aborted, and no source offset is committed past it."""
    copier = _exactly_once(rig)
    copier.acquire([(TOPIC, 0)])
    copier.copy_batch(0.1)
    callbacks = _recording_callbacks(rig)
    rig.producer.fail[(TOPIC, 0, 2)] = KafkaError(KafkaError._MSG_TIMED_OUT)
    rig.producer.foreign[(TOPIC, 0, 3)] = 1
    _feed(rig, 0, range(0, 3))
    copier.copy_batch(0.1)
    assert callbacks == [(0, "on_first"), (0, ""), (0, "on_last")]
    copier.commit()
    assert ("abort_transaction", None) in rig.calls and ("commit_transaction", None) not in rig.calls
    assert not [call for call in rig.calls if call[0] == "commit"]
    assert copier.statuses()[(TOPIC, 0)].state == "ERROR"


def _exactly_once(rig: SimpleNamespace) -> RouteCopier:
    """A copier of ``rig``'s clients that writes in transactions under the writer id ``ferry.src.dst.w1``."""
    return _copier(rig, transactional_id="ferry.src.dst.w1")


def _source_commits(rig: SimpleNamespace) -> list[Any]:
    return [call for call in rig.calls if call[0] == "commit"]


def test_a_writer_fenced_while_releasing_stays_fenced_until_the_worker_registers_again(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The assignment takes partition 0 away, and its release's commit meets the leader's fence: the
    route's writer stays fenced through that release and through its other partition's restart (the
    worker relies on it to stop and register again); only registering again builds a new writer."""
    _reads_back(rig, monkeypatch)
    copier = _exactly_once(rig)
    copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    _feed(rig, 0, range(0, 3))
    _feed(rig, 1, range(0, 3))
    copier.copy_batch(0.1)
    fenced_writer = rig.producer
    fenced_writer.refuse_commit = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    copier.release([(TOPIC, 0)], flush_timeout=1, commit_deadline=1)
    assert copier.fenced and rig.producer is fenced_writer
    assert copier.statuses()[(TOPIC, 1)].state == "ERROR"
    rig.clock.advance(RETRY_BACKOFF_S)
    copier.release(copier.due_retries(), flush_timeout=1, commit_deadline=1)
    assert copier.fenced and rig.producer is fenced_writer and not copier.held()
    assert "fenced" in copier.acquire([(TOPIC, 1)]).deferred[(TOPIC, 1)]  # nothing starts under a fenced writer
    assert not _source_commits(rig)
    copier.registered_again()
    assert not copier.fenced and rig.producer is not fenced_writer
    mark = len(rig.calls)
    assert copier.acquire([(TOPIC, 1)]).online == [(TOPIC, 1)]
    names = [name for name, _ in rig.calls[mark:]]
    assert names.index("init_transactions") < names.index("read back")  # the new writer registered first


def test_after_an_aborted_transaction_a_partition_released_later_commits_none_of_its_copies(
    rig: SimpleNamespace,
) -> None:
    """Both partitions' copies went with the aborted transaction. Partition 0 is released first (the
    assignment took it away) and the route's producer is built anew; partition 1, released at its
    restart, must not commit the source offsets of its aborted copies under the new producer."""
    copier = _exactly_once(rig)
    copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    _feed(rig, 0, range(0, 3))
    _feed(rig, 1, range(0, 3))
    copier.copy_batch(0.1)
    rig.producer.refuse_commit = KafkaError(KafkaError._TIMED_OUT, "refused", txn_requires_abort=True)
    copier.commit()
    assert ("abort_transaction", None) in rig.calls
    copier.release([(TOPIC, 0)], flush_timeout=1, commit_deadline=1)
    rig.clock.advance(RETRY_BACKOFF_S)
    copier.release(copier.due_retries(), flush_timeout=1, commit_deadline=1)
    assert not _source_commits(rig)


def _reads_back(rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records ``("read back", partition)`` in the calls whenever the look-back asks for the destination's offsets."""
    watermarks = rig.consumer.get_watermark_offsets

    def recorded(tp: Any, timeout: float) -> tuple[int, int]:
        rig.calls.append(("read back", tp.partition))
        return watermarks(tp, timeout)

    monkeypatch.setattr(rig.consumer, "get_watermark_offsets", recorded)


def test_a_commit_whose_outcome_is_unknown_is_settled_by_a_new_writer_before_the_destination_is_read_again(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """commit_transaction timed out: under the old transaction protocol that transaction may still
    commit. The producer is replaced, not asked to abort; nothing is committed at the source; and the
    partition restarts only after the new producer's init_transactions (which returns once the
    coordinator completed or aborted the old transaction) has returned."""
    _reads_back(rig, monkeypatch)
    copier = _exactly_once(rig)
    copier.acquire([(TOPIC, 0)])
    _feed(rig, 0, range(0, 3))
    copier.copy_batch(0.1)
    unsure = rig.producer
    unsure.refuse_commit = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
    copier.commit()
    assert copier.statuses()[(TOPIC, 0)].state == "ERROR"
    assert ("abort_transaction", None) not in rig.calls and not _source_commits(rig)
    rig.clock.advance(RETRY_BACKOFF_S)
    copier.release(copier.due_retries(), flush_timeout=1, commit_deadline=1)
    assert rig.producer is not unsure and not _source_commits(rig)
    settling = rig.producer
    settling.refuse_init = KafkaError(KafkaError._TIMED_OUT, "coordinator not answering", retriable=True)
    mark = len(rig.calls)
    deferred = copier.acquire([(TOPIC, 0)]).deferred
    assert "transaction" in deferred[(TOPIC, 0)] and ("read back", 0) not in rig.calls[mark:]
    assert copier.acquire([(TOPIC, 0)]).online == [(TOPIC, 0)]
    names = [name for name, _ in rig.calls[mark:]]
    assert names.index("init_transactions") < names.index("read back")


def test_one_acquire_registers_the_writer_once_while_the_coordinator_does_not_answer_and_defers_every_topic(
    rig: SimpleNamespace,
) -> None:
    """The destination's transaction coordinator does not answer: an acquire of the route's three topics
    tries to register the writer once (the copy loop, every route's, waits for one registration, not one
    per topic), defers every partition naming the coordinator, and reads nothing back. Once the
    coordinator answers, the next acquire starts them all."""
    copier = _exactly_once(rig)
    rig.producer.coordinator_away = True
    keys = [(topic, p) for topic in (TOPIC, "payments", "refunds") for p in (0, 1)]
    result = copier.acquire(keys)
    assert result.online == [] and sorted(result.deferred) == sorted(keys)
    assert all("transaction coordinator" in why for why in result.deferred.values())
    assert len(rig.producer.init_timeouts) == 1 and not copier.held()
    rig.producer.coordinator_away = False
    assert sorted(copier.acquire(keys).online) == sorted(keys)


def _open_transaction_waits(rig: SimpleNamespace) -> float:
    value = rig.metrics.registry.get_sample_value(
        "ferry_worker_lookback_open_transaction_waits_total", {"route": "src.dst"}
    )
    return value or 0.0


def test_a_partition_an_open_transaction_holds_back_on_the_destination_is_deferred_not_started(
    rig: SimpleNamespace,
) -> None:
    """Another writer's open transaction holds destination partition 0's last stable offset at 2, below
    its end 5: the look-back would miss the copies past it. The start waits (counted), and when the
    transaction has not ended in time partition 0 is deferred with the reason; partition 1 starts.
    Once it ended, partition 0 starts after every copy."""
    rig.consumer.destination = {0: [_copy_of(0), _copy_of(1)]}
    rig.admin.log_ends = {0: 5}
    result = rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    assert result.online == [(TOPIC, 1)] and (TOPIC, 0) not in rig.copier.held()
    assert "open transaction" in result.deferred[(TOPIC, 0)] and "2, below its end 5" in result.deferred[(TOPIC, 0)]
    assert _open_transaction_waits(rig) == 1 and rig.clock.sleeps  # waited on the injected clock
    rig.consumer.destination[0] += [_copy_of(2), _copy_of(3), _copy_of(4)]  # committed: all visible
    assert rig.copier.acquire([(TOPIC, 0)]).online == [(TOPIC, 0)]
    assert rig.copier._ledger.maps[(TOPIC, 0)].segments() == [Segment(0, 0, 5)]  # every copy found
    assert _open_transaction_waits(rig) == 1


def test_a_partition_whose_destination_transaction_ends_while_it_waits_starts_after_it(
    rig: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The open transaction commits while the look-back waits for it: the start is counted once and
    comes after the copy that transaction made visible."""
    rig.consumer.destination = {0: [_copy_of(0), _copy_of(1)]}
    rig.admin.log_ends = {0: 3}
    asked = rig.consumer.get_watermark_offsets

    def ending(tp: Any, timeout: float) -> tuple[int, int]:
        if rig.clock.sleeps:  # the transaction commits while the look-back waits: the LSO reaches the end
            rig.consumer.destination[0] = [_copy_of(0), _copy_of(1), _copy_of(2)]
        return asked(tp, timeout)

    monkeypatch.setattr(rig.consumer, "get_watermark_offsets", ending)
    assert rig.copier._starter.resume_at(TOPIC, [0]) == {0: 3}  # after the copy its transaction made visible
    assert _open_transaction_waits(rig) == 1


def test_one_acquire_waits_for_open_transactions_on_the_destination_at_most_once_in_all(
    rig: SimpleNamespace,
) -> None:
    """Both destination partitions are held back by an open transaction: the copy loop waits for them
    at most ``OPEN_TRANSACTION_WAIT_S`` in all (on its injected clock), not once per partition; both
    are deferred and both counted."""
    rig.consumer.destination = {0: [_copy_of(0)], 1: [_copy_of(0)]}
    rig.admin.log_ends = {0: 3, 1: 3}
    result = rig.copier.acquire([(TOPIC, 0), (TOPIC, 1)])
    assert result.online == [] and sorted(result.deferred) == [(TOPIC, 0), (TOPIC, 1)]
    assert sum(rig.clock.sleeps) <= lookback.OPEN_TRANSACTION_WAIT_S + 0.2
    assert _open_transaction_waits(rig) == 2
