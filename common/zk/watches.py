"""ZooKeeper watch recipes beyond kazoo's own: :func:`follow_pipelined`.

kazoo's ``DataWatch`` reads a node again on kazoo's one event thread and waits for the answer, so
2,000 nodes changing at once are 2,000 round trips one after another. :func:`follow_pipelined`
only sends the read and records the answer when it arrives: the reads are in flight together.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

RETRY_READ_S = 1.0


def follow_pipelined(
    zk: KazooClient, path: str, current: Callable[[], bool], on_data: Callable[[bytes | None], None]
) -> None:
    """Calls ``on_data`` with the node's data at every change (None: deleted) while ``current()``.

    A notification only sends ``get_async`` (with the next watch); the answer calls ``on_data``
    when it arrives (on kazoo's thread). A deleted node is followed with ``exists_async`` until it
    comes back. A read that failed (the connection dropped) is sent again ``RETRY_READ_S`` later,
    while ``current()``: a lost session ends the caller's interest anyway.
    """

    def on_event(event: Any) -> None:  # kazoo's event thread: only send the next read
        if current():
            fetch()

    def fetch() -> None:
        if not current():
            return
        try:
            zk.get_async(path, watch=on_event).rawlink(on_result)
        except KazooException:
            threading.Timer(RETRY_READ_S, fetch).start()

    def on_result(result: Any) -> None:
        if not current():
            return
        try:
            data, _ = result.get()
        except NoNodeError:
            data = None
            zk.exists_async(path, watch=on_event).rawlink(on_exists)
        except KazooException:
            threading.Timer(RETRY_READ_S, fetch).start()
            return
        on_data(data)

    def on_exists(result: Any) -> None:
        with contextlib.suppress(KazooException):
            if current() and result.get() is not None:
                fetch()  # it came back between the read and the watch

    fetch()
