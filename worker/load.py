"""What a worker copies per partition, measured over windows, for the leader's balance by load.

Every ``worker.load_report_interval_s`` the copy loop asks :meth:`LoadMeter.report` for the window
that ended: per partition held, bytes/s and records/s (from the counters each
:class:`worker.copier.RouteCopier` adds to once per run of a partition's records) and the lag
(as the copier last measured it), and ``busy``: the share of the window the copy loop spent in
passes that copied something. A copy loop that never waited for records (busy near 1) cannot
copy faster: the leader calls that worker saturated (``controller.saturated_busy_ratio``).

States: MEASURING (a window is open) --report(), once the interval passed--> MEASURING (the next
window). The worker writes the report in its status, so at most once per interval.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.common.model import PartitionKey, PartitionLoad
from ferry.worker.copier import RouteCopier


class LoadMeter:
    def __init__(self, interval_s: float, now: float) -> None:
        self.interval_s = interval_s
        self._started = now
        self._busy_s = 0.0

    def busy(self, seconds: float) -> None:
        """The copy loop spent ``seconds`` in a pass that copied records."""
        self._busy_s += seconds

    def due(self, now: float) -> bool:
        return now - self._started >= self.interval_s

    def report(self, now: float, copiers: Mapping[str, RouteCopier]) -> tuple[dict[PartitionKey, PartitionLoad], float]:
        """The window that ends now: per held partition its load, and the copy loop's busy share."""
        elapsed = max(now - self._started, 1e-9)
        load: dict[PartitionKey, PartitionLoad] = {}
        for route, copier in copiers.items():
            copied = copier.take_copied()
            lags = copier.lags()
            for topic, partition in copier.held():
                records, size = copied.get((topic, partition), (0, 0))
                load[PartitionKey(route, topic, partition)] = PartitionLoad(
                    round(size / elapsed), round(records / elapsed), lags.get((topic, partition), 0)
                )
        busy = min(1.0, self._busy_s / elapsed)
        self._started, self._busy_s = now, 0.0
        return load, round(busy, 3)
