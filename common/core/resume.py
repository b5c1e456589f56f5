"""Where a new owner of a partition starts copying: the resume rule (exact offsets).

Pure: plain data in, plain data out; no I/O, no clock.

The destination partition is the record of progress. A worker that takes a partition reads the
destination back from its end (bounded) and collects the source offsets, from the provenance
header, of the records its own route wrote there (other writers' records are skipped: the
destination may be written by several routes, active-active). Then:

1. It starts from the committed source offset. The commit watermark never passes an
   unacknowledged or failed record, so everything below it is on the destination.
2. It skips the offsets at or above that which are already present.

A plain "last record's source offset + 1" would lose a record after a librdkafka message timeout
(the idempotent producer may leave a gap and write the records after it); skipping a *set* loses
nothing and copies nothing twice. When the route never committed, the start is one past the last
record present (or the consumer's reset policy when the destination holds nothing of the route).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ResumePlan:
    """``start``: the source offset to consume from (None: the consumer's reset policy decides);
    ``skip``: source offsets at or after ``start`` already on the destination, not to copy again;
    ``gaps``: how many source offsets in [start, max(skip)] are missing from the destination while
    later ones are present (a producer timeout broke order there; those records are copied after
    the later ones)."""

    start: int | None
    skip: frozenset[int]
    gaps: int


def resume_plan(committed: int | None, present: Iterable[int]) -> ResumePlan:
    """The resume rule. ``committed``: the route's committed source offset (None: none);
    ``present``: source offsets of the route's own records found by the destination look-back."""
    offsets = set(present)
    if committed is None:
        if not offsets:
            return ResumePlan(None, frozenset(), 0)
        return ResumePlan(max(offsets) + 1, frozenset(), 0)
    skip = frozenset(o for o in offsets if o >= committed)
    gaps = 0 if not skip else (max(skip) - committed + 1) - len(skip)
    return ResumePlan(committed, skip, gaps)


def lookback_done(committed: int | None, oldest_seen: int | None, at_log_start: bool, read: int, limit: int) -> bool:
    """Whether the destination look-back has read far enough.

    Far enough: it passed below the committed offset (every record it could still need to skip is
    at or above it), or reached the log start, or read ``limit`` records (the bound).

    Without a committed offset it goes on to the log start (or the bound) even after finding own
    records: the start is one past the newest, but the records it finds also seed the offset map,
    and a previous owner killed before its first commit (whose map segments may not have reached
    the destination either) copied records that only this look-back can describe. Stopping at the
    newest would leave them out of the map: a group committed there would fall back to the
    timestamp method. It costs nothing on an empty destination, and at most ``limit`` records.
    """
    if at_log_start or read >= limit:
        return True
    if oldest_seen is None or committed is None:
        return False
    return oldest_seen < committed


def lookback_windows(low: int, high: int, first: int, largest: int | None = None) -> list[tuple[int, int]]:
    """The [start, end) windows of destination offsets to read, newest first.

    The first holds ``first`` records and each next one twice as many (up to ``largest``): the
    look-back usually ends within one commit interval of records, so a small first read keeps a
    takeover quick, and a long one still takes few reads.
    """
    windows = []
    end = high
    step = max(1, first)
    while end > low:
        start = max(low, end - step)
        windows.append((start, end))
        end = start
        step = step * 2 if largest is None else min(largest, step * 2)
    return windows
