"""Lag and progress per partition, from periodic samples of committed and log-end offsets.

Pure: plain data in, plain data out; no I/O. Time comes in as ``now`` (seconds).

A partition *makes no progress* when it lags (committed < log-end) and its committed offset has
not moved for ``noprogress_after_s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ferry.common.model import PartitionKey


@dataclass(frozen=True)
class OffsetSample:
    committed: int | None  # None: nothing committed yet
    end: int

    @property
    def lag(self) -> int:
        return self.end - (self.committed or 0)


@dataclass(frozen=True)
class NoProgress:
    """What ``/noprogress`` shows: stalled partitions (-> seconds since their committed offset
    moved), each with its latest sample, and the threshold."""

    stalled: Mapping[PartitionKey, float]
    latest: Mapping[PartitionKey, OffsetSample]
    threshold_s: float


class ProgressTracker:
    def __init__(self, noprogress_after_s: float) -> None:
        self.noprogress_after_s = noprogress_after_s
        self._latest: dict[PartitionKey, OffsetSample] = {}
        self._moved_at: dict[PartitionKey, float] = {}  # when the committed offset last changed

    def update(self, samples: Mapping[PartitionKey, OffsetSample], now: float) -> None:
        """Records a whole sample; partitions absent from it are forgotten."""
        for key, sample in samples.items():
            previous = self._latest.get(key)
            if previous is None or previous.committed != sample.committed:
                self._moved_at[key] = now
        self._latest = dict(samples)
        self._moved_at = {k: t for k, t in self._moved_at.items() if k in samples}

    def latest(self) -> dict[PartitionKey, OffsetSample]:
        return dict(self._latest)

    def stalled(self, now: float) -> dict[PartitionKey, float]:
        """Lagging partitions whose committed offset has not moved for long -> seconds since it moved."""
        result = {}
        for key, sample in self._latest.items():
            since = now - self._moved_at.get(key, now)
            if sample.lag > 0 and since >= self.noprogress_after_s:
                result[key] = since
        return result

    def report(self, now: float) -> NoProgress:
        """The stalled partitions as of ``now``, with their latest samples."""
        stalled = self.stalled(now)
        return NoProgress(stalled, {key: self._latest[key] for key in stalled}, self.noprogress_after_s)
