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

A re-created topic with at least as many records as were copied does not leave the log: when a
partition is taken with nothing committed (a deleted topic's committed offsets go with it) but the
route's copies on the destination, the source record at the newest copy's offset is read
(:class:`SourceProbe`) and compared with the copy (timestamp and key, which Ferry keeps): another
record there means another topic (:func:`recreated_reason`), and the partition stops in ERROR.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import TopicPartition

from ferry.common.kafka import clients as kafka_clients

LOSS_HISTORY = 3  # ranges a partition's status names (the counter and the log have every one)
POLL_S = 0.5  # one wait of the source probe's consumer


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
        return OutOfRange(
            resume_at=None,
            stop_reason=(
                f"the source partition ends at offset {log_end}, below Ferry's position {position}: the topic was "
                f"deleted and re-created (or truncated) at the source. Ferry does not copy the new topic's records "
                f"under the old one's offsets; to mirror the new topic, delete the destination topic and "
                f"DELETE then POST the topic again"
            ),
        )
    return OutOfRange(resume_at=position)


def describe(lost: tuple[int, int]) -> str:
    return (
        f"lost source records [{lost[0]}, {lost[1]}) ({lost[1] - lost[0]} records): deleted at the source "
        f"(retention or deleteRecords) before Ferry copied them; copying went on from {lost[1]}"
    )


@dataclass
class Losses:
    """The lost ranges of the partitions one copier holds, for their status (forgotten at release)."""

    ranges: dict[tuple[str, int], list[tuple[int, int]]] = field(default_factory=dict)
    notes: dict[tuple[str, int], str] = field(default_factory=dict)  # other things the operator must know

    def note(self, key: tuple[str, int], text: str) -> None:
        self.notes[key] = text

    def add(self, key: tuple[str, int], lost: tuple[int, int]) -> None:
        kept = self.ranges.setdefault(key, [])
        kept.append(lost)
        del kept[:-LOSS_HISTORY]

    def reason(self, key: tuple[str, int]) -> str | None:
        said = [self.notes[key]] if key in self.notes else []
        said.extend(describe(lost) for lost in self.ranges.get(key, ()))
        return "; ".join(said) if said else None

    def forget(self, key: tuple[str, int]) -> None:
        self.ranges.pop(key, None)
        self.notes.pop(key, None)


def destination_recreated(committed: int) -> str:
    return (
        f"the destination topic was deleted under Ferry (the route had copied up to source offset {committed}) "
        f"and created again: copying again from the source's log start"
    )


def recreated_reason(
    source_offset: int, copied: tuple[int | None, bytes | None], found: tuple[int, bytes | None] | None
) -> str | None:
    """Why a partition must stop because its source topic is not the one its copies came from, or None (pure).

    ``copied``: the (timestamp, key) of the destination's newest copy of source offset ``source_offset``
    (timestamp None: the destination stamps its own, only the key compares); ``found``: the source's
    record at that offset now (None: not there any more, nothing to compare)."""
    if found is None or (found[1] == copied[1] and copied[0] in (None, found[0])):
        return None
    return (
        f"the source topic was re-created: its record at offset {source_offset} is not the one Ferry copied "
        f"from there (timestamp {found[0]}, copied {copied[0]}). Ferry does not copy the new topic's records "
        f"under the old one's offsets; to mirror the new topic, delete the destination topic and DELETE then "
        f"POST the topic again"
    )


class SourceProbe:
    """Reads one source record, on a consumer of its own (the copy loop's is never moved for this).

    Used only when a partition is taken with nothing committed but copies of the route found on the
    destination: the committed offsets of a deleted topic are deleted with it, so that is when a
    re-created topic shows."""

    def __init__(self, source: Mapping[str, Any], group_id: str, client_id: str) -> None:
        self._settings = (source, f"{group_id}.probe", client_id)
        self._consumer: Any = None

    def record(
        self, topic: str, partition: int, offset: int, timeout_s: float = 10.0
    ) -> tuple[int, bytes | None] | None:
        """(timestamp, key) of the record at ``offset``, or None when the source no longer has it."""
        if self._consumer is None:
            source, group, client_id = self._settings
            self._consumer = kafka_clients.consumer(
                source, group, **{"client.id": client_id, "auto.offset.reset": "error"}
            )
        self._consumer.assign([TopicPartition(topic, partition, offset)])
        try:
            # Counted polls, not a clock: each waits at most POLL_S, so this gives up after about timeout_s.
            for _ in range(max(1, math.ceil(timeout_s / POLL_S))):
                message = self._consumer.poll(POLL_S)
                if message is None:
                    continue
                if message.error() is not None or message.offset() != offset:
                    return None  # out of range (deleted, never written) or compacted away: nothing to compare
                return int(message.timestamp()[1]), message.key()
            return None
        finally:
            self._consumer.unassign()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
