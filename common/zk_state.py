"""Reads Ferry's state from ZooKeeper: the one reader that the controller, ``ferry zk`` and the
Spark validation share.

Paths come from :class:`common.zk_layout.ZkLayout`, payloads from :mod:`common.model`. A node
deleted between listing and reading is skipped, never an error. Writes are the leader's alone
(``controller.store.Store`` extends this reader with its fenced transactions).
"""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from common.model import ExternalView, IdealState, TopicKey, WorkerInfo, WorkerStatus
from common.zk_layout import ZkLayout


class StateReader:
    def __init__(self, zk: KazooClient, layout: ZkLayout) -> None:
        self.zk = zk
        self.layout = layout

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def data(self, path: str) -> tuple[bytes, int] | None:
        """A node's data and version, or None when it does not exist."""
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return data, stat.version

    def live_workers(self) -> dict[str, WorkerInfo]:
        live = {}
        for worker in self.children(self.layout.live_workers):
            got = self.data(self.layout.live_worker(worker))
            if got is not None:
                live[worker] = WorkerInfo.from_bytes(got[0]) or WorkerInfo(worker, "?", 0)
        return live

    def statuses(self) -> dict[str, WorkerStatus]:
        result = {}
        for worker in self.children(self.layout.worker_states):
            got = self.data(self.layout.worker_state(worker))
            if got is not None:
                result[worker] = WorkerStatus.from_bytes(got[0])
        return result

    def _routes(self, folder: str, routes: Iterable[str] | None) -> list[str]:
        return self.children(folder) if routes is None else list(routes)

    def ideal_states(
        self, routes: Iterable[str] | None = None
    ) -> tuple[dict[TopicKey, IdealState], dict[TopicKey, int]]:
        """Every ideal state (of ``routes``, or all) and its node version."""
        ideal, versions = {}, {}
        for route in self._routes(self.layout.topics, routes):
            for topic in self.children(self.layout.route_topics(route)):
                got = self.data(self.layout.topic(route, topic))
                if got is not None:
                    key = TopicKey(route, topic)
                    ideal[key] = IdealState.from_bytes(got[0])
                    versions[key] = got[1]
        return ideal, versions

    def ideal_state(self, route: str, topic: str) -> IdealState | None:
        got = self.data(self.layout.topic(route, topic))
        return IdealState.from_bytes(got[0]) if got else None

    def external_views(self, routes: Iterable[str] | None = None) -> dict[TopicKey, ExternalView]:
        views = {}
        for route in self._routes(self.layout.external, routes):
            for topic in self.children(self.layout.route_external(route)):
                got = self.data(self.layout.external_topic(route, topic))
                if got is not None:
                    views[TopicKey(route, topic)] = ExternalView.from_bytes(got[0])
        return views

    def external_view(self, route: str, topic: str) -> ExternalView | None:
        got = self.data(self.layout.external_topic(route, topic))
        return ExternalView.from_bytes(got[0]) if got else None
