"""Records the source deleted before Ferry copied them, said out loud: never a silent offset reset.

The copier's consumer runs with ``auto.offset.reset=error``: where a partition starts is always an
explicit offset (:mod:`worker.start_offsets`), so librdkafka's reset only ever fires when the
position falls outside the source log, and then it hands the copier an error event
(``_AUTO_OFFSET_RESET``) instead of jumping somewhere on its own. At that event (never per record)
the copier asks the source for the partition's log start and end and decides (:func:`out_of_range`):

- position below the log start: retention or ``deleteRecords`` removed ``[position, log start)``
  before Ferry copied them. The range is reported (the partition's status reason, the log, the
  ``ferry_worker_records_lost_total`` counter) and copying goes on from the log start;
- position past the log end: the source log is shorter than what Ferry already copied: the topic
  was deleted and re-created under the same name (or the log was truncated). Ferry stops the
  partition in ERROR rather than map the new topic's offsets onto the old one's offset map;
- position inside the log (the log moved back meanwhile): copying goes on from the position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOSS_HISTORY = 3  # ranges a partition's status names (the counter and the log have every one)


@dataclass(frozen=True)
class OutOfRange:
    """What to do with a partition whose position left the source log."""

    resume_at: int | None  # None: stop the partition (``stop_reason``)
    lost: tuple[int, int] | None = None  # [from, to) deleted before it was copied
    stop_reason: str | None = None


def out_of_range(position: int, log_start: int, log_end: int) -> OutOfRange:
    """The decision for a partition whose fetch ``position`` left the source log ``[log_start, log_end)`` (pure)."""
    if position < log_start:
        return OutOfRange(resume_at=log_start, lost=(position, log_start))
    if position > log_end:
        return OutOfRange(resume_at=None, stop_reason=(
            f"the source partition ends at offset {log_end}, below Ferry's position {position}: the topic was "
            f"deleted and re-created (or truncated) at the source. Ferry does not copy the new topic's records "
            f"under the old one's offsets; to mirror the new topic, delete the destination topic and "
            f"DELETE then POST the topic again"))
    return OutOfRange(resume_at=position)


def describe(lost: tuple[int, int]) -> str:
    return (f"lost source records [{lost[0]}, {lost[1]}) ({lost[1] - lost[0]} records): deleted at the source "
            f"(retention or deleteRecords) before Ferry copied them; copying went on from {lost[1]}")


@dataclass
class Losses:
    """The lost ranges of the partitions one copier holds, for their status (forgotten at release)."""

    ranges: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)

    def add(self, key: tuple[str, int], lost: tuple[int, int]) -> None:
        kept = self.ranges.setdefault(key, [])
        kept.append(lost)
        del kept[:-LOSS_HISTORY]

    def reason(self, key: tuple[str, int]) -> str | None:
        kept = self.ranges.get(key)
        return "; ".join(describe(lost) for lost in kept) if kept else None

    def forget(self, key: tuple[str, int]) -> None:
        self.ranges.pop(key, None)
