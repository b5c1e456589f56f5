"""The failover state machine and the RPO arithmetic (controller/failover/states.py)."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.offset_map import Segment
from ferry.controller.failover import states as fsm
from ferry.controller.failover.workflow import translate_back


def test_a_failover_runs_planned_or_unplanned_and_a_second_one_is_refused() -> None:
    for path in (
        [fsm.ACTIVE, fsm.REQUESTED, fsm.DRAINING, fsm.SYNCING, fsm.FAILED_OVER],
        [fsm.ACTIVE, fsm.REQUESTED, fsm.SYNCING, fsm.FAILED_OVER, fsm.FAILING_BACK, fsm.ACTIVE],
    ):
        for current, wanted in itertools.pairwise(path):
            fsm.check_transition(current, wanted)
    with pytest.raises(fsm.TransitionRefused):
        fsm.check_transition(fsm.FAILED_OVER, fsm.REQUESTED)
    with pytest.raises(fsm.TransitionRefused):
        fsm.check_transition(fsm.DRAINING, fsm.FAILED_OVER)  # never without the group sync


def test_a_route_stops_copying_from_the_group_sync_on() -> None:
    assert not fsm.is_stopped(fsm.DRAINING)
    assert all(fsm.is_stopped(s) for s in (fsm.SYNCING, fsm.FAILED_OVER, fsm.FAILING_BACK))


def test_the_rpo_counts_the_records_seen_at_the_source_and_never_copied() -> None:
    rows = fsm.rpo({"t/0": 10, "t/1": 5}, {"t/0": 7, "t/1": 5}, {"t/0": 123})
    assert [(r.topic, r.partition, r.lost, r.last_copy_ms) for r in rows] == [("t", 0, 3, 123), ("t", 1, 0, None)]
    assert fsm.rpo({}, {"t/0": 4})[0].lost is None  # never seen at the source: unknown, not 0


@given(
    st.dictionaries(st.sampled_from(["a/0", "a/1", "b/0"]), st.integers(0, 100)),
    st.dictionaries(st.sampled_from(["a/0", "a/1", "b/0"]), st.integers(0, 100)),
)
def test_behind_lists_exactly_the_partitions_that_lag(ends: dict[str, int], committed: dict[str, int]) -> None:
    lagging = fsm.behind(ends, committed)
    assert all(n > 0 for n in lagging.values())
    assert {k for k in ends if ends[k] > committed.get(k, 0)} == set(lagging)


def test_a_position_goes_back_through_the_reverse_map_else_the_forward_map_backwards() -> None:
    forward = [Segment(0, 0, 10)]  # src 0..9 -> dst 0..9
    backward = [Segment(10, 14, 5)]  # dst 10..14 (written on dst) -> src 14..18 (after 4 never-copied records)
    assert translate_back(forward, backward, 12) == 16
    assert translate_back(forward, backward, 4) == 4
    assert translate_back(forward, [], 50) is None


def test_a_position_goes_back_through_a_forward_map_with_transaction_markers() -> None:
    forward = [Segment(0, 0, 6, (3, 7))]  # src 0..5 -> dst 0, 1, 2, 4, 5, 6, 8; markers at 3 and 7
    assert [translate_back(forward, [], d) for d in range(10)] == [0, 1, 2, 3, 3, 4, 5, 6, 6, None]
