"""The newest value of a watched ZooKeeper node, handed from kazoo's watch thread to the copy loop.

kazoo runs every watch callback on one thread, which must never block: a callback only stores what
it read and wakes the copy loop, which picks the value up on its next pass. Only the newest value
matters (the copy loop applies whole states, level-triggered), so a value the loop has not taken
yet is simply replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Mailbox(Generic[T]):
    """One slot for the newest value, shared by a watch thread (:meth:`put`) and the copy loop
    (:meth:`take`), plus the wake event the copy loop waits on (shared by all of its mailboxes).

    States::

        EMPTY -> FULL    put stored a value (and set the wake event)
        FULL  -> FULL    put replaced the value not taken yet (the newest wins)
        FULL  -> EMPTY   take returned the value
        EMPTY -> EMPTY   take returned None (nothing new)

    The last value put is kept after it was taken, for :meth:`put`'s ``replaces`` check.
    """

    def __init__(self, wake: threading.Event) -> None:
        self._wake = wake
        self._lock = threading.Lock()
        self._last: T | None = None
        self._full = False

    def put(self, value: T, replaces: Callable[[T], bool] | None = None) -> None:
        """Stores ``value`` and wakes the copy loop. With ``replaces``, a value is stored only when
        ``replaces(last)`` is true of the last value put (an older generation arriving late is
        dropped); the first value is always stored."""
        with self._lock:
            if replaces is not None and self._last is not None and not replaces(self._last):
                return
            self._last = value
            self._full = True
        self._wake.set()

    def take(self) -> T | None:
        """The value put since the last call, or None when nothing new came."""
        with self._lock:
            if not self._full:
                return None
            self._full = False
            return self._last
