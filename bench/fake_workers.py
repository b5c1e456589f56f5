"""Fake Ferry workers for ``ferry bench controller``: the worker's ZooKeeper protocol, no Kafka.

A :class:`FakeWorker` is one kazoo session that does what ``worker/service.py`` does towards
the controller, instantly: it registers the ephemeral ``workers/live/<id>`` (a ``WorkerInfo``)
and ``workers/state/<id>`` (a ``WorkerStatus``), watches ``assignments/<id>`` with a
``DataWatch``, and on each assignment of a newer (or equal) generation reports exactly those
partitions ONLINE with that generation, so a partition the leader took away is released at once
(the handoff's step 1) and a new one is ONLINE at once. ``leave()`` does the SIGTERM path
(status ``leaving`` with nothing held, wait for an empty assignment, delete its nodes);
``kill()`` closes the session, like a crash the server noticed.

States of a fake worker: ``NEW -> RUNNING`` (:meth:`start`), ``RUNNING -> GONE`` (:meth:`kill`
or :meth:`leave`).

:func:`fleet_main` runs many of them in one process (``python -m ferry.bench.fake_workers`` is not
needed: the bench starts it with :mod:`multiprocessing`), so 2,000 sessions take a few
processes, not 2,000 threads in one. It reports, through a pipe, each worker's count of ONLINE
partitions whenever ZooKeeper acknowledged a new status, and takes commands (``kill``, ``join``,
``stop``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.recipe.watchers import DataWatch

from ferry.common.model import PartitionState, PartitionStatus, WorkerAssignment, WorkerInfo, WorkerStatus
from ferry.common.zk.layout import ZkLayout

# worker id, partitions ONLINE now, time.time() when ZooKeeper took the status
Report = Callable[[str, int, float], None]


class SharedHandler(SequentialThreadingHandler):
    """One kazoo handler (a callback and a completion thread) for every session of a process.

    kazoo gives each client its own handler, so 500 sessions in a process would run 1,500
    threads (and starve their own heartbeats on two cores). Sessions here only share the two
    dispatch threads (each keeps its connection thread); a client's ``start``/``stop`` calls
    ``handler.stop()``, which must not stop the others': it does nothing, and the threads end
    with the process (they are daemons).
    """

    def stop(self) -> None:
        return None


class FakeWorker:
    """See the module docstring."""

    def __init__(
        self,
        *,
        connect: str,
        layout: ZkLayout,
        worker_id: str,
        report: Report,
        session_timeout_s: float = 10.0,
        handler: SequentialThreadingHandler | None = None,
    ) -> None:
        self.worker_id = worker_id
        self.layout = layout
        self.state = "NEW"
        self.online = 0
        self.generation = 0
        self._report = report
        self._zk = KazooClient(hosts=connect, timeout=session_timeout_s, handler=handler)
        self._lock = threading.Lock()

    def start(self) -> None:
        self._zk.start(timeout=60)
        info = WorkerInfo(self.worker_id, socket.gethostname(), os.getpid())
        self._zk.create(self.layout.live_worker(self.worker_id), info.to_bytes(), ephemeral=True, makepath=True)
        status = self.layout.worker_state(self.worker_id)
        try:
            self._zk.create(status, WorkerStatus(0).to_bytes(), ephemeral=True, makepath=True)
        except NodeExistsError:
            self._zk.set(status, WorkerStatus(0).to_bytes())
        self.state = "RUNNING"
        DataWatch(self._zk, self.layout.assignment(self.worker_id), self._on_assignment)

    def _on_assignment(self, data: bytes | None, stat: Any) -> bool:
        # kazoo's callback thread: never block; the status write is asynchronous.
        if self.state != "RUNNING":
            return False
        assignment = WorkerAssignment.from_bytes(data)
        with self._lock:
            if data is not None and assignment.generation < self.generation:
                return True
            self.generation = assignment.generation
            status = WorkerStatus(
                assignment.generation, {p: PartitionStatus(PartitionState.ONLINE) for p in assignment.partitions}
            )
            count = len(assignment.partitions)
        written = self._zk.set_async(self.layout.worker_state(self.worker_id), status.to_bytes())
        written.rawlink(lambda result: self._written(result, count))
        return True

    def _written(self, result: Any, count: int) -> None:
        if result.successful():
            self.online = count
            self._report(self.worker_id, count, time.time())

    def kill(self) -> None:
        """Closes the session at once: the server deletes the ephemeral nodes, as after a crash."""
        self.state = "GONE"
        self._zk.stop()
        self._zk.close()
        self._report(self.worker_id, 0, time.time())

    def leave(self, wait_s: float = 10.0) -> None:
        """The SIGTERM path: released everything, says ``leaving``, waits for an empty assignment."""
        self._zk.set(self.layout.worker_state(self.worker_id), WorkerStatus(0, {}, leaving=True).to_bytes())
        self._report(self.worker_id, 0, time.time())
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                data, _ = self._zk.get(self.layout.assignment(self.worker_id))
            except NoNodeError:
                break
            if not WorkerAssignment.from_bytes(data).partitions:
                break
            time.sleep(0.1)
        self.state = "GONE"
        for path in (self.layout.live_worker(self.worker_id), self.layout.worker_state(self.worker_id)):
            with contextlib.suppress(NoNodeError):
                self._zk.delete(path)
        self._zk.stop()
        self._zk.close()


def start_all(workers: list[FakeWorker], parallel: int = 16) -> None:
    """Starts ``workers`` a few at a time (each start is a session handshake and two creates)."""
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda w: w.start(), workers))


def fleet_main(connect: str, root: str, worker_ids: list[str], session_timeout_s: float, conn: Connection) -> None:
    """One fleet process: starts ``worker_ids``, reports, obeys ``kill``/``join``/``leave``/``stop``."""
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    layout = ZkLayout(root)
    send_lock = threading.Lock()

    def report(worker_id: str, online: int, at: float) -> None:
        with send_lock:
            conn.send(("online", worker_id, online, at))

    handler = SharedHandler()
    workers = {
        w: FakeWorker(
            connect=connect,
            layout=layout,
            worker_id=w,
            report=report,
            session_timeout_s=session_timeout_s,
            handler=handler,
        )
        for w in worker_ids
    }
    start_all(list(workers.values()))
    with send_lock:
        conn.send(("ready", len(workers), time.time()))
    while True:
        command = conn.recv()
        kind, args = command[0], command[1:]
        if kind == "stop":
            break
        if kind == "kill":
            workers.pop(args[0]).kill()
        elif kind == "leave":
            workers.pop(args[0]).leave()
        elif kind == "join":
            worker = FakeWorker(
                connect=connect,
                layout=layout,
                worker_id=args[0],
                report=report,
                session_timeout_s=session_timeout_s,
                handler=handler,
            )
            workers[args[0]] = worker
            worker.start()
        with send_lock:
            conn.send(("done", kind, time.time()))
    for worker in workers.values():
        with contextlib.suppress(Exception):
            worker.kill()
    with send_lock:
        conn.send(("stopped", time.time()))
