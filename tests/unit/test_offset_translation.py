"""Translating one consumer position both ways with the offset map (pure parts)."""

from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.offset_map import OffsetMap, Segment, translate
from ferry.controller.groups.translate import reversed_segments


def _mapped(runs: list[tuple[int, int]]) -> OffsetMap:
    """A map of runs (source gap before the run, run length) copied one after the other."""
    offsets = OffsetMap()
    source = destination = 0
    for gap, length in runs:
        source += gap
        for _ in range(length):
            offsets.record(source, destination)
            source += 1
            destination += 1
    return offsets


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 8)), min_size=1, max_size=8), st.data())
def test_a_position_translated_forward_then_back_is_where_it_started(runs, data):
    segments = _mapped(runs).segments()
    copied = [(s.src_start + i, s.dst_start + i) for s in segments for i in range(s.length)]
    source, destination = data.draw(st.sampled_from(copied))
    # the position after a copied record: forward lands right after its copy, and back again
    assert translate(segments, source + 1) == destination + 1
    assert translate(reversed_segments(segments), destination + 1) == source + 1


def test_reverse_of_a_renumbered_copy_gives_source_positions():
    offsets = OffsetMap()
    for source, destination in ((10, 0), (11, 1), (15, 2), (16, 3)):
        offsets.record(source, destination)
    back = reversed_segments(offsets.segments())
    assert translate(back, 2) == 12  # after dst 1 (src 11)
    assert translate(back, 4) == 17
    assert translate(back, 0) == 10  # before anything consumed: the first copied record
    assert translate(back, 9) is None  # past what the map knows


def test_ferry_offsets_translate_has_its_help():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "offsets", "translate", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and "--reverse" in out.stdout, out.stderr


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(1, 8), st.booleans()), min_size=1, max_size=8), st.data())
def test_a_position_goes_forward_and_back_across_transaction_markers(
    runs: list[tuple[int, int, bool]], data: st.DataObject
) -> None:
    """Runs copied in transactions (each then leaving a marker on the destination, or not: a source gap
    without one): the marker is a destination offset no source offset maps to, and both ways stay exact."""
    offsets = OffsetMap()
    source = destination = 0
    copied: list[tuple[int, int]] = []
    for gap, length, committed in runs:
        source += gap
        for _ in range(length):
            offsets.record(source, destination)
            copied.append((source, destination))
            source += 1
            destination += 1
        if committed:
            offsets.end_transaction()
            destination += 1  # the marker
    segments = offsets.segments()
    back = reversed_segments(segments)
    assert all(not s.markers for s in back)
    source, destination = data.draw(st.sampled_from(copied))
    assert translate(segments, source + 1) == destination + 1
    assert translate(back, destination + 1) == source + 1


def test_reverse_of_a_segment_with_markers_passes_over_them() -> None:
    back = reversed_segments([Segment(100, 10, 5, (12, 15))])  # copies at 10, 11, 13, 14, 16
    assert [translate(back, d) for d in range(10, 18)] == [100, 101, 102, 102, 103, 104, 104, 105]
