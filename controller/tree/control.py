"""The distribution tree's control (:mod:`common.core.tree`): targets, switches, probes and the view.

Owns ``tree/targets`` (distributor -> leaf) and, on the leader, when each leaf was first seen
unreachable. The leader writes ``tree/targets`` as it writes everything, in a fenced transaction
(:meth:`controller.lead.leadership.Leadership.commit`) that also checks the node's version: its own
switches and an operator's may race, and a controller that lost the lead must not write at all.
Per leaf: ``reachable -> unreachable`` (a probe failed; remembered with the time) ->
``reachable`` (a probe answered). A distributor whose target stayed unreachable for
``tree.switch_after_s`` is switched to another leaf of its subtree (:func:`common.core.tree.switches`).
The ``/tree`` view is data (:class:`TreeView`); :mod:`controller.api.rest_json` shapes its JSON.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import tree
from ferry.common.model import decode, encode
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import BadRequest, Conflict, NotFound
from ferry.controller.kafka_meta import ClusterMetadata
from ferry.controller.lead.leadership import Leadership
from ferry.controller.lead.store import Op, WriteConflict

log = logging.getLogger(__name__)

COPYING = "copying"
TARGET_UNREACHABLE = "target unreachable"


@dataclass(frozen=True)
class DistributorRow:
    """One derived distributor, where it copies to now and whether that target answers."""

    distributor: tree.Distributor
    target: str  # the leaf it copies to (switched or configured)
    switched: bool  # ``target`` comes from ``tree/targets``
    state: str  # COPYING or TARGET_UNREACHABLE


@dataclass(frozen=True)
class TreeView:
    """The distribution tree: its layout, its distributors and the leaves the leader finds unreachable."""

    layout: str
    switch_after_s: float
    distributors: list[DistributorRow]
    unreachable: list[str]  # sorted; empty on a standby (only the leader probes)
    table: str  # the same, as a text table (``GET /tree?format=text``, ``ferry tree``)


class TreeControl:
    """See the module docstring; ``reset`` at each lead, ``check_tree`` is the leader's ``tree`` job."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        zk: KazooClient,
        layout: ZkLayout,
        leadership: Leadership,
        kafka: ClusterMetadata,
        clock: Callable[[], float],
    ) -> None:
        self.config = config
        self._zk = zk
        self._layout = layout
        self._leadership = leadership
        self._kafka = kafka
        self._clock = clock
        self._unreachable_since: dict[str, float] = {}  # tree leaf -> first seen unreachable (leader only)

    def reset(self) -> None:
        self._unreachable_since = {}

    def effective_routes(self) -> list[RouteConfig]:
        """The configured routes with the switched tree targets applied."""
        switched = self.switched_targets()[0] if self.config.tree is not None else {}
        return self.config.with_targets(switched)

    def switched_targets(self) -> tuple[dict[str, str], int | None]:
        """ZooKeeper's ``tree/targets`` (distributor -> leaf) and its version (None: no node yet)."""
        try:
            data, stat = self._zk.get(self._layout.tree_targets)
        except NoNodeError:
            return {}, None
        return {str(k): str(v) for k, v in (decode(data) or {}).items()}, stat.version

    def switch_target(self, distributor: str, leaf: str, why: str) -> dict[str, str]:
        """Points ``distributor`` at ``leaf`` of its subtree; workers move its partitions there."""
        if self.config.tree is None:
            raise NotFound("no distribution tree is configured")
        derived = {d.name: d for d in tree.distributors(tree.parse(self.config.tree.layout))}
        if distributor not in derived:
            raise NotFound(f"no distributor {distributor!r} (distributors: {sorted(derived)})")
        if leaf not in derived[distributor].subtree:
            raise BadRequest(f"{leaf!r} is not a leaf of {distributor}'s subtree {list(derived[distributor].subtree)}")
        self._leadership.require_leader()  # a standby's REST forwards the switch to the leader
        path = self._layout.tree_targets
        self._zk.ensure_path(path.rsplit("/", 1)[0])
        for _ in range(5):  # the leader's own switches and an operator's may race: read again, retry
            switched, version = self.switched_targets()
            updated = {**switched, distributor: leaf}
            data = encode(updated)
            op = Op(OpKind.CREATE, path, data) if version is None else Op(OpKind.SET, path, data, version)
            try:
                self._leadership.commit([op])  # NotLeader when this controller does not lead (any more)
            except WriteConflict:
                continue
            log.warning("distributor %s now copies to %s (%s)", distributor, leaf, why)
            return updated
        raise Conflict("the tree's targets kept changing; try again")

    def tree_view(self) -> TreeView:
        """The derived distributors, their targets and state (REST ``/tree``, ``ferry tree``)."""
        if self.config.tree is None:
            raise NotFound("no distribution tree is configured")
        root = tree.parse(self.config.tree.layout)
        derived = tree.distributors(root)
        switched, _ = self.switched_targets()
        routes = {r.name: r for r in self.config.with_targets(switched)}
        unreachable = dict(self._unreachable_since) if self._leadership.is_leader() else {}
        rows: list[DistributorRow] = []
        states: dict[str, str] = {}
        for d in derived:
            target = routes[d.name].destination
            state = states[d.name] = TARGET_UNREACHABLE if target in unreachable else COPYING
            rows.append(DistributorRow(d, target, d.name in switched, state))
        return TreeView(
            root.render(),
            self.config.tree.switch_after_s,
            rows,
            sorted(unreachable),
            tree.table(derived, {d.name: routes[d.name].destination for d in derived}, states),
        )

    def check_tree(self) -> None:
        """The leader's tree job: probes every leaf; switches distributors whose target is down too long."""
        assert self.config.tree is not None
        root = tree.parse(self.config.tree.layout)
        now = self._clock()
        for leaf in root.leaves():
            if self._kafka.reachable(leaf):
                if self._unreachable_since.pop(leaf, None) is not None:
                    log.info("tree: cluster %s is reachable again", leaf)
            elif leaf not in self._unreachable_since:
                log.warning("tree: cluster %s is unreachable", leaf)
                self._unreachable_since[leaf] = now
        if not self.config.tree.switch_after_s:
            return
        switched, _ = self.switched_targets()
        targets = {r.name: r.destination for r in self.config.with_targets(switched) if r.distributor}
        decided = tree.switches(
            tree.distributors(root), targets, self._unreachable_since, now, self.config.tree.switch_after_s
        )
        for name, leaf in sorted(decided.items()):
            self.switch_target(
                name, leaf, f"{targets[name]} unreachable for {now - self._unreachable_since[targets[name]]:.0f}s"
            )
