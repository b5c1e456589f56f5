"""The reconciler's lock (:class:`LeaderStateLock`): re-entrant, and whoever takes it first hands the
leader state what bulk whitelisting wrote without it (the reconciler's pending topics).

States: free -> held (depth 1: the hand-over runs) -> held again by the same thread (depth > 1:
nothing runs) -> free.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class LeaderStateLock:
    """The reconciler's lock: a re-entrant lock that, once taken, hands the leader state what was
    whitelisted without it (``on_acquire``), so whoever holds it sees every topic written so far."""

    def __init__(self, on_acquire: Callable[[], None]) -> None:
        self._lock = threading.RLock()
        self._on_acquire = on_acquire
        self._depth = 0  # changed only by the thread holding the lock

    def __enter__(self) -> LeaderStateLock:
        self._lock.acquire()
        self._depth += 1
        if self._depth == 1:  # not inside a holder's work (a reconcile between its plan and its writes)
            try:
                self._on_acquire()
            except BaseException:
                self.__exit__()
                raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        self._lock.release()
