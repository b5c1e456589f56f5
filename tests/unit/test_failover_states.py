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


def test_the_rpo_is_a_range_up_to_what_the_source_probably_took_since_the_leaders_last_look() -> None:
    rows = fsm.rpo({"t/0": 100, "t/1": 40, "t/2": 9}, {"t/0": 70, "t/1": 40}, rates={"t/0": 2.5, "t/1": 0.0}, unseen=12)
    assert [(r.partition, r.lost, r.lost_estimate) for r in rows] == [(0, 30, 60), (1, 0, 0), (2, 9, 9)]
    total = fsm.rpo_range(rows)
    assert (total.lower, total.upper, total.unrated, total.unseen_s) == (39, 69, 1, 12)
    assert total.note is not None and "unknown for 1 partition " in total.note  # t/2: no rate measured yet
    everything_rated = fsm.rpo_range(rows[:2])
    assert (everything_rated.lower, everything_rated.upper, everything_rated.note) == (30, 60, None)


def test_the_time_since_the_last_look_is_never_negative() -> None:
    assert fsm.unseen_s(1000.0, 1012.5) == 12.5
    assert fsm.unseen_s(1000.0, 990.0) == 0.0  # a clock behind the leader's
    assert fsm.unseen_s(None, 990.0) == 0.0  # never looked: nothing to add


@given(
    st.integers(0, 10**9),
    st.integers(0, 10**9),
    st.one_of(st.none(), st.floats(0, 10**6, allow_nan=False)),
    st.floats(0, 10**6, allow_nan=False),
)
def test_the_upper_estimate_is_never_below_the_lower_bound_and_equal_without_anything_unseen(
    end: int, copied: int, rate: float | None, unseen: float
) -> None:
    (row,) = fsm.rpo({"t/0": end}, {"t/0": copied}, rates=None if rate is None else {"t/0": rate}, unseen=unseen)
    assert row.lost is not None and row.lost_estimate is not None
    assert row.lost_estimate >= row.lost == max(0, end - copied)
    if not rate or unseen == 0:  # a quiet source, a fresh look, or no rate known
        assert row.lost_estimate == row.lost
    total = fsm.rpo_range([row])
    assert total.upper >= total.lower


def test_a_look_at_the_source_measures_each_partitions_rate_and_a_quiet_source_is_written_once() -> None:
    first = fsm.next_source_ends(None, {"t/0": 100, "t/1": 5}, now=1000.0)
    assert first == fsm.SourceEndsPayload(at=1000.0, ends={"t/0": 100, "t/1": 5}, rates={})  # one look: no rate yet
    second = fsm.next_source_ends(first, {"t/0": 150, "t/1": 5}, now=1010.0)
    assert second == fsm.SourceEndsPayload(at=1010.0, ends={"t/0": 150, "t/1": 5}, rates={"t/0": 5.0, "t/1": 0.0})
    quiet = fsm.next_source_ends(second, {"t/0": 150, "t/1": 5}, now=1020.0)
    assert quiet == fsm.SourceEndsPayload(at=1020.0, ends={"t/0": 150, "t/1": 5}, rates={"t/0": 0.0, "t/1": 0.0})
    assert fsm.next_source_ends(quiet, {"t/0": 150, "t/1": 5}, now=1030.0) is None  # nothing changed: no write
    partial = fsm.next_source_ends(second, {"t/0": 160}, now=1012.0)  # t/1 not sampled: kept as it was
    assert partial == fsm.SourceEndsPayload(at=1012.0, ends={"t/0": 160, "t/1": 5}, rates={"t/0": 5.0, "t/1": 0.0})
    again = fsm.next_source_ends(second, {"t/0": 3, "t/1": 5}, now=1020.0)  # t/0 created again: its rate unknown
    assert again is not None and again.rates == {"t/1": 0.0}


def test_a_node_an_older_ferry_wrote_reads_without_rates_and_gets_them_at_the_next_look() -> None:
    old = fsm.SourceEndsPayload.from_bytes(b'{"at": 1000.0, "ends": {"t/0": 100}}')
    assert old == fsm.SourceEndsPayload(at=1000.0, ends={"t/0": 100}, rates=None)
    (row,) = fsm.rpo(old.ends, {"t/0": 60}, rates=old.rates, unseen=fsm.unseen_s(old.at, 1100.0))
    assert (row.lost, row.lost_estimate, row.rate) == (40, 40, None)  # the estimate: the lower bound, with a note
    assert fsm.rpo_range([row]).note is not None
    assert old.to_bytes() == b'{"at":1000.0,"ends":{"t/0":100}}'  # written as an older Ferry reads it
    unchanged = fsm.next_source_ends(old, {"t/0": 100}, now=1010.0)
    assert unchanged is not None and unchanged.rates == {"t/0": 0.0}  # written once, to say the source is quiet
    assert fsm.SourceEndsPayload.from_bytes(unchanged.to_bytes()) == unchanged
    newer = fsm.SourceEndsPayload.from_bytes(b'{"at": 1.0, "ends": {}, "rates": {}, "added": "later"}')
    assert newer == fsm.SourceEndsPayload(at=1.0, ends={}, rates={})  # fields a newer Ferry adds are ignored
    with pytest.raises(ValueError, match="ends"):
        fsm.SourceEndsPayload.from_bytes(b'{"at": 1.0, "ends": ["t/0"]}')


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(["a/0", "a/1", "b/0"]), st.integers(0, 50)),
            st.floats(0.001, 100, allow_nan=False),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_the_kept_node_always_holds_the_latest_end_of_every_partition_seen_and_rates_of_none_below_0(
    looks: list[tuple[dict[str, int], float]],
) -> None:
    node: fsm.SourceEndsPayload | None = None
    now, latest = 1000.0, {}
    for growth, step in looks:
        now += step
        ends = {key: latest.get(key, 0) + grown for key, grown in growth.items()}  # log ends only grow
        latest.update(ends)
        written = fsm.next_source_ends(node, ends, now)
        if written is None:
            assert node is not None and node.ends == latest  # skipped only when nothing moved
        else:
            node = written
        assert node is not None and node.ends == latest
        assert all(rate >= 0 for rate in (node.rates or {}).values())
        assert set(node.rates or {}) <= set(node.ends)


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
