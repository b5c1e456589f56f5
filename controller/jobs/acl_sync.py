"""The leader's ACL sync job: per route with ``sync_acls``, the source's READ and DESCRIBE ACLs on the
mirrored topics and on the route's groups, created on the destination under its topic names.

What is copied and how it is renamed: :mod:`common.core.acl_sync`. This module is the I/O: one
AdminClient per cluster (:mod:`common.kafka.acls`: describe on sources and destinations, list the
groups and create on destinations), and the route's source bindings (every operation) kept in
ZooKeeper (``acls/<route>``, fenced leader writes, only when they changed) for a failover with the
source gone (:mod:`controller.failover.acl_grant`). The sync only adds: nothing is deleted on the
destination, a binding removed at the source stays there.

States: per route, the last run's :class:`AclSyncResult` (``results``) and the last problem and
skipped bindings logged (a problem or a skipped binding is logged when it changes, not at every
run). A route with no mirrored topic (none yet, or failed over) is left alone: nothing read, the
remembered bindings kept. A cluster that fails (unreachable, no authorizer, the principal refused)
fails that route's run only; the next run tries again. Such a run, and one whose destination
refused bindings, counts once in ``failures`` (``ferry_controller_acl_sync_failures_total{route,
reason}``; the job itself does not raise, so the scheduler's job failures never show it), with the
reason ``refused`` when a cluster's authorizer refused Ferry's principal (``*_AUTHORIZATION_FAILED``:
it lacks ``Describe`` on the source or ``Alter`` on the destination cluster; grant it, or set the
route's ``sync_acls: false``), else ``failed``. Driven by one scheduler thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from prometheus_client import Counter

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import acl_sync
from ferry.common.core.acl_sync import Binding, Remembered, Skipped
from ferry.common.kafka import acls as kafka_acls
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.kafka.pool import ClientPool
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.lead.store import Op

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
# The reasons a run fails (the counter's ``reason`` label): an authorizer refused Ferry's principal, or anything else.
REFUSED, FAILED = "refused", "failed"


@dataclass(frozen=True)
class AclSyncResult:
    """One route's run: the bindings the destination should hold, those created now, those skipped
    (no counterpart under the route's naming) and those the destination refused (binding -> why);
    ``refused``: the run failed because a cluster's authorizer refused Ferry's principal."""

    route: str
    wanted: list[Binding] = field(default_factory=list)
    created: list[Binding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    failed: dict[Binding, str] = field(default_factory=dict)
    problem: str | None = None
    refused: bool = False


class AclSyncJob:
    """See the module docstring. ``topics``: route name -> its mirrored source topics (the ideal state);
    ``commit``: the leader's fenced write; ``failures``: the counter of failed runs, by route."""

    def __init__(
        self,
        *,
        config: FerryConfig,
        routes: Callable[[], list[RouteConfig]],
        topics: Callable[[], Mapping[str, set[str]]],
        zk: KazooClient,
        layout: ZkLayout,
        commit: Callable[[list[Op]], None],
        clock: Callable[[], float],
        failures: Counter | None = None,
    ) -> None:
        self._failures = failures
        self._routes = routes
        self._topics = topics
        self._zk = zk
        self._layout = layout
        self._commit = commit
        self._clock = clock
        self._admins: ClientPool[str] = ClientPool(lambda cluster: kafka_clients.admin(config.clusters[cluster]))
        self._remembered: dict[str, Remembered] = {}
        self._logged: dict[str, tuple[str | None, tuple[Skipped, ...]]] = {}
        self.results: dict[str, AclSyncResult] = {}

    def run(self) -> None:
        """One sync of every route with ``sync_acls`` that mirrors something."""
        mirrored = self._topics()
        for route in self._routes():
            names = mirrored.get(route.name)
            if not route.sync_acls or not names:
                continue
            result = self._sync(route, sorted(names))
            self.results[route.name] = result
            if self._failures is not None:
                # The route's series at 0 from its first run: its first failure is an increase.
                by_reason = {reason: self._failures.labels(route.name, reason) for reason in (REFUSED, FAILED)}
                if result.problem or result.failed:
                    by_reason[REFUSED if result.refused else FAILED].inc()
            self._log(result)

    def _sync(self, route: RouteConfig, topics: list[str]) -> AclSyncResult:
        source = self._admins[route.source]
        try:
            found = kafka_acls.describe(source, TIMEOUT_S)
            listed = kafka_acls.group_ids(source, TIMEOUT_S) if route.groups else []
        except (KafkaException, TimeoutError) as exc:
            failure = kafka_error(exc)
            return AclSyncResult(
                route.name,
                problem=f"reading the ACLs of source {route.source}: {failure}",
                refused=kafka_acls.refused(failure),
            )
        groups = [group for group in listed if route.wants_group(group)]
        mine = acl_sync.route_bindings(route, found, topics, groups)
        self._remember(route, Remembered(at=self._clock(), topics=topics, groups=groups, bindings=mine))
        plan = acl_sync.synced(route, mine, topics, groups)
        if not plan.bindings:
            return AclSyncResult(route.name, skipped=plan.skipped)
        destination = self._admins[route.destination]
        try:
            lacking = acl_sync.missing(plan.bindings, kafka_acls.describe(destination, TIMEOUT_S))
            outcome = kafka_acls.create(destination, lacking, TIMEOUT_S)
        except (KafkaException, TimeoutError) as exc:
            failure = kafka_error(exc)
            return AclSyncResult(
                route.name,
                plan.bindings,
                skipped=plan.skipped,
                problem=f"creating ACLs on destination {route.destination}: {failure}",
                refused=kafka_acls.refused(failure),
            )
        errors = {b: error for b, error in sorted(outcome.items()) if error is not None}
        return AclSyncResult(
            route.name,
            plan.bindings,
            created=sorted(b for b, error in outcome.items() if error is None),
            skipped=plan.skipped,
            failed={b: f"{error} ({error.name})" for b, error in errors.items()},
            refused=any(kafka_acls.refused(error) for error in errors.values()),
        )

    def _remember(self, route: RouteConfig, remembered: Remembered) -> None:
        """Keeps the route's source bindings in ZooKeeper when they changed (a fenced write)."""
        path = self._layout.acl_bindings(route.name)
        known = self._remembered.get(route.name)
        exists = known is not None
        if known is None:
            try:
                data, _ = self._zk.get(path)
                exists = True
                known = Remembered.from_bytes(data)
            except NoNodeError:
                pass
            except ValueError:
                log.warning("ACL sync of route %s: %s holds no remembered ACLs; written again", route.name, path)
        if remembered.same_as(known):
            self._remembered[route.name] = remembered
            return
        if not exists:
            self._zk.ensure_path(path.rsplit("/", 1)[0])
        op = (
            Op(OpKind.SET, path, remembered.to_bytes(), -1)
            if exists
            else Op(OpKind.CREATE, path, remembered.to_bytes())
        )
        self._commit([op])
        self._remembered[route.name] = remembered

    def _log(self, result: AclSyncResult) -> None:
        name = result.route
        for binding in result.created:
            log.info("ACL sync of route %s: created %s", name, binding.line())
        for binding, why in result.failed.items():
            log.warning("ACL sync of route %s: %s not created: %s", name, binding.line(), why)
        seen = (result.problem, tuple(result.skipped))
        if self._logged.get(name) == seen:
            return
        self._logged[name] = seen
        if result.problem:
            log.warning("ACL sync of route %s: %s (next run retries)", name, result.problem)
        for skipped in result.skipped:
            log.info("ACL sync of route %s: %s not synced: %s", name, skipped.binding.line(), skipped.why)

    def close(self) -> None:
        self._admins.clear()
