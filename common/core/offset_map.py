"""The exact offset map of one partition: source offset -> destination offset, run-length encoded.

Pure: plain data in, plain data out; no I/O, no clock.

A :class:`Segment` says "source offsets ``src_start .. src_start + length - 1`` are at destination
offsets ``dst_start .. dst_start + length - 1``". A 1:1 copy of a contiguous run of source offsets is
one segment however long it is; a new segment starts where either side jumps (a gap in the source
from transaction markers or compaction, another writer's records on the destination, a rewind, a
new owner). Segments are identified by ``dst_start`` (unique on the destination partition), so
each is stored under its own key in a compacted topic (:func:`segment_key`) and only the newest
extent of each survives compaction.

Translation of a committed source offset ``c`` (the next record the group will read):

- the newest copy of ``c - 1`` is at ``d``: the group continues at ``d + 1`` (exact);
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

from collections.abc import Iterable
from dataclasses import dataclass

EXACT, TIMESTAMP = "exact", "timestamp"
AHEAD = "ahead"  # the group is past what was copied: checkpointed at the copy's end
# Compacted topics on the destination cluster: the map's segments, and checkpoints for tools.
MAP_TOPIC = "__ferry_offset_map"
CHECKPOINT_TOPIC = "__ferry_checkpoints"
MAX_SEGMENTS = 10_000  # per partition; the oldest are dropped beyond it (they fall back to timestamps)


@dataclass(frozen=True)
class Segment:
    src_start: int
    dst_start: int
    length: int

    @property
    def src_end(self) -> int:
        """One past the last source offset."""
        return self.src_start + self.length

    @property
    def dst_end(self) -> int:
        return self.dst_start + self.length

    def destination_of(self, source_offset: int) -> int | None:
        if self.src_start <= source_offset < self.src_end:
            return self.dst_start + source_offset - self.src_start
        return None


class OffsetMap:
    """One partition's segments in destination order; extended record by record as copies land.

    :meth:`record` is O(1) and allocates nothing while a run goes on (the newest segment is kept
    as three integers until it is handed out); :meth:`take_changed` hands out the segments
    created or extended since the last call (the ones to persist).
    """

    def __init__(self, segments: Iterable[Segment] = ()) -> None:
        self._changed: set[int] = set()  # dst_start of segments changed since take_changed
        self._load(segments)

    def _load(self, segments: Iterable[Segment]) -> None:
        merged = merge(segments)
        self._closed: list[Segment] = merged[:-1]
        last = merged[-1] if merged else None
        # The newest run: source start, destination start, length (0: none yet).
        self._src, self._dst, self._len = (last.src_start, last.dst_start, last.length) if last else (0, 0, 0)

    def record(self, source_offset: int, destination_offset: int) -> None:
        """The copy of ``source_offset`` landed at ``destination_offset`` (destination offsets increase)."""
        length = self._len
        if length:
            if destination_offset < self._dst + length:
                return  # already known (a look-back re-read records this map has)
            if source_offset == self._src + length and destination_offset == self._dst + length:
                self._len = length + 1
                self._changed.add(self._dst)
                return
            self._closed.append(Segment(self._src, self._dst, length))
            if len(self._closed) >= MAX_SEGMENTS:
                dropped = self._closed.pop(0)
                self._changed.discard(dropped.dst_start)
        self._src, self._dst, self._len = source_offset, destination_offset, 1
        self._changed.add(destination_offset)

    def record_run(self, source_offsets: list[int], destination_offsets: list[int]) -> None:
        """:meth:`record` for each pair, in order; one comparison in C when they continue the newest run 1:1.

        The endpoints alone do not prove a run: after a source gap and a rewind within one run of
        reports (sources 4, 9, 6 landing at 4, 5, 6), they look contiguous while the middle is
        not, so both lists are compared whole with the run they would extend.
        """
        count = len(source_offsets)
        length = self._len
        if (
            length
            and count == len(destination_offsets)
            and source_offsets[0] == self._src + length
            and destination_offsets[0] == self._dst + length
            and source_offsets == list(range(source_offsets[0], source_offsets[0] + count))
            and destination_offsets == list(range(destination_offsets[0], destination_offsets[0] + count))
        ):
            self._len = length + count
            self._changed.add(self._dst)
            return
        record = self.record
        for source_offset, destination_offset in zip(source_offsets, destination_offsets, strict=True):
            record(source_offset, destination_offset)

    def end_transaction(self) -> None:
        """A transaction that held the newest copy committed: a marker follows it on the destination."""

    def segments(self) -> list[Segment]:
        if not self._len:
            return list(self._closed)
        return [*self._closed, Segment(self._src, self._dst, self._len)]

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
    for segment in sorted(segments, key=lambda s: (s.dst_start, -s.length)):
        if segment.length <= 0:
            continue
        if result:
            last = result[-1]
            if segment.dst_start < last.dst_end:  # the same records seen twice (an older extent)
                if segment.dst_end <= last.dst_end:
                    continue
                cut = last.dst_end - segment.dst_start
                segment = Segment(segment.src_start + cut, last.dst_end, segment.length - cut)
            if segment.src_start == last.src_end and segment.dst_start == last.dst_end:
                result[-1] = Segment(last.src_start, last.dst_start, last.length + segment.length)
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
    return f"1|{segment.src_start}|{segment.length}".encode()


def parse_segment(key: bytes, value: bytes | None) -> tuple[tuple[str, str, int], int, Segment | None]:
    """(route, topic, partition), dst_start and the segment (None: a tombstone). Raises ValueError."""
    route, topic, partition, dst_start = key.decode().split("|")
    start = int(dst_start)
    if value is None:
        return (route, topic, int(partition)), start, None
    version, src_start, length = value.decode().split("|")
    if version != "1":
        raise ValueError(f"offset map value of unknown version {version!r}")
    return (route, topic, int(partition)), start, Segment(int(src_start), start, int(length))
