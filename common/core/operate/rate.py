"""A token bucket for a route's throttle, spent at batch granularity.

Pure: no I/O, no clock (every call takes ``now``, seconds from any monotonic clock).

The copy loop asks :meth:`TokenBucket.allowance` how many records (or bytes) it may take now,
and reports what a batch really used with :meth:`TokenBucket.spend`. The bucket holds at most
``burst_s`` seconds of the rate, so an idle route cannot save up more than that; a batch may
overdraw it (a batch is not split), and the debt is paid back before the next batch: over any
window the rate stays within one batch of ``rate * window``.

States: ``full`` --spend--> ``partly spent`` or ``in debt`` --time--> refilled, never above capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_BURST_S = 0.2


@dataclass
class TokenBucket:
    """``rate`` tokens a second, at most ``rate * burst_s`` saved; ``rate`` None: no limit."""

    rate: float | None
    burst_s: float = DEFAULT_BURST_S
    tokens: float = 0.0
    updated: float | None = None

    @property
    def capacity(self) -> float:
        return 0.0 if self.rate is None else max(1.0, self.rate * self.burst_s)

    def set_rate(self, rate: float | None, now: float) -> None:
        """A new rate from now on (what was saved is kept, up to the new capacity)."""
        self._refill(now)
        self.rate = rate
        self.tokens = min(self.tokens, self.capacity)

    def allowance(self, now: float) -> float | None:
        """How much may be taken now (0 when empty or in debt); None: no limit."""
        if self.rate is None:
            return None
        self._refill(now)
        return max(0.0, self.tokens)

    def spend(self, amount: float, now: float) -> None:
        """``amount`` was used (it may exceed the allowance: the bucket goes into debt)."""
        if self.rate is None:
            return
        self._refill(now)
        self.tokens -= amount

    def wait_s(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` (at most the capacity) may be taken; 0 when it may now."""
        if self.rate is None or self.rate <= 0:
            return 0.0 if self.rate is None else float("inf")
        self._refill(now)
        missing = min(amount, self.capacity) - self.tokens
        return max(0.0, missing / self.rate)

    def _refill(self, now: float) -> None:
        if self.updated is None:
            self.updated = now
            self.tokens = self.capacity
            return
        if self.rate is not None and now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
        self.updated = max(self.updated, now)


class RouteThrottle:
    """A route's share of its throttle on one worker: a bucket for records and one for bytes.

    :meth:`records_allowed` says how many records the next batch may take (0: wait), :meth:`used`
    charges what a batch took.
    """

    def __init__(
        self, max_bytes_per_s: float | None, max_records_per_s: float | None, burst_s: float = DEFAULT_BURST_S
    ) -> None:
        self.records = TokenBucket(max_records_per_s, burst_s)
        self.bytes = TokenBucket(max_bytes_per_s, burst_s)

    def set_rates(self, max_bytes_per_s: float | None, max_records_per_s: float | None, now: float) -> None:
        self.records.set_rate(max_records_per_s, now)
        self.bytes.set_rate(max_bytes_per_s, now)

    def records_allowed(self, most: int, now: float) -> int:
        """At most ``most``; fewer as the records bucket allows; 0 while either bucket is empty."""
        byte_allowance = self.bytes.allowance(now)
        if byte_allowance is not None and byte_allowance <= 0:
            return 0
        record_allowance = self.records.allowance(now)
        if record_allowance is None:
            return most
        return min(most, int(record_allowance))

    def wait_s(self, now: float) -> float:
        """How long until the next batch may take at least one record."""
        return max(self.records.wait_s(1, now), self.bytes.wait_s(1, now))

    def used(self, records: int, size: int, now: float) -> None:
        self.records.spend(records, now)
        self.bytes.spend(size, now)
