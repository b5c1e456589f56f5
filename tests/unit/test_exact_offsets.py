"""The pure core of exact offsets: the resume rule, the run-length offset map, translation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.core.offset_map import (
    MAX_MARKERS_PER_SEGMENT,
    OffsetMap,
    Segment,
    copy_end,
    merge,
    parse_segment,
    segment_key,
    segment_value,
    timestamp_lookup_ms,
    translate,
)
from ferry.common.core.resume import lookback_done, lookback_windows, resume_plan

# -- the resume rule -----------------------------------------------------------------------------


@given(st.integers(0, 200), st.integers(0, 60), st.sets(st.integers(0, 400)), st.integers(0, 400))
def test_resume_after_a_crash_copies_each_offset_once(committed: int, lost_tail: int, gaps: set[int], end: int) -> None:
    """The destination holds everything below the committed offset, then any subset above it
    (a producer timeout may leave gaps); the rule copies exactly the missing ones."""
    end = max(end, committed)
    present = set(range(committed)) | {o for o in range(committed, end) if o not in gaps}
    present -= set(range(end - lost_tail, end)) - set(range(committed))
    plan = resume_plan(committed, present)
    assert plan.start == committed
    copied = [o for o in range(plan.start, end) if o not in plan.skip]
    assert sorted(present | set(copied)) == list(range(end))  # nothing lost
    assert not present & set(copied)  # nothing twice


def test_resume_without_a_committed_offset() -> None:
    assert resume_plan(None, []).start is None
    assert resume_plan(None, [3, 4, 9]).start == 10
    plan = resume_plan(5, [1, 5, 6, 8])
    assert (plan.start, plan.skip, plan.gaps) == (5, frozenset({5, 6, 8}), 1)


@dataclass
class _Destination:
    """A destination partition as a ``read_committed`` reader sees it (per destination offset, the source
    offset its copy's header says), and the route's committed source offset."""

    log: list[int]
    committed: int | None = None


def _resume(destination: _Destination) -> tuple[int, set[int]]:
    """Where the next owner starts and what it skips: the worker's look-back (worker/position/lookback.py)
    over the model, newest window first, with the pure rule's stop and plan."""
    present: list[int] = []
    oldest: int | None = None
    read = 0
    for start, end in lookback_windows(0, len(destination.log), 3, 12):
        for source in destination.log[start:end]:
            read += 1
            present.append(source)
            oldest = source if oldest is None else min(oldest, source)
        if lookback_done(destination.committed, oldest, start <= 0, read, 10**6):
            break
    plan = resume_plan(destination.committed, present)
    return (plan.start if plan.start is not None else 0), set(plan.skip)


@settings(max_examples=2000)  # 300 missed a commit between a gap's refill and its skips; 2,000 find it (3 of 3 seeds)
@given(st.data())
def test_owners_of_either_guarantee_in_any_order_copy_each_offset_once(data: st.DataObject) -> None:
    """Owners take the partition one after another, each at least once or exactly once, each copying
    some batches and then dying. An at-least-once owner's copies are visible at once (a failed delivery
    stops it, and the records after it may have landed: a gap); an exactly-once owner's become visible
    when their transaction commits. Either commits its source offset after some batches, an exactly-once
    one only after the transaction (the source is another cluster), so a death between leaves copies above
    the committed offset; neither commits a source offset until it may commit past the copies it found
    to skip. A last owner copies to the end: every source offset is on the destination once."""
    total = data.draw(st.integers(1, 40), label="source records")
    destination = _Destination([])
    for _ in range(data.draw(st.integers(0, 5), label="owners before the last")):
        exactly_once = data.draw(st.booleans(), label="exactly once")
        position, skip = _resume(destination)
        highest_skip = max(skip, default=-1)
        pending: list[int] = []  # an open transaction's copies
        failed: int | None = None  # an at-least-once copy that failed: the commit never passes it
        for _ in range(data.draw(st.integers(0, 4), label="batches")):
            for _ in range(data.draw(st.integers(1, 6), label="batch size")):
                if position >= total:
                    break
                if position in skip:
                    skip.discard(position)
                elif exactly_once:
                    pending.append(position)
                elif destination.committed is None or data.draw(st.booleans(), label="delivered"):
                    # (Before the route's first commit the rule starts one past the newest copy: a gap there
                    # is not filled. Failures are drawn after it.)
                    destination.log.append(position)
                elif failed is None:
                    failed = position  # librdkafka may still deliver the records after it: a gap
                position += 1
            if data.draw(st.booleans(), label="commits"):
                destination.log += pending  # the transaction: the copies and their map segments
                pending = []
                committable = position if failed is None else failed
                if committable > highest_skip and data.draw(st.booleans(), label="source commit arrives"):
                    destination.committed = committable
            if failed is not None:
                break  # the failure stopped the partition
        # The owner dies: an open transaction is aborted (its copies never visible); nothing else is undone.
    position, skip = _resume(destination)
    while position < total:
        if position not in skip:
            destination.log.append(position)
        position += 1
    assert sorted(destination.log) == list(range(total))


def test_lookback_bounds() -> None:
    assert not lookback_done(10, None, False, 5, 100)
    assert not lookback_done(10, 10, False, 5, 100)
    assert lookback_done(10, 9, False, 5, 100)
    # Without a committed offset: on to the log start or the bound (the records seed the map).
    assert not lookback_done(None, 50, False, 1, 100)
    assert lookback_done(None, 50, True, 1, 100)
    assert lookback_done(None, 50, False, 100, 100)
    assert lookback_done(10, None, True, 0, 100)
    assert lookback_done(10, None, False, 100, 100)
    assert lookback_windows(3, 10, 4) == [(6, 10), (3, 6)]
    assert lookback_windows(0, 100, 10, 20) == [(90, 100), (70, 90), (50, 70), (30, 50), (10, 30), (0, 10)]
    assert lookback_windows(0, 100, 10) == [(90, 100), (70, 90), (30, 70), (0, 30)]
    assert lookback_windows(5, 5, 4) == []


# -- the offset map ------------------------------------------------------------------------------


def test_a_one_to_one_copy_is_one_segment() -> None:
    offsets = OffsetMap()
    for i in range(100_000):
        offsets.record(1000 + i, 7 + i)
    assert offsets.segments() == [Segment(1000, 7, 100_000)]
    assert offsets.take_changed() == [Segment(1000, 7, 100_000)]
    assert offsets.take_changed() == []
    assert offsets.translate(1000) == 7
    assert offsets.translate(51_000) == 50_007
    assert offsets.translate(101_000) == 100_007  # caught up: the next record to come
    assert offsets.translate(101_001) is None  # the group is ahead of the mirror
    assert offsets.translate(999) is None  # copied before the map: timestamp method


copy_events = st.lists(
    st.tuples(st.sampled_from(["copy", "source_gap", "other_writer", "rewind", "restart"]), st.integers(1, 5)),
    max_size=60,
)


def _replay(events: list[tuple[str, int]]) -> tuple[list[int | None], list[Segment], int]:
    """The destination log that ``events`` build (destination offset -> source offset; None: another
    writer's record), the map's segments as every owner wrote them, merged, and the next source offset."""
    log: list[int | None] = []
    live = OffsetMap()
    persisted: list[Segment] = []
    source = 0
    for kind, n in events:
        if kind == "copy":
            for _ in range(n):
                live.record(source, len(log))
                log.append(source)
                source += 1
        elif kind == "source_gap":
            source += n
        elif kind == "other_writer":
            log.extend([None] * n)
        elif kind == "rewind":
            source = max(0, source - n)
        else:  # a new owner: the persisted segments, and a fresh map from here on
            persisted += live.segments()
            live = OffsetMap()
    return log, merge(persisted + live.segments()), source


@given(copy_events)
def test_translation_is_exact_against_a_model(events: list[tuple[str, int]]) -> None:
    """A destination log built from copies, other writers' records, source gaps, rewinds and new
    owners: a group committed at c continues after the newest copy of c - 1 (or at c's), and the
    map stays compact."""
    log, segments, source = _replay(events)
    runs = sum(1 for d, s in enumerate(log) if s is not None and (d == 0 or log[d - 1] is None or log[d - 1] != s - 1))
    assert len(segments) == runs
    for committed in range(source + 3):
        newest_before = max((d for d, s in enumerate(log) if s == committed - 1), default=None)
        newest_at = max((d for d, s in enumerate(log) if s == committed), default=None)
        got = translate(segments, committed)
        if newest_before is not None:
            assert got == newest_before + 1
        elif newest_at is not None:
            assert got == newest_at
        elif got is not None:
            # in a gap: right after a copy of a record below c; no source offset between it and c was copied
            assert got > 0 and log[got - 1] is not None and log[got - 1] < committed
            assert not any(s is not None and log[got - 1] < s < committed for s in log)


@given(copy_events, st.integers(1, 20))
def test_a_group_ahead_of_the_mirror_goes_on_after_the_newest_copy_of_the_head(
    events: list[tuple[str, int]], ahead_by: int
) -> None:
    """A group past everything copied is checkpointed where a group exactly at the mirror's head would
    be: right after the newest copy of the highest source offset copied. It skips no copy of its route
    made after that, and re-reads no more than the copies made after it."""
    log, segments, _ = _replay(events)
    if not segments:
        assert copy_end(segments) is None
        return
    head = max(s for s in log if s is not None)
    end = copy_end(segments)
    assert end == translate(segments, head + 1)
    assert end == max(d for d, s in enumerate(log) if s == head) + 1
    assert translate(segments, head + 1 + ahead_by) is None  # no exact answer: hence the copy's end


def _record_chunk(offsets: OffsetMap, chunk: list[tuple[int, int]], data: st.DataObject) -> None:
    """Records ``chunk`` (source, destination pairs) as the copier does: a run at once, or as one span when
    both sides are consecutive (the copy core's common case)."""
    (source, destination), count = chunk[0], len(chunk)
    consecutive = chunk == [(source + i, destination + i) for i in range(count)]
    if consecutive and data.draw(st.booleans()):
        offsets.record_span(source, destination, count)
    else:
        offsets.record_run([s for s, _ in chunk], [d for _, d in chunk])


@given(copy_events, st.data())
def test_runs_recorded_at_once_make_the_map_recorded_one_by_one(
    events: list[tuple[str, int]], data: st.DataObject
) -> None:
    """The copier applies a partition's delivery reports per run (record_run): same segments,
    same changed segments, as record() for each, with take_changed() in between at any point."""
    pairs: list[tuple[int, int]] = []
    source = destination = 0
    for kind, n in events:
        if kind in ("copy", "restart"):
            pairs += [(source + i, destination + i) for i in range(n)]
            source, destination = source + n, destination + n
        elif kind == "source_gap":
            source += n
        elif kind == "other_writer":
            destination += n
        else:
            source = max(0, source - n)
    one, runs = OffsetMap(), OffsetMap()
    position = 0
    while position < len(pairs):
        size = data.draw(st.integers(1, len(pairs) - position))
        chunk = pairs[position : position + size]
        position += size
        for s, d in chunk:
            one.record(s, d)
        _record_chunk(runs, chunk, data)
        if data.draw(st.booleans()):
            assert one.take_changed() == runs.take_changed()
        assert one.segments() == runs.segments()
    assert one.take_changed() == runs.take_changed()


@given(st.lists(st.integers(1, 20), min_size=1, max_size=20), st.integers(0, 300))
def test_trim_follows_retention(runs: list[int], log_start: int) -> None:
    offsets = OffsetMap()
    dst = 0
    src = 0
    for n in runs:
        for _ in range(n):
            offsets.record(src, dst)
            src += 1
            dst += 1
        dst += 1  # another writer's record between runs
    before = offsets.segments()
    dropped = offsets.trim(log_start)
    assert dropped + offsets.segments() == before
    assert all(s.dst_end <= log_start for s in dropped)
    assert all(s.dst_end > log_start for s in offsets.segments())


def test_merge_joins_extents_of_one_segment_and_adjacent_runs() -> None:
    # compaction may leave an older, shorter extent next to the newest one
    assert merge([Segment(10, 0, 5), Segment(10, 0, 8), Segment(18, 8, 2)]) == [Segment(10, 0, 10)]
    assert merge([Segment(10, 0, 5), Segment(16, 5, 2)]) == [Segment(10, 0, 5), Segment(16, 5, 2)]


def test_storage_round_trip() -> None:
    key = segment_key("a.b", "orders", 3, 42)
    assert parse_segment(key, segment_value(Segment(7, 42, 9))) == (("a.b", "orders", 3), 42, Segment(7, 42, 9))
    assert parse_segment(key, None) == (("a.b", "orders", 3), 42, None)


def test_timestamp_method_subtracts_the_margin() -> None:
    assert timestamp_lookup_ms(1_000_000, 60) == 940_000
    assert timestamp_lookup_ms(1_000, 60) == 0


def test_group_sync_follows_mirrormaker_2s_rule() -> None:
    from ferry.controller.groups.checkpoints import should_sync

    assert should_sync(10, None, group_active=False)
    assert should_sync(10, 5, group_active=False)
    assert not should_sync(10, 10, group_active=False)  # only forward: never rewinds a group
    assert not should_sync(10, 12, group_active=False)
    assert not should_sync(10, None, group_active=True)  # never under an active group
    assert not should_sync(None, None, group_active=False)  # pending: nothing to commit


def test_the_map_reader_finds_segments_retention_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    from ferry.common.kafka import offset_map_reader

    monkeypatch.setattr(offset_map_reader.kafka_clients, "consumer", lambda *args, **kwargs: object())
    reader = offset_map_reader.OffsetMapReader(cluster={}, client_id="test")
    key = ("src.dst", "orders", 0)
    reader._segments[key] = {0: Segment(0, 0, 10), 10: Segment(20, 10, 5), 15: Segment(30, 15, 100)}
    reader._segments[("other.dst", "orders", 0)] = {0: Segment(0, 0, 10)}
    assert sorted(reader.below("src.dst", lambda topic, partition: 15)) == [(key, 0), (key, 10)]
    reader.forget(key, 0)
    assert reader.segments(*key) == [Segment(20, 10, 5), Segment(30, 15, 100)]


def test_a_run_whose_endpoints_look_contiguous_but_whose_middle_is_not_is_recorded_pair_by_pair() -> None:
    """A source gap and a rewind inside one run of reports: sources 4, 9, 6 landed at 4, 5, 6."""
    one, runs = OffsetMap(), OffsetMap()
    for s in range(4):
        one.record(s, s)
    runs.record_run(list(range(4)), list(range(4)))
    for s, d in ((4, 4), (9, 5), (6, 6)):
        one.record(s, d)
    runs.record_run([4, 9, 6], [4, 5, 6])
    assert runs.segments() == one.segments()
    assert runs.segments()[0].length == 5  # 0..4 -> 0..4; 9 -> 5 and 6 -> 6 are runs of their own


# -- the offset map across the route's own transaction markers ------------------------------------

FOREIGN, MARKER = -1, -2  # destination log entries that are not copies: another writer's record, a marker

transaction_events = st.lists(
    st.tuples(
        st.sampled_from(
            ["copy", "copy", "commit", "commit", "source_gap", "other_writer", "rewind", "restart", "transactions"]
        ),
        st.integers(1, 5),
    ),
    max_size=60,
)


@dataclass
class _Replayed:
    """A destination log (destination offset -> source offset copied there, or FOREIGN, or MARKER), the
    map's segments as every owner persisted them, merged, and counts for the map's size bound."""

    log: list[int]
    segments: list[Segment]
    stored: list[Segment]  # every extent handed out by take_changed, through segment_value/parse_segment
    next_source: int
    transactions: int  # markers written
    restarts: int


def _replay_transactions(events: list[tuple[str, int]], data: st.DataObject) -> _Replayed:
    """Copies in transactions: each commit writes a marker into the partition when the transaction copied
    into it, then tells the map (end_transaction, also when it wrote none); other writers' records land
    between at any time; a new owner starts a fresh map (its predecessor's last transaction committed
    without telling the old map)."""
    log: list[int] = []
    live = OffsetMap()
    persisted: list[Segment] = []
    stored: list[Segment] = []
    source = transactions = restarts = 0
    copied_in_transaction = False

    def persist() -> None:
        changed = live.take_changed()
        persisted.extend(changed)
        for segment in changed:
            key = segment_key("src.dst", "t", 0, segment.dst_start)
            read = parse_segment(key, segment_value(segment))[2]
            assert read is not None
            stored.append(read)

    def copy(n: int) -> None:
        nonlocal source, copied_in_transaction
        pairs = [(source + i, len(log) + i) for i in range(n)]
        how = data.draw(st.sampled_from(["run", "span", "one by one"]))
        if how == "run":
            live.record_run([s for s, _ in pairs], [d for _, d in pairs])
        elif how == "span" and pairs:
            live.record_span(pairs[0][0], pairs[0][1], len(pairs))
        else:
            for s, d in pairs:
                live.record(s, d)
        log.extend(s for s, _ in pairs)
        source += n
        copied_in_transaction = True

    def commit() -> None:
        nonlocal transactions, copied_in_transaction
        if copied_in_transaction:
            log.append(MARKER)
            transactions += 1
            copied_in_transaction = False

    for kind, n in events:
        if kind == "copy":
            copy(n)
        elif kind == "commit":
            commit()
            live.end_transaction()
        elif kind == "transactions":  # many short ones: past the markers one segment takes
            for _ in range(n * 30):
                copy(data.draw(st.integers(1, 2)))
                commit()
                live.end_transaction()
        elif kind == "source_gap":
            source += n
        elif kind == "other_writer":
            log.extend([FOREIGN] * n)
        elif kind == "rewind":
            source = max(0, source - n)
        else:  # a new owner
            commit()
            persist()
            live = OffsetMap()
            restarts += 1
        if data.draw(st.integers(0, 3)) == 0:
            persist()  # a commit of the worker's: the changed segments written
    persist()
    return _Replayed(log, merge(persisted), stored, source, transactions, restarts)


def _jumps(log: list[int]) -> int:
    """Copies that do not continue the copy of the source offset before them (directly or past one marker)."""
    jumps = 0
    for d, s in enumerate(log):
        if s < 0:
            continue
        before = log[d - 1] if d else FOREIGN
        if before == MARKER and d >= 2:
            before = log[d - 2]
        if before != s - 1 or s == 0:
            jumps += 1
    return jumps


@settings(deadline=None)  # a case copies up to a few thousand records
@given(transaction_events, st.data())
def test_translation_is_exact_across_transaction_markers(events: list[tuple[str, int]], data: st.DataObject) -> None:
    """Copies written in transactions, each leaving a marker in the destination log, between other
    writers' records, source gaps, rewinds and new owners: a group committed at c continues right after
    the newest copy of c - 1 (that offset, also when it is a marker), or at c's newest copy; and the map
    grows by one segment per MAX_MARKERS_PER_SEGMENT transactions, not one per transaction."""
    replayed = _replay_transactions(events, data)
    log, segments = replayed.log, replayed.segments
    assert len(segments) <= math.ceil(replayed.transactions / MAX_MARKERS_PER_SEGMENT) + _jumps(log) + replayed.restarts
    for segment in segments:  # markers sit where the log has them, between the segment's copies
        assert all(log[m] == MARKER for m in segment.markers)
        assert len(segment.markers) <= MAX_MARKERS_PER_SEGMENT
        copies = [d for d in range(segment.dst_start, segment.dst_end) if d not in segment.markers]
        assert [log[d] for d in copies] == list(range(segment.src_start, segment.src_end))
    newest = {s: d for d, s in enumerate(log) if s >= 0}  # source offset -> its newest copy
    for committed in range(replayed.next_source + 3):
        got = translate(segments, committed)
        if committed - 1 in newest:
            assert got == newest[committed - 1] + 1
        elif committed in newest:
            assert got == newest[committed]
        elif got is not None:
            # in a gap: right after a copy of a record below c; no source offset between it and c was copied
            assert got > 0 and 0 <= log[got - 1] < committed
            assert not any(log[got - 1] < s < committed for s in newest)
    if newest:
        head = max(newest)
        assert copy_end(segments) == translate(segments, head + 1) == newest[head] + 1


@settings(deadline=None)  # a case copies up to a few thousand records
@given(transaction_events, st.data())
def test_the_stored_map_translates_as_the_live_one(events: list[tuple[str, int]], data: st.DataObject) -> None:
    """Every extent of every segment, written to the map topic and read back (compaction may keep older
    extents beside the newest), merged: the same segments, the same translations, both ways."""
    replayed = _replay_transactions(events, data)
    assert merge(replayed.stored) == replayed.segments
    assert merge(reversed(replayed.stored)) == replayed.segments
    for committed in range(replayed.next_source + 3):
        assert translate(merge(replayed.stored), committed) == translate(replayed.segments, committed)


def test_a_copy_right_after_a_transaction_goes_on_past_its_marker() -> None:
    offsets = OffsetMap()
    offsets.record_run([10, 11], [0, 1])
    offsets.end_transaction()
    offsets.end_transaction()  # a transaction that did not touch the partition: no second marker
    offsets.record(12, 3)  # the marker took 2
    offsets.record_run([13, 14], [4, 5])
    offsets.end_transaction()
    offsets.record_run([15, 16], [7, 8])
    assert offsets.segments() == [Segment(10, 0, 7, (2, 6))]
    assert offsets.take_changed() == [Segment(10, 0, 7, (2, 6))]
    assert [offsets.translate(c) for c in range(10, 18)] == [0, 1, 2, 4, 5, 6, 8, 9]  # 2 and 6: the markers
    assert copy_end(offsets.segments()) == 9


def test_a_gap_that_is_not_only_the_marker_opens_a_new_segment() -> None:
    offsets = OffsetMap()
    offsets.record_run([0, 1], [0, 1])
    offsets.end_transaction()
    offsets.record(2, 4)  # another writer's record and the marker between
    offsets.end_transaction()
    offsets.record(4, 6)  # a source gap
    offsets.end_transaction()
    offsets.record(5, 8)
    offsets.record(7, 9)  # a source gap without a transaction's end
    offsets.record(8, 11)  # no end_transaction: not known to be a marker
    assert offsets.segments() == [
        Segment(0, 0, 2),
        Segment(2, 4, 1),
        Segment(4, 6, 2, (7,)),
        Segment(7, 9, 1),
        Segment(8, 11, 1),
    ]


def test_a_segment_takes_at_most_its_share_of_markers() -> None:
    offsets = OffsetMap()
    destination = 0
    for transaction in range(1000):
        offsets.record_run([2 * transaction, 2 * transaction + 1], [destination, destination + 1])
        offsets.end_transaction()
        destination += 3
    segments = offsets.segments()
    # each segment: 64 markers between the copies of 65 transactions
    assert len(segments) == math.ceil(1000 / (MAX_MARKERS_PER_SEGMENT + 1))
    assert [len(s.markers) for s in segments] == [MAX_MARKERS_PER_SEGMENT] * (len(segments) - 1) + [1000 % 65 - 1]
    copy_of = [s // 2 * 3 + s % 2 for s in range(2000)]  # source offset -> destination offset
    assert [translate(segments, c) for c in range(1, 2001)] == [d + 1 for d in copy_of]


def test_markers_survive_trim_and_a_reload() -> None:
    offsets = OffsetMap()
    offsets.record_run([0, 1], [0, 1])
    offsets.record_run([5, 6], [3, 4])
    offsets.end_transaction()
    offsets.record_run([7, 8], [6, 7])
    assert offsets.trim(2) == [Segment(0, 0, 2)]
    assert offsets.segments() == [Segment(5, 3, 4, (5,))]
    offsets.end_transaction()  # still pending after a trim that kept the newest segment
    offsets.record(9, 9)
    assert offsets.segments() == [Segment(5, 3, 5, (5, 8))]
    reloaded = OffsetMap(offsets.segments())
    reloaded.record(10, 11)  # a new owner does not know of a marker at 10
    assert reloaded.segments() == [Segment(5, 3, 5, (5, 8)), Segment(10, 11, 1)]


def test_a_segment_with_markers_places_its_copies_past_them() -> None:
    segment = Segment(100, 10, 5, (12, 15))  # copies at 10, 11, 13, 14, 16
    assert [segment.destination_of(s) for s in range(99, 106)] == [None, 10, 11, 13, 14, 16, None]
    assert segment.runs() == [Segment(100, 10, 2), Segment(102, 13, 2), Segment(104, 16, 1)]
    assert segment.from_destination(12) == segment.from_destination(13) == Segment(102, 13, 3, (15,))
    assert segment.from_destination(17) is None
    assert segment.from_destination(10) == segment


def test_merge_joins_extents_of_a_segment_with_markers() -> None:
    newest = Segment(10, 0, 6, (2, 5))
    assert merge([Segment(10, 0, 2), Segment(10, 0, 4, (2,)), newest]) == [newest]
    assert merge([newest, Segment(13, 4, 4, (5,))]) == [Segment(10, 0, 7, (2, 5))]  # an overlapping extent
    assert merge([newest, Segment(16, 8, 1)]) == [Segment(10, 0, 7, (2, 5))]
    assert merge([newest, Segment(16, 9, 1)]) == [newest, Segment(16, 9, 1)]  # a marker between: in neither


def test_storage_of_segments_with_markers() -> None:
    key = segment_key("a.b", "orders", 3, 42)
    # without markers: the value every release reads
    assert segment_value(Segment(7, 42, 9)) == b"1|7|9"
    assert parse_segment(key, b"1|7|9") == (("a.b", "orders", 3), 42, Segment(7, 42, 9))
    # with: relative to dst_start
    assert segment_value(Segment(7, 42, 9, (44, 50))) == b"2|7|9|2,8"
    assert parse_segment(key, b"2|7|9|2,8") == (("a.b", "orders", 3), 42, Segment(7, 42, 9, (44, 50)))
    for unreadable in (b"3|7|9", b"2|7|9", b"1|7|9|2", b"2|7|9|0", b"2|7|9|10", b"2|7|9|2,3", b"2|7|9|x"):
        with pytest.raises(ValueError):
            parse_segment(key, unreadable)


@given(transaction_events, st.data())
def test_runs_recorded_at_once_make_the_map_recorded_one_by_one_across_markers(
    events: list[tuple[str, int]], data: st.DataObject
) -> None:
    """record_run over reports that go on past a marker, or not: the same segments and changed segments
    as record() for each."""
    steps: list[tuple[int, int] | None] = []  # a copy's (source, destination), or None: a transaction's end
    source = destination = 0
    for kind, n in events:
        if kind in ("copy", "transactions"):
            steps += [(source + i, destination + i) for i in range(n)]
            source, destination = source + n, destination + n
        elif kind == "commit":
            steps.append(None)
            destination += data.draw(st.sampled_from([0, 1, 1, 2]))  # the marker, another writer's record
        elif kind == "source_gap":
            source += n
        elif kind == "other_writer":
            destination += n
        elif kind == "rewind":
            source = max(0, source - n)
    one, runs = OffsetMap(), OffsetMap()
    position = 0
    while position < len(steps):
        if steps[position] is None:
            one.end_transaction()
            runs.end_transaction()
            position += 1
            continue
        end = position
        while end < len(steps) and steps[end] is not None:
            end += 1
        chunk = [step for step in steps[position : data.draw(st.integers(position + 1, end))] if step is not None]
        position += len(chunk)
        for s, d in chunk:
            one.record(s, d)
        _record_chunk(runs, chunk, data)
        if data.draw(st.booleans()):
            assert one.take_changed() == runs.take_changed()
        assert one.segments() == runs.segments()
    assert one.take_changed() == runs.take_changed()
