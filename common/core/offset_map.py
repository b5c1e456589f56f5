"""The exact offset map of one partition: source offset -> destination offset, run-length encoded.

Pure: plain data in, plain data out; no I/O, no clock.

A :class:`Segment` says "source offsets ``src_start .. src_start + length - 1`` are the copies at
destination offsets ``dst_start`` on, in order, with the route's own transaction markers at
``markers`` between them". A 1:1 copy of a contiguous run of source offsets is one segment however
long it is, and stays one across the markers its own transactions write (at most
:data:`MAX_MARKERS_PER_SEGMENT` of them, so one stored value stays small). A new segment starts where
either side jumps otherwise (a gap in the source from transaction markers or compaction, another
writer's records on the destination, a rewind, a new owner). Segments are identified by
``dst_start`` (unique on the destination partition), so each is stored under its own key in a
compacted topic (:func:`segment_key`) and only the newest extent of each survives compaction.

Markers: each committed transaction writes one control record into every destination partition it
touched, and it takes a destination offset. :meth:`OffsetMap.end_transaction` says that a transaction
holding the partition's newest copy committed; when the next copy then lands exactly one offset
further on (the next source offset), that offset is the marker and the newest segment goes on past it.
Any other gap is not known to be only the marker (another writer's records may sit there), so it
starts a new segment. A marker between two segments belongs to neither.

Translation of a committed source offset ``c`` (the next record the group will read):

- the newest copy of ``c - 1`` is at ``d``: the group continues at ``d + 1`` (exact; when ``d + 1``
  is a transaction marker, the consumer passes over it to the next record, so the answer is always
  ``d + 1``, never the offset of the copy after the marker);
- else the newest copy of ``c`` is at ``d``: at ``d`` (exact);
- else ``c`` falls in a gap between copied runs (records never copied: transaction markers,
  compaction): right after the newest copy of the run below the gap, which is where the next run
  starts unless other writers' records sit between (exact; a hole in the map itself would make the
  group re-read the hole, never skip it);
- else ``c`` is below everything mapped (copied before Ferry recorded it, or removed by retention)
  or above the mirror's head: no exact answer (:func:`translate` returns None) and the caller uses
  the timestamp method (:func:`timestamp_lookup_ms`) or waits.

A group above the mirror's head has read everything the copy holds. Its checkpoint is the end of the
copy (:func:`copy_end`, method ``ahead``): on the destination it goes on with the next record copied,
and re-reads only what it read at the source while the mirror caught up. Not the destination's log
end: records copied after the map's newest segment may lie past the group's offset.

"Newest" is the highest destination offset: after a rewind re-copied records, the group continues
after their latest copy, so it reads each record once from there on.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

EXACT, TIMESTAMP = "exact", "timestamp"
AHEAD = "ahead"  # the group is past what was copied: checkpointed at the copy's end
# Compacted topics on the destination cluster: the map's segments, and checkpoints for tools.
MAP_TOPIC = "__ferry_offset_map"
CHECKPOINT_TOPIC = "__ferry_checkpoints"
MAX_SEGMENTS = 10_000  # per partition; the oldest are dropped beyond it (they fall back to timestamps)
# Markers one segment takes before the next transaction's copies open a new one: the map grows by one
# segment per this many transactions, and one stored value stays a few hundred bytes.
MAX_MARKERS_PER_SEGMENT = 64
_NONE = -1  # no pending marker


@dataclass(frozen=True)
class Segment:
    """``length`` copies of source offsets from ``src_start`` on, at destination offsets from ``dst_start``
    on, with the route's own transaction markers at the destination offsets ``markers`` between them
    (sorted, each between two of the segment's copies)."""

    src_start: int
    dst_start: int
    length: int
    markers: tuple[int, ...] = ()

    @property
    def src_end(self) -> int:
        """One past the last source offset."""
        return self.src_start + self.length

    @property
    def dst_end(self) -> int:
        """One past the last copy's destination offset."""
        return self.dst_start + self.length + len(self.markers)

    def destination_of(self, source_offset: int) -> int | None:
        if not self.src_start <= source_offset < self.src_end:
            return None
        base = self.dst_start + source_offset - self.src_start
        if not self.markers:
            return base
        # Marker j has j markers and markers[j] - j - dst_start copies before it, so copy number
        # base - dst_start lies past it when markers[j] - j <= base (increasing in j: a bisection).
        markers = self.markers
        return base + bisect_right(range(len(markers)), base, key=lambda j: markers[j] - j)

    def runs(self) -> list[Segment]:
        """The segment as 1:1 runs without markers (the runs between its markers)."""
        if not self.markers:
            return [self]
        runs = []
        src, dst = self.src_start, self.dst_start
        for marker in self.markers:
            runs.append(Segment(src, dst, marker - dst))
            src, dst = src + marker - dst, marker + 1
        runs.append(Segment(src, dst, self.src_end - src))
        return runs

    def from_destination(self, destination_offset: int) -> Segment | None:
        """The part of the segment at ``destination_offset`` and above (None: nothing of it is)."""
        if destination_offset <= self.dst_start:
            return self
        if destination_offset >= self.dst_end:
            return None
        markers_below = bisect_left(self.markers, destination_offset)
        copies_below = destination_offset - self.dst_start - markers_below
        # At a marker, the part starts with the copy after it (markers are never next to each other).
        at_marker = markers_below < len(self.markers) and self.markers[markers_below] == destination_offset
        return Segment(
            self.src_start + copies_below,
            destination_offset + at_marker,
            self.length - copies_below,
            self.markers[markers_below + at_marker :],
        )


class OffsetMap:
    """One partition's segments in destination order; extended record by record as copies land.

    :meth:`record` is O(1) and allocates nothing while a run goes on (the newest segment is kept
    as integers and a list of its markers until it is handed out); :meth:`take_changed` hands out
    the segments created or extended since the last call (the ones to persist).

    States of the newest run: none (nothing recorded); open (the next copy at the next source and
    destination offsets extends it); marker pending (:meth:`end_transaction`: the next copy may also
    land one destination offset further on, past the transaction's marker, and still extend it, while
    the segment holds fewer than :data:`MAX_MARKERS_PER_SEGMENT` markers). Any other copy closes the
    run and opens the next one; a closed segment never changes again (:meth:`trim` and the
    :data:`MAX_SEGMENTS` bound drop it whole).
    """

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._changed: set[int] = set()  # dst_start of segments changed since take_changed
        # The destination offset of the marker end_transaction announced (_NONE: none); it counts only
        # while it is right after the newest copy, so a copy that moves on makes it stale by itself.
        self._marker_at = _NONE
        self._load(segments)

    def _load(self, segments: Iterable[Segment]) -> None:
        merged = merge(segments)
        self._closed: list[Segment] = merged[:-1]
        last = merged[-1] if merged else None
        # The newest run: source start, destination start, length (0: none yet), its markers and one
        # past its newest copy's destination offset.
        self._src, self._dst, self._len = (last.src_start, last.dst_start, last.length) if last else (0, 0, 0)
        self._markers: list[int] = list(last.markers) if last else []
        self._dst_next = last.dst_end if last else 0

    def record(self, source_offset: int, destination_offset: int) -> None:
        """The copy of ``source_offset`` landed at ``destination_offset`` (destination offsets increase)."""
        length = self._len
        if length:
            dst_next = self._dst_next
            if destination_offset < dst_next:
                return  # already known (a look-back re-read records this map has)
            if source_offset == self._src + length:
                if destination_offset == dst_next:
                    self._len = length + 1
                    self._dst_next = dst_next + 1
                    self._changed.add(self._dst)
                    return
                if self._extends_past_marker(destination_offset):
                    self._markers.append(dst_next)
                    self._len = length + 1
                    self._dst_next = destination_offset + 1
                    self._changed.add(self._dst)
                    return
            self._close()
        self._open(source_offset, destination_offset)

    def _extends_past_marker(self, destination_offset: int) -> bool:
        """Whether a copy of the next source offset at ``destination_offset`` continues the newest run past
        the pending marker (only that marker lies between)."""
        dst_next = self._dst_next
        return (
            destination_offset == dst_next + 1
            and self._marker_at == dst_next
            and len(self._markers) < MAX_MARKERS_PER_SEGMENT
        )

    def _close(self) -> None:
        self._closed.append(Segment(self._src, self._dst, self._len, tuple(self._markers)))
        if len(self._closed) >= MAX_SEGMENTS:
            dropped = self._closed.pop(0)
            self._changed.discard(dropped.dst_start)

    def _open(self, source_offset: int, destination_offset: int) -> None:
        self._src, self._dst, self._len = source_offset, destination_offset, 1
        self._markers = []
        self._dst_next = destination_offset + 1
        self._changed.add(destination_offset)

    def record_run(self, source_offsets: list[int], destination_offsets: list[int]) -> None:
        """:meth:`record` for each pair, in order; one comparison in C when they continue the newest run 1:1
        (right after its newest copy, or past the pending transaction marker).

        The endpoints alone do not prove a run: after a source gap and a rewind within one run of
        reports (sources 4, 9, 6 landing at 4, 5, 6), they look contiguous while the middle is
        not, so both lists are compared whole with the run they would extend.
        """
        count = len(source_offsets)
        if (
            count
            and count == len(destination_offsets)
            and self._continues(source_offsets[0], destination_offsets[0])
            and source_offsets == list(range(source_offsets[0], source_offsets[0] + count))
            and destination_offsets == list(range(destination_offsets[0], destination_offsets[0] + count))
        ):
            self._extend(destination_offsets[0], count)
            return
        record = self.record
        for source_offset, destination_offset in zip(source_offsets, destination_offsets, strict=True):
            record(source_offset, destination_offset)

    def record_span(self, source_first: int, destination_first: int, count: int) -> None:
        """:meth:`record_run` for ``count`` consecutive source offsets from ``source_first`` copied to as many
        consecutive destination offsets from ``destination_first``: O(1) when they continue the newest run."""
        if count and self._continues(source_first, destination_first):
            self._extend(destination_first, count)
            return
        record = self.record
        for step in range(count):
            record(source_first + step, destination_first + step)

    def _continues(self, source_first: int, destination_first: int) -> bool:
        """Whether copies of the source offsets from ``source_first`` on, at consecutive destination offsets from
        ``destination_first``, continue the newest run 1:1 (right after its newest copy, or past the pending
        transaction marker)."""
        return (
            bool(self._len)
            and source_first == self._src + self._len
            and (destination_first == self._dst_next or self._extends_past_marker(destination_first))
        )

    def _extend(self, destination_first: int, count: int) -> None:
        """The newest run goes on by ``count`` copies from ``destination_first`` on (:meth:`_continues` said so)."""
        if destination_first != self._dst_next:  # past the marker
            self._markers.append(self._dst_next)
        self._len += count
        self._dst_next = destination_first + count
        self._changed.add(self._dst)

    def end_transaction(self) -> None:
        """A transaction that held this partition's newest copy committed: its marker takes the destination
        offset right after that copy. Called again before the next copy, it still means that one marker
        (a transaction that did not touch the partition writes none to it)."""
        if self._len:
            self._marker_at = self._dst_next

    def segments(self) -> list[Segment]:
        if not self._len:
            return list(self._closed)
        return [*self._closed, Segment(self._src, self._dst, self._len, tuple(self._markers))]

    def take_changed(self) -> list[Segment]:
        if not self._changed:
            return []
        changed = [s for s in self.segments() if s.dst_start in self._changed]
        self._changed.clear()
        return changed

    def touch(self, dst_start: int) -> None:
        """Hands the segment starting at ``dst_start`` out again at the next :meth:`take_changed` (its write failed)."""
        if any(s.dst_start == dst_start for s in self.segments()):
            self._changed.add(dst_start)

    def trim(self, destination_log_start: int) -> list[Segment]:
        """Drops what retention removed from the destination; returns the segments dropped whole."""
        kept, dropped = [], []
        for segment in self.segments():
            if segment.dst_end <= destination_log_start:
                dropped.append(segment)
            else:
                kept.append(segment)
        self._load(kept)
        self._changed -= {s.dst_start for s in dropped}
        return dropped

    def translate(self, committed: int) -> int | None:
        return translate(self.segments(), committed)


def merge(segments: Iterable[Segment]) -> list[Segment]:
    """Segments in destination order, adjacent runs joined (contiguous on both sides), overlaps dropped."""
    result: list[Segment] = []
    for segment in sorted(segments, key=lambda s: (s.dst_start, -s.dst_end)):
        if segment.length <= 0:
            continue
        if result:
            last = result[-1]
            if segment.dst_start < last.dst_end:  # the same records seen twice (an older extent)
                rest = segment.from_destination(last.dst_end)
                if rest is None:
                    continue
                segment = rest
            if segment.src_start == last.src_end and segment.dst_start == last.dst_end:
                result[-1] = Segment(
                    last.src_start, last.dst_start, last.length + segment.length, last.markers + segment.markers
                )
                continue
        result.append(segment)
    return result


def translate(segments: list[Segment], committed: int) -> int | None:
    """The destination offset a group committed at source offset ``committed`` continues from, or None.

    ``segments`` in destination order (as :func:`merge` returns them). See the module docstring.
    """
    if committed < 0 or not segments:
        return None
    for segment in reversed(segments):  # newest first
        before = segment.destination_of(committed - 1)
        if before is not None:
            return before + 1
    for segment in reversed(segments):
        at = segment.destination_of(committed)
        if at is not None:
            return at
    lowest = min(s.src_start for s in segments)
    highest = max(s.src_end for s in segments)
    if committed < lowest or committed > highest:
        return None
    # In a gap: right after the newest copy of the last run below it. Source gaps (transaction
    # markers, compaction) end where the next run begins; a hole in the map itself (a segment
    # write lost with its writer) makes the group read the hole again rather than skip it.
    below = [s for s in segments if s.src_end <= committed]
    last = max(below, key=lambda s: (s.src_end, s.dst_start))
    return last.dst_end


def copy_end(segments: list[Segment]) -> int | None:
    """The destination offset right after the newest copy of the highest source offset mapped: where a
    group that read past the mirror's head goes on. None when nothing is mapped."""
    if not segments:
        return None
    newest = max(segments, key=lambda s: (s.src_end, s.dst_start))
    return newest.dst_end


def timestamp_lookup_ms(committed_record_timestamp_ms: int, margin_s: float) -> int:
    """Axual's method: look the destination up at the committed record's timestamp minus a margin.

    ``offsets_for_times`` at this time gives the first destination record at or after it; the
    group re-reads at most the records of the margin (and those sharing its timestamps).
    """
    return max(0, committed_record_timestamp_ms - int(margin_s * 1000))


# -- storage in the compacted map topic ----------------------------------------------------------


def segment_key(route: str, topic: str, partition: int, dst_start: int) -> bytes:
    return f"{route}|{topic}|{partition}|{dst_start}".encode()


def segment_value(segment: Segment) -> bytes:
    """Version 1 (``1|src_start|length``) for a segment without markers, which every release reads;
    version 2 (``2|src_start|length|m1,m2,...``, markers relative to ``dst_start``) for one with."""
    if not segment.markers:
        return f"1|{segment.src_start}|{segment.length}".encode()
    markers = ",".join(str(m - segment.dst_start) for m in segment.markers)
    return f"2|{segment.src_start}|{segment.length}|{markers}".encode()


def parse_segment(key: bytes, value: bytes | None) -> tuple[tuple[str, str, int], int, Segment | None]:
    """(route, topic, partition), dst_start and the segment (None: a tombstone). Raises ValueError."""
    route, topic, partition, dst_start = key.decode().split("|")
    start = int(dst_start)
    if value is None:
        return (route, topic, int(partition)), start, None
    version, *fields = value.decode().split("|")
    if version == "1":
        src_start, length = fields
        markers: tuple[int, ...] = ()
    elif version == "2":
        src_start, length, relative = fields
        markers = tuple(start + int(m) for m in relative.split(",")) if relative else ()
    else:
        raise ValueError(f"offset map value of unknown version {version!r}")
    segment = Segment(int(src_start), start, int(length), markers)
    # Each marker between two copies: increasing by at least 2, neither first nor last in the span.
    if markers and not (
        start < markers[0] and markers[-1] < segment.dst_end - 1 and all(b - a >= 2 for a, b in pairwise(markers))
    ):
        raise ValueError(f"offset map value with markers outside its copies: {value!r}")
    return (route, topic, int(partition)), start, segment
