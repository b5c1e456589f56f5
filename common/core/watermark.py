"""Which source offset a worker may commit, given what it sent and what the destination acknowledged.

Pure: plain data in, plain data out; no I/O, no clock.

Each offset of a partition (any hashable key, usually a :class:`common.model.PartitionKey`) goes
through these states::

    SENT -> ACKED     the destination acknowledged the copy
    SENT -> FAILED    the copy failed for good; the watermark never passes it until forget(key)
    PASSED            read and not copied on purpose (loop prevention): settled at once

Offsets are sent in strictly increasing order per key, possibly with gaps (compacted topics,
transaction markers). Acknowledgements may arrive in any order. The committable offset, in
Kafka terms the next offset to read, is the lowest sent offset not yet acknowledged, or last
acknowledged + 1 when nothing is in flight; never beyond a failed offset. Nothing is committable
for a key until something was acknowledged (committing the starting position again is pointless),
unless it started past what was committed (:meth:`OffsetWatermarks.start_at`).

The hot path (:meth:`OffsetWatermarks.sent`, :meth:`OffsetWatermarks.acked`) is O(1) amortised
per record and never logs.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class _KeyState:
    """One key's offsets: ``spans`` holds, in send order, every offset from the oldest one in flight on,
    as spans ``[first, end)`` of consecutive offsets (a partition's records mostly are, so a run of a
    thousand records is one span, not a thousand numbers); ``settled`` the offsets in ``spans`` already
    settled (acknowledged or failed) out of order, waiting for the ones before them.

    The first offset of ``spans[0]``, when present, is always in flight. Acknowledgements in send order
    (the common case: an idempotent producer reports deliveries of a partition in order) only move the
    head, so the hot path touches no set.
    """

    __slots__ = ("acked_any", "count", "failure", "last_done", "last_sent", "settled", "spans")

    def __init__(self) -> None:
        self.spans: deque[list[int]] = deque()
        self.count = 0  # offsets in spans, settled ones included
        self.settled: set[int] = set()
        self.last_sent: int | None = None
        self.last_done: int | None = None  # highest offset popped from the head (acknowledged or failed)
        self.acked_any = False
        self.failure: tuple[int, str] | None = None

    def append(self, first: int, count: int) -> None:
        """``count`` consecutive offsets from ``first`` were sent (after every offset in ``spans``)."""
        spans = self.spans
        if spans and spans[-1][1] == first:
            spans[-1][1] = first + count
        else:
            spans.append([first, first + count])
        self.count += count

    def pop_head(self, count: int = 1) -> int:
        """Pops the ``count`` oldest offsets (consecutive: all in ``spans[0]``); returns the first."""
        head = self.spans[0]
        first = head[0]
        head[0] = first + count
        if head[0] == head[1]:
            self.spans.popleft()
        self.count -= count
        self.last_done = first + count - 1
        return first

    def in_flight(self, offset: int) -> bool:
        spans = self.spans
        if not spans or offset < spans[0][0] or offset >= spans[-1][1] or offset in self.settled:
            return False
        # O(spans), only for out-of-order settlements
        return offset == spans[0][0] or any(first <= offset < end for first, end in spans)

    def settle(self, offset: int) -> None:
        """``offset`` (in flight) is no longer: pop every settled offset at the head."""
        if offset != self.spans[0][0]:
            self.settled.add(offset)
            return
        self.pop_head()
        settled, spans = self.settled, self.spans
        while settled and spans and spans[0][0] in settled:
            settled.discard(spans[0][0])
            self.pop_head()

    def pending(self) -> int:
        return self.count - len(self.settled)

    def committable(self) -> int | None:
        if not self.acked_any:
            return None
        if self.spans:
            offset = self.spans[0][0]
        elif self.last_done is not None:
            offset = self.last_done + 1
        else:  # pragma: no cover - acked_any implies something was popped or is still queued
            return None
        if self.failure is not None:
            offset = min(offset, self.failure[0])
        return offset


class OffsetWatermarks(Generic[K]):
    """Per key, offsets sent and acknowledged, and the offset that is safe to commit."""

    def __init__(self) -> None:
        self._keys: dict[K, _KeyState] = {}

    def sent(self, key: K, offset: int) -> None:
        """``offset`` was handed to the producer. Offsets per key must strictly increase."""
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState()
        if state.last_sent is not None and offset <= state.last_sent:
            raise ValueError(f"{key}: offset {offset} sent after {state.last_sent}; offsets must increase")
        state.last_sent = offset
        state.append(offset, 1)

    def sent_run(self, key: K, offsets: list[int]) -> None:
        """:meth:`sent` for each of ``offsets``, in order: one call per run of a partition's records.

        ``offsets`` must increase, as a consumer hands a partition's records out; only the first
        is checked against what was sent before (checking each would cost what the batching saves).
        """
        if not offsets:
            return
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState()
        if (state.last_sent is not None and offsets[0] <= state.last_sent) or offsets[-1] < offsets[0]:
            raise ValueError(
                f"{key}: offsets {offsets[0]}..{offsets[-1]} sent after {state.last_sent}; offsets must increase"
            )
        state.last_sent = offsets[-1]
        count = len(offsets)
        if offsets[-1] - offsets[0] == count - 1:  # increasing, so consecutive: one span
            state.append(offsets[0], count)
        else:
            for offset in offsets:
                state.append(offset, 1)

    def sent_span(self, key: K, first: int, count: int) -> None:
        """:meth:`sent` for the ``count`` consecutive offsets from ``first``: a run of a partition's records
        with no gap between, in O(1)."""
        if count < 1:
            return
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState()
        if state.last_sent is not None and first <= state.last_sent:
            raise ValueError(
                f"{key}: offsets {first}..{first + count - 1} sent after {state.last_sent}; offsets must increase"
            )
        state.last_sent = first + count - 1
        state.append(first, count)

    def passed(self, key: K, offset: int) -> None:
        """``offset`` was read and deliberately not copied (loop prevention): settled at once.

        The watermark moves past it as soon as everything sent before it is acknowledged, so
        skipped records never stall commits. Offsets per key must strictly increase, as for :meth:`sent`.
        """
        self.sent(key, offset)
        state = self._keys[key]
        state.acked_any = True
        if state.count == 1:  # nothing before it in flight: O(1)
            state.pop_head()
        else:
            state.settled.add(offset)

    def acked(self, key: K, offset: int) -> None:
        """The destination acknowledged ``offset``. Unknown or repeated acknowledgements are ignored."""
        state = self._keys.get(key)
        if state is None or not state.in_flight(offset):
            return
        state.acked_any = True
        state.settle(offset)

    def acked_oldest(self, key: K) -> int:
        """Acknowledges the oldest offset in flight for ``key`` and returns it.

        For producers that report deliveries in send order per partition (an idempotent Kafka
        producer does), so the delivery callback need not carry the source offset.
        """
        state = self._keys.get(key)
        if state is None or not state.spans:
            raise ValueError(f"{key}: an acknowledgement arrived with nothing in flight")
        state.acked_any = True
        if not state.settled:  # nothing settled out of order: the head alone goes (settle()'s first step)
            return state.pop_head()
        offset = state.spans[0][0]
        state.settle(offset)
        return offset

    def acked_oldest_run(self, key: K, count: int) -> list[int]:
        """:meth:`acked_oldest` ``count`` times: the ``count`` oldest offsets in flight, acknowledged, in order."""
        state = self._keys.get(key)
        if state is None or state.count < count:
            raise ValueError(f"{key}: {count} acknowledgements arrived with fewer offsets in flight")
        if state.settled or not count:
            return [self.acked_oldest(key) for _ in range(count)]
        state.acked_any = True
        offsets: list[int] = []
        while len(offsets) < count:
            head = state.spans[0]
            take = min(count - len(offsets), head[1] - head[0])
            offsets.extend(range(head[0], head[0] + take))
            state.pop_head(take)
        return offsets

    def acked_oldest_span(self, key: K, count: int) -> int | None:
        """:meth:`acked_oldest_run` in O(1) when the ``count`` oldest offsets in flight are consecutive and
        none was settled out of order: acknowledges them and returns the first. Otherwise None, and
        nothing changed (:meth:`acked_oldest_run` then says which they are)."""
        state = self._keys.get(key)
        if state is None or state.settled or count < 1 or not state.spans:
            return None
        head = state.spans[0]
        if head[1] - head[0] < count:
            return None
        state.acked_any = True
        return state.pop_head(count)

    def fail_oldest(self, key: K, reason: str) -> int:
        """Marks the oldest offset in flight for ``key`` as failed (see :meth:`failed`) and returns it."""
        state = self._keys.get(key)
        if state is None or not state.spans:
            raise ValueError(f"{key}: a delivery failure arrived with nothing in flight")
        offset = state.spans[0][0]
        self.failed(key, offset, reason)
        return offset

    def failed(self, key: K, offset: int, reason: str) -> None:
        """The copy of ``offset`` failed for good: the watermark stays at or below it until :meth:`forget`.

        With several failures, the lowest offset (and its reason) is kept.
        """
        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState()
        if state.failure is None or offset < state.failure[0]:
            state.failure = (offset, reason)
        if state.in_flight(offset):
            state.settle(offset)

    def committables(self) -> dict[K, int]:
        """Key -> offset to commit, for every key that has something committable."""
        result: dict[K, int] = {}
        for key, state in self._keys.items():
            offset = state.committable()
            if offset is not None:
                result[key] = offset
        return result

    def in_flight(self, key: K | None = None) -> int:
        """How many offsets are sent and neither acknowledged nor failed: for ``key``, or all keys when None."""
        if key is None:
            return sum(state.pending() for state in self._keys.values())
        state = self._keys.get(key)
        return 0 if state is None else state.pending()

    def start_at(self, key: K, offset: int) -> None:
        """``key`` starts at ``offset`` with every offset below it already on the destination (a new
        owner resuming past what was committed, found by reading the destination back): ``offset`` is
        committable at once, so a partition with nothing more to copy does not stay uncommitted.
        Forgets what was known of ``key`` before."""
        self._keys.pop(key, None)
        if offset > 0:
            self.passed(key, offset - 1)

    def forget(self, key: K) -> None:
        """Drop everything known about ``key`` (its partition was released or will be re-read)."""
        self._keys.pop(key, None)
