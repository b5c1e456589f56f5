from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.watermark import OffsetWatermarks

pytestmark = pytest.mark.unit

K = "src.dst/t/0"


def test_nothing_is_committable_before_an_ack() -> None:
    marks = OffsetWatermarks()
    assert marks.committables().get(K) is None
    marks.sent(K, 5)
    marks.sent(K, 6)
    assert marks.committables().get(K) is None
    assert marks.in_flight(K) == 2
    assert marks.committables() == {}


def test_in_order_acks_move_the_watermark_past_the_last_ack() -> None:
    marks = OffsetWatermarks()
    for offset in (5, 6, 7):
        marks.sent(K, offset)
    marks.acked(K, 5)
    assert marks.committables().get(K) == 6
    marks.acked(K, 6)
    marks.acked(K, 7)
    assert marks.committables().get(K) == 8
    assert marks.in_flight(K) == 0


def test_an_out_of_order_ack_does_not_pass_an_unacked_offset() -> None:
    marks = OffsetWatermarks()
    for offset in (10, 11, 12):
        marks.sent(K, offset)
    marks.acked(K, 12)
    assert marks.committables().get(K) == 10
    marks.acked(K, 11)
    assert marks.committables().get(K) == 10
    marks.acked(K, 10)
    assert marks.committables().get(K) == 13


def test_gaps_in_offsets_are_fine() -> None:
    marks = OffsetWatermarks()
    for offset in (3, 7, 20):
        marks.sent(K, offset)
    marks.acked(K, 3)
    assert marks.committables().get(K) == 7
    marks.acked(K, 20)
    marks.acked(K, 7)
    assert marks.committables().get(K) == 21


def test_unknown_and_repeated_acks_are_ignored() -> None:
    marks = OffsetWatermarks()
    marks.acked("other", 1)
    assert marks.committables() == {} and marks.in_flight() == 0
    marks.sent(K, 1)
    marks.sent(K, 4)
    marks.acked(K, 2)
    marks.acked(K, 1)
    marks.acked(K, 1)
    assert marks.committables().get(K) == 4
    assert marks.in_flight(K) == 1


def test_offsets_must_increase() -> None:
    marks = OffsetWatermarks()
    marks.sent(K, 5)
    with pytest.raises(ValueError, match="must increase"):
        marks.sent(K, 5)


def test_a_failed_offset_holds_the_watermark_until_forget() -> None:
    marks = OffsetWatermarks()
    for offset in range(5):
        marks.sent(K, offset)
    marks.acked(K, 0)
    marks.failed(K, 2, "MSG_SIZE_TOO_LARGE")
    for offset in (1, 3, 4):
        marks.acked(K, offset)
    assert marks.committables().get(K) == 2
    assert marks.in_flight(K) == 0
    marks.sent(K, 5)
    marks.acked(K, 5)
    assert marks.committables().get(K) == 2
    marks.forget(K)
    assert marks.committables().get(K) is None
    marks.sent(K, 6)  # forgotten: the failure no longer holds anything back
    marks.acked(K, 6)
    assert marks.committables() == {K: 7}


def test_the_lowest_failure_is_kept() -> None:
    marks = OffsetWatermarks()
    for offset in range(4):
        marks.sent(K, offset)
    marks.failed(K, 3, "late")
    marks.failed(K, 1, "early")
    marks.acked(K, 0)
    assert marks.committables().get(K) == 1
    marks.acked(K, 2)
    assert marks.committables().get(K) == 1  # the lower failure, not the later one


def test_a_failure_before_any_ack_commits_nothing() -> None:
    marks = OffsetWatermarks()
    marks.sent(K, 0)
    marks.failed(K, 0, "boom")
    assert marks.committables().get(K) is None
    marks.sent(K, 1)
    marks.acked(K, 1)
    assert marks.committables().get(K) == 0  # held at the failure


def test_keys_are_independent() -> None:
    marks = OffsetWatermarks()
    marks.sent("a", 1)
    marks.sent("b", 1)
    marks.sent("b", 2)
    marks.acked("b", 1)
    assert marks.committables() == {"b": 2}
    assert marks.in_flight() == 2
    assert marks.in_flight("a") == 1
    marks.forget("b")
    assert marks.in_flight() == 1


@st.composite
def sends_and_acks(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    gaps = draw(st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=40))
    start = draw(st.integers(min_value=0, max_value=1000))
    offsets = []
    for gap in gaps:
        start += gap
        offsets.append(start)
    acked = draw(st.lists(st.sampled_from(offsets), unique=True))
    return offsets, draw(st.permutations(acked))


