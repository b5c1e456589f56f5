"""The worker's load windows: rates per held partition from the copier's counters, lag, busy share."""

from __future__ import annotations

from typing import Any, cast

import pytest

from ferry.common.model import PartitionKey, PartitionLoad
from ferry.worker.load import LoadMeter

pytestmark = pytest.mark.unit


class FakeCopier:
    def __init__(
        self,
        held: set[tuple[str, int]],
        copied: dict[tuple[str, int], tuple[int, int]],
        lags: dict[tuple[str, int], int],
    ) -> None:
        self._held, self._copied, self._lags = held, copied, lags

    def held(self) -> set[tuple[str, int]]:
        return self._held

    def take_copied(self) -> dict[tuple[str, int], tuple[int, int]]:
        copied, self._copied = self._copied, {}
        return copied

    def lags(self) -> dict[tuple[str, int], int]:
        return self._lags


def test_a_window_reports_rates_per_held_partition_and_the_busy_share() -> None:
    meter = LoadMeter(10.0, now=100.0)
    copier = FakeCopier({("t", 0), ("t", 1)}, {("t", 0): (1000, 512_000), ("gone", 3): (5, 5)}, {("t", 0): 42})
    meter.busy(2.5)
    meter.busy(2.5)
    assert not meter.due(109.9) and meter.due(110.0)
    load, busy = meter.report(110.0, cast(Any, {"a.b": copier}))
    assert load == {
        PartitionKey("a.b", "t", 0): PartitionLoad(51_200, 100, 42),
        PartitionKey("a.b", "t", 1): PartitionLoad(0, 0, 0),
    }
    assert busy == 0.5
    load, busy = meter.report(120.0, cast(Any, {"a.b": copier}))  # the next window starts from zero
    assert load[PartitionKey("a.b", "t", 0)] == PartitionLoad(0, 0, 42) and busy == 0.0
