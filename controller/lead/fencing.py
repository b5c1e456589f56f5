"""Fences the transactional writers of workers that lost their partitions, before anyone else gets them.

A worker of an exactly-once route writes through a transactional producer whose id is the route's
``transactional_id(worker)`` (:meth:`common.config.RouteConfig.transactional_id`). Before the leader
writes a move of a partition that a worker no longer live held, was assigned or had not acknowledged
giving up, it fences that worker's writer of the partition's route on the route's destination
(:func:`common.kafka.clients.fence_writer`, as Kafka Connect fences a previous generation of tasks):
the old writer's open transaction is aborted and nothing it writes afterwards ever commits, however
long it was paused or cut off from ZooKeeper. The ZooKeeper write that gives the partitions away then
checks that the worker has not registered again meanwhile (:meth:`controller.lead.store.Store.commit`'s
``absent``), so a worker that comes back reads the new assignment before it writes with a new writer.

Every write that needs a fence gets its own, and nothing is remembered between writes: between two
reconciles a worker can register again (its new writer's ``init_transactions`` takes over the
transactional id) and lose its session again before the leader ever sees it live, so a fence from an
earlier write proves nothing about the writer that runs now. A plan names a worker to fence only
when a write moves partitions it held, was granted or had not acknowledged giving up
(:mod:`common.core.handoff`), so fences stay as rare as those moves.

A distribution tree's distributor whose target was switched writes to its new leaf: its writer is
fenced there (``effective_routes``), since the switch moved the route's copies and the old leaf is
usually the one that stopped answering.

A fence that fails (the destination does not answer) raises :class:`ControllerError`: the reconcile
writes nothing and runs again (the partitions wait where they are).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.controller.errors import ControllerError

log = logging.getLogger(__name__)

# How long one fence may wait for the destination's transaction coordinator.
FENCE_TIMEOUT_S = 15.0

FenceWriter = Callable[[Mapping[str, Any], str, float], None]


class WriterFencer:
    """The leader's fencing of lost workers' writers (stateless: see the module docstring)."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        fence_writer: FenceWriter = kafka_clients.fence_writer,
        timeout_s: float = FENCE_TIMEOUT_S,
        effective_routes: Callable[[], Iterable[RouteConfig]] | None = None,
    ) -> None:
        """``effective_routes``: the routes as the workers copy them now (a distribution tree's switched
        targets applied); by default the configured ones."""
        self._config = config
        self._effective_routes = effective_routes or (lambda: config.routes)
        self._fence_writer = fence_writer
        self._timeout_s = timeout_s

    def fence(self, writers: Mapping[str, Collection[str]]) -> None:
        """Fences each worker's writers of the exactly-once routes among ``writers`` (worker -> route
        names), on each route's destination as the workers copy it now. Raises :class:`ControllerError`
        when a destination does not answer."""
        effective = {route.name: route for route in self._effective_routes()}
        for worker, routes in sorted(writers.items()):
            for name in sorted(routes):
                route = effective.get(name)
                if route is None or not route.exactly_once:
                    continue
                try:
                    self._fence_writer(
                        self._config.clusters[route.destination], route.transactional_id(worker), self._timeout_s
                    )
                except KafkaException as exc:
                    raise ControllerError(
                        f"fencing worker {worker}'s writer of route {name} on {route.destination}: {kafka_error(exc)}"
                    ) from None
                log.info("fenced worker %s's writer of route %s before moving its partitions", worker, name)