@given(sends_and_acks(), st.data())
def test_the_watermark_never_passes_an_unacked_offset_and_never_decreases(
    case: tuple[list[int], list[int]], data: st.DataObject
) -> None:
    offsets, acks = case
    marks = OffsetWatermarks()
    sent: list[int] = []
    done: set[int] = set()
    previous: int | None = None
    # interleave: each ack comes after its offset was sent; sends go in order
    pending_sends = list(offsets)
    pending_acks = list(acks)
    while pending_sends or pending_acks:
        ackable = [a for a in pending_acks if a in sent]
        if pending_sends and (not ackable or data.draw(st.booleans())):
            offset = pending_sends.pop(0)
            marks.sent("k", offset)
            sent.append(offset)
        else:
            offset = ackable[0]
            pending_acks.remove(offset)
            marks.acked("k", offset)
            done.add(offset)
        unacked = [o for o in sent if o not in done]
        committable = marks.committables().get("k")
        if not done:
            assert committable is None
        else:
            expected = min(unacked) if unacked else max(done) + 1
            assert committable == expected
            assert previous is None or committable >= previous
            previous = committable
        assert marks.in_flight("k") == len(unacked)


@given(st.lists(st.integers(1, 5), min_size=1, max_size=40), st.data())
def test_runs_sent_at_once_track_as_sent_one_by_one(gaps: list[int], data: st.DataObject) -> None:
    # The copier hands a partition's offsets over per run (sent_run) and applies its delivery
    # reports per run (acked_oldest_run); failures may settle offsets out of order in between.
    offsets = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    one, runs = OffsetWatermarks(), OffsetWatermarks()
    in_flight: list[int] = []
    position = 0
    while position < len(offsets):
        size = data.draw(st.integers(1, len(offsets) - position))
        chunk = offsets[position : position + size]
        position += size
        for offset in chunk:
            one.sent("k", offset)
        if chunk[-1] - chunk[0] == len(chunk) - 1 and data.draw(st.booleans()):  # consecutive: as one span
            runs.sent_span("k", chunk[0], len(chunk))
        else:
            runs.sent_run("k", chunk)
        in_flight += chunk
        if data.draw(st.booleans()):  # a failure settles an offset out of order
            failed = data.draw(st.sampled_from(in_flight))
            one.failed("k", failed, "x")
            runs.failed("k", failed, "x")
        acks = data.draw(st.integers(0, one.in_flight("k")))
        how = data.draw(st.sampled_from(["run", "span", "one by one"]))
        if how == "span":  # consecutive and nothing settled out of order: the first; else nothing changes
            before = (runs.committables(), runs.in_flight("k"))
            first = runs.acked_oldest_span("k", acks)
            expected = [one.acked_oldest("k") for _ in range(acks)]
            if first is None:
                assert (runs.committables(), runs.in_flight("k")) == before
                acked = runs.acked_oldest_run("k", acks)
                assert acked == expected
            else:
                acked = list(range(first, first + acks))
                assert acked == expected
        elif how == "run":  # a run of delivery reports at once, or one by one
            acked = runs.acked_oldest_run("k", acks)
            assert [one.acked_oldest("k") for _ in range(acks)] == acked
        else:
            acked = [runs.acked_oldest("k") for _ in range(acks)]
            assert [one.acked_oldest("k") for _ in range(acks)] == acked
        in_flight = [o for o in in_flight if o not in acked]
        assert one.committables() == runs.committables() and one.in_flight("k") == runs.in_flight("k")
    runs.sent_run("k", [])  # nothing: no change
    assert one.committables() == runs.committables()


def test_a_run_of_consecutive_offsets_is_acknowledged_as_one_span() -> None:
    marks = OffsetWatermarks()
    marks.sent_span("k", 10, 1000)
    marks.sent_run("k", [1010, 1011])  # continues the span
    assert marks.acked_oldest_span("k", 1002) == 10
    assert marks.committables() == {"k": 1012} and marks.in_flight("k") == 0
    marks.sent_run("k", [1013, 1015])  # a gap: two spans
    assert marks.acked_oldest_span("k", 2) is None
    marks.failed("k", 1015, "x")  # settled out of order
    marks.sent_span("k", 1016, 2)
    assert marks.acked_oldest_span("k", 1) is None
    assert marks.acked_oldest_run("k", 1) == [1013]
    assert marks.acked_oldest_span("k", 2) == 1016
    assert marks.committables() == {"k": 1015}


def test_a_run_must_follow_what_was_sent() -> None:
    marks = OffsetWatermarks()
    marks.sent_run("k", [3, 4])
    with pytest.raises(ValueError):
        marks.acked_oldest_run("k", 3)  # more reports than offsets in flight
    with pytest.raises(ValueError):
        marks.sent_run("k", [4, 5])
    with pytest.raises(ValueError):
        marks.sent_run("k", [9, 7])
    with pytest.raises(ValueError):
        marks.sent_span("k", 4, 2)


def test_a_key_started_past_what_was_committed_is_committable_at_its_start_at_once() -> None:
    marks: OffsetWatermarks[str] = OffsetWatermarks()
    marks.sent("p", 3)
    marks.start_at("p", 10)  # what was known before is forgotten
    assert marks.committables() == {"p": 10}
    marks.sent("p", 10)
    assert marks.committables() == {"p": 10}
    marks.acked("p", 10)
    assert marks.committables() == {"p": 11}
    marks.start_at("q", 0)  # from the log start: nothing to commit yet
    assert "q" not in marks.committables()
