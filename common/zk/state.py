"""Reads Ferry's state from ZooKeeper: the one reader that the controller, ``ferry zk`` and the
Spark validation share.

Paths come from :class:`common.zk.layout.ZkLayout`, payloads from :mod:`common.model`. A node
deleted between listing and reading is skipped, never an error. Writes are the leader's alone
(``controller.lead.store.Store`` extends this reader with its fenced transactions).

The nodes of a folder are read pipelined (kazoo's ``get_async`` for all of them, then the
answers): 20,000 topic nodes cost one round trip's latency plus their bytes, not 20,000 round
trips. ``reads`` counts the requests sent, for the controller's metrics.
"""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ferry.common.errors import NewerLayoutError
from ferry.common.model import (
    ExternalView,
    IdealState,
    LayoutMarker,
    TopicKey,
    WorkerInfo,
    WorkerStatus,
    newer_layout_problem,
)
from ferry.common.zk.layout import ZkLayout

# How many reads may be in flight at once (bounds the client's memory, not the server's work).
PIPELINE_DEPTH = 1000


class StateReader:
    def __init__(self, zk: KazooClient, layout: ZkLayout) -> None:
        self.zk = zk
        self.layout = layout
        self.reads = 0

    def children(self, path: str) -> list[str]:
        self.reads += 1
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def data(self, path: str) -> tuple[bytes, int] | None:
        """A node's data and version, or None when it does not exist."""
        self.reads += 1
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    def data_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes, int]]:
        """Path -> (data, version) of every node of ``paths`` that exists, read pipelined."""
        result: dict[str, tuple[bytes, int]] = {}
        pending = list(paths)
        for start in range(0, len(pending), PIPELINE_DEPTH):
            batch = [(path, self.zk.get_async(path)) for path in pending[start : start + PIPELINE_DEPTH]]
            self.reads += len(batch)
            for path, answer in batch:
                try:
                    data, stat = answer.get()
                except NoNodeError:
                    continue
                result[path] = (data, stat.version)
        return result

    def _folder(self, folder: str) -> dict[str, tuple[bytes, int]]:
        """Child name -> (data, version) of every child of ``folder``."""
        names = self.children(folder)
        got = self.data_many(f"{folder}/{name}" for name in names)
        return {name: got[f"{folder}/{name}"] for name in names if f"{folder}/{name}" in got}

    def layout_marker(self) -> LayoutMarker | None:
        """The root's layout marker; None when there is none yet."""
        got = self.data(self.layout.layout_marker)
        return LayoutMarker.from_bytes(got[0]) if got else None

    def check_layout(self, ferry: str) -> LayoutMarker | None:
        """The root's layout marker, after making sure this Ferry (release ``ferry``) may work on it.

        Raises :class:`common.errors.NewerLayoutError` when a newer Ferry wrote a layout this one
        does not know. Every process checks once it is connected, before it reads or writes anything
        else under the root.
        """
        marker = self.layout_marker()
        problem = newer_layout_problem(marker, self.layout.root, ferry)
        if problem:
            raise NewerLayoutError(problem)
        return marker

    def live_workers(self) -> dict[str, WorkerInfo]:
        return {
            worker: WorkerInfo.from_bytes(data) or WorkerInfo(worker, "?", 0)
            for worker, (data, _) in self._folder(self.layout.live_workers).items()
        }

    def statuses(self) -> dict[str, WorkerStatus]:
        return {
            worker: WorkerStatus.from_bytes(data)
            for worker, (data, _) in self._folder(self.layout.worker_states).items()
        }

    def _routes(self, folder: str, routes: Iterable[str] | None) -> list[str]:
        return self.children(folder) if routes is None else list(routes)

    def ideal_states(
        self, routes: Iterable[str] | None = None
    ) -> tuple[dict[TopicKey, IdealState], dict[TopicKey, int]]:
        """Every ideal state (of ``routes``, or all) and its node version."""
        ideal, versions = {}, {}
        for route in self._routes(self.layout.topics, routes):
            for topic, (data, version) in self._folder(self.layout.route_topics(route)).items():
                key = TopicKey(route, topic)
                ideal[key] = IdealState.from_bytes(data)
                versions[key] = version
        return ideal, versions

    def ideal_state(self, route: str, topic: str) -> IdealState | None:
        got = self.data(self.layout.topic(route, topic))
        return IdealState.from_bytes(got[0]) if got else None

    def external_views(self, routes: Iterable[str] | None = None) -> dict[TopicKey, ExternalView]:
        views = {}
        for route in self._routes(self.layout.external, routes):
            for topic, (data, _) in self._folder(self.layout.route_external(route)).items():
                views[TopicKey(route, topic)] = ExternalView.from_bytes(data)
        return views

    def external_view(self, route: str, topic: str) -> ExternalView | None:
        got = self.data(self.layout.external_topic(route, topic))
        return ExternalView.from_bytes(got[0]) if got else None
