"""The leader's side of failover: a failed-over route is copied by nobody, and the last-seen
source log ends are kept in ZooKeeper for an unplanned failover's RPO.

- :func:`stop_routes` (observer job): deletes the ideal states of every route whose failover state is
  stopped (fenced leader writes, as ``DELETE /topics`` does), so workers release its partitions; the
  observer does not whitelist a stopped route's topics again (:func:`stopped_routes`).
- :func:`keep_source_ends` (lag job, at ``lag_interval_s``): writes each route's source log ends, and
  the rate each partition grew at, to ``source_ends/<route>`` when they changed, so the RPO is known
  with the source gone (:func:`controller.failover.states.next_source_ends` says when and what).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from pydantic import ValidationError

from ferry.common.model import PartitionKey, TopicKey
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import ControllerError
from ferry.controller.failover import states as fsm
from ferry.controller.failover.document import FailoverDocument
from ferry.controller.failover.states import partition_key
from ferry.controller.lead.reconciler import Reconciler
from ferry.controller.lead.store import Op
from ferry.controller.lead.topic_writes import TopicChange

log = logging.getLogger(__name__)


def read_state(zk: KazooClient, layout: ZkLayout, route: str) -> tuple[FailoverDocument, int]:
    """The route's failover document and its node's version; an ``ACTIVE`` one and -1 when there is no
    node. A node that is not what Ferry writes: :class:`controller.errors.ControllerError`, in one line."""
    path = layout.failover(route)
    try:
        data, stat = zk.get(path)
    except NoNodeError:
        return FailoverDocument.active(route), -1
    try:
        return FailoverDocument.from_bytes(data), stat.version
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise ControllerError(
            f"{path} holds no failover document Ferry can read ({where}: {first['msg']}); "
            f"see it with: ferry zk get failover/{route}"
        ) from None


def stopped_routes(zk: KazooClient, layout: ZkLayout) -> set[str]:
    """Routes no worker may copy now (their failover state is stopped)."""
    try:
        names = zk.get_children(layout.failovers)
    except NoNodeError:
        return set()
    return {name for name in names if fsm.is_stopped(read_state(zk, layout, name)[0].state)}


def stop_routes(zk: KazooClient, layout: ZkLayout, reconciler: Reconciler) -> set[str]:
    """Drops the ideal states of stopped routes; returns the stopped routes."""
    stopped = stopped_routes(zk, layout)
    doomed = [key for key in reconciler.ideal_states() if key.route in stopped]
    if not doomed:
        return stopped
    with reconciler.topic_writer(beside_bulk=True) as writer:  # a reconcile follows: the workers let go
        writer.commit(
            [Op(OpKind.DELETE, layout.topic(k.route, k.topic)) for k in doomed],
            [TopicChange(TopicKey(k.route, k.topic), None, 0) for k in doomed],
        )
    log.info("failover: stopped copying %d topics of routes %s", len(doomed), sorted(stopped))
    return stopped


def keep_source_ends(
    zk: KazooClient, layout: ZkLayout, reconciler: Reconciler, samples: Mapping[PartitionKey, Any], now: float
) -> None:
    """Writes each route's sampled source log ends and their produce rates (only when either changed), fenced."""
    by_route: dict[str, dict[str, int]] = {}
    for key, sample in samples.items():
        by_route.setdefault(key.route, {})[partition_key(key.topic, key.partition)] = sample.end
    ops = []
    for route, ends in by_route.items():
        path = layout.source_ends(route)
        try:
            data = zk.get(path)[0]
        except NoNodeError:
            data = None
        try:
            old = fsm.SourceEndsPayload.from_bytes(data)
        except ValueError as exc:  # not what Ferry writes: written anew, the RPO needs it right
            log.warning("failover: %s holds no source ends Ferry can read (%s): writing it anew", path, exc)
            old = None
        node = fsm.next_source_ends(old, ends, now)
        if node is None:
            continue
        if data is None:
            reconciler.ensure_path(path.rsplit("/", 1)[0])
            ops.append(Op(OpKind.CREATE, path, node.to_bytes()))
        else:
            ops.append(Op(OpKind.SET, path, node.to_bytes(), -1))
    if ops:
        reconciler.commit(ops)
