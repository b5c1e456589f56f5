"""worker/copying/partition_states.py: a copier's held partitions, their states and what the consumer is told."""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicPartition

from ferry.worker.copying.partition_states import PartitionStates
from ferry.worker.errors import RETRY_BACKOFF_S, PartitionDeferred, PartitionStopped
from ferry.worker.metrics import WorkerMetrics
from tests.fakes import TOPIC, FakeClock, FakeConsumer

A, B = (TOPIC, 0), (TOPIC, 1)


def _states() -> tuple[PartitionStates, list[tuple[str, Any]], FakeClock]:
    calls: list[tuple[str, Any]] = []
    clock = FakeClock(1000.0)
    states = PartitionStates(route_name="src.dst", consumer=FakeConsumer(calls), metrics=WorkerMetrics(), clock=clock)
    states.start([TopicPartition(TOPIC, 0, 5), TopicPartition(TOPIC, 1, 7)])
    return states, calls, clock


def _state_of(states: PartitionStates) -> dict[Any, str]:
    return {key: status.state for key, status in states.statuses().items()}


def test_started_partitions_are_assigned_and_resumed_and_online() -> None:
    states, calls, _ = _states()
    assert calls == [("assign", [A, B]), ("resume", [A, B])]
    assert _state_of(states) == {A: "ONLINE", B: "ONLINE"} and states.held() == {A, B}


def test_a_temporary_stop_pauses_the_partition_and_offers_it_again_after_its_backoff() -> None:
    states, calls, clock = _states()
    states.stop(A, PartitionDeferred("the destination timed out"))
    assert ("pause", [A]) in calls and states.changed
    assert "temporary" in (states.statuses()[A].reason or "") and states.running() == [B]
    assert states.due_retries() == []
    clock.advance(RETRY_BACKOFF_S)
    assert states.due_retries() == [A]


def test_a_stopped_partition_keeps_its_first_reason_and_a_permanent_stop_is_never_retried() -> None:
    states, _, clock = _states()
    states.stop(A, PartitionStopped("record too large"))
    states.stop(A, PartitionDeferred("later"))
    assert states.statuses()[A].reason == "record too large"
    clock.advance(3600)
    assert states.due_retries() == []


def test_a_partition_refused_at_acquire_is_held_in_error_without_being_assigned() -> None:
    states, calls, _ = _states()
    states.not_started((TOPIC, 9), "partition 9 does not exist at the source")
    assert _state_of(states)[(TOPIC, 9)] == "ERROR" and (TOPIC, 9) not in states.assigned
    states.release([(TOPIC, 9)])
    assert not [c for c in calls if c[0] == "unassign"] and (TOPIC, 9) not in states.held()


def test_pause_and_resume_tell_the_consumer_and_error_outranks_paused() -> None:
    states, calls, _ = _states()
    states.pause({A, B})
    assert ("pause", [A, B]) in calls and _state_of(states) == {A: "PAUSED", B: "PAUSED"}
    states.stop(B, PartitionStopped("gone"))
    states.resume({A})
    assert ("resume", [A]) in calls and _state_of(states) == {A: "ONLINE", B: "ERROR"}


def test_release_unassigns_and_forgets_everything_about_the_partition() -> None:
    states, calls, _ = _states()
    states.stop(A, PartitionDeferred("later"))
    states.lost(A, (0, 5))
    states.count_copied(A, 3, 30)
    states.release([A])
    assert ("unassign", [A]) in calls
    assert states.held() == {B} and states.due_retries() == [] and states.take_copied() == {}


def test_lost_records_are_said_in_the_status_and_mark_it_changed() -> None:
    states, _, _ = _states()
    states.lost(A, (10, 15))
    assert states.changed and "[10, 15)" in (states.statuses()[A].reason or "")


def test_copied_counts_add_up_per_partition_until_taken() -> None:
    states, _, _ = _states()
    states.count_copied(A, 2, 20)
    states.count_copied(A, 1, 10)
    states.count_copied(B, 4, 40)
    assert states.take_copied() == {A: (3, 30), B: (4, 40)}
    assert states.take_copied() == {}


def test_every_assignment_is_counted_and_a_partition_assigned_anew_restarts_at_its_new_offset() -> None:
    # The native copy core forwards the assigned partitions' queues again whenever the count moves:
    # librdkafka drops a forward when a partition is unassigned.
    states, calls, _ = _states()
    assert states.assignment_changes == 1
    calls.clear()
    states.reassign(A, 12)
    assert calls == [("unassign", [A]), ("assign", [A])]
    assert states.assignment_changes == 2 and states.assigned == {A, B}
    states.release([B])
    assert states.assignment_changes == 2  # an unassign needs no forwarding
