"""What a failover grants on the destination: every ACL the source had on the route's topics and
groups, WRITE included (the producers and consumers move to the destination), renamed as the topics are
(:func:`common.core.acl_sync.failover_grants`).

Best effort: the bindings come from the source when it answers, else from what the leader's ACL sync
last read there (ZooKeeper ``acls/<route>``, :mod:`controller.jobs.acl_sync`); a destination that
refuses or does not answer leaves the failover done, with the reason in its report. Like the sync,
it only adds: nothing is deleted on the destination.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from confluent_kafka import KafkaException
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import acl_sync
from ferry.common.core.acl_sync import Binding, Remembered
from ferry.common.kafka import acls as kafka_acls
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.zk.layout import ZkLayout

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0


def grant_source_acls(
    config: FerryConfig, route: RouteConfig, topics: Iterable[str], zk: KazooClient, layout: ZkLayout
) -> dict[str, Any]:
    """Grants on the route's destination what the source had on ``topics`` (source names) and the
    route's groups; returns the report's ``acls`` entry: where the bindings came from (``source``,
    ``remembered`` or ``none``), those granted now, how many were there already, those skipped (no
    counterpart under the route's naming) and the errors."""
    names = sorted(topics)
    report: dict[str, Any] = {"from": "none", "granted": [], "alreadyThere": 0, "skipped": [], "errors": []}
    source = kafka_clients.admin(config.clusters[route.source])
    try:
        bindings = kafka_acls.describe(source, TIMEOUT_S)
        listed = kafka_acls.group_ids(source, TIMEOUT_S) if route.groups else []
        groups = [group for group in listed if route.wants_group(group)]
        report["from"] = "source"
    except (KafkaException, TimeoutError) as exc:
        report["errors"].append(f"reading the ACLs of source {route.source}: {kafka_error(exc)}")
        remembered = _remembered(zk, layout, route)
        if remembered is None:
            return report
        bindings, groups = remembered.bindings, remembered.groups
        report["from"] = "remembered"
        report["rememberedAt"] = remembered.at
    plan = acl_sync.failover_grants(route, bindings, names, groups)
    report["skipped"] = [{**_row(s.binding), "why": s.why} for s in plan.skipped]
    destination = kafka_clients.admin(config.clusters[route.destination])
    try:
        lacking = acl_sync.missing(plan.bindings, kafka_acls.describe(destination, TIMEOUT_S))
        outcome = kafka_acls.create(destination, lacking, TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        report["errors"].append(f"granting on destination {route.destination}: {kafka_error(exc)}")
        return report
    report["alreadyThere"] = len(plan.bindings) - len(lacking)
    report["granted"] = [_row(b) for b, error in sorted(outcome.items()) if error is None]
    report["errors"] += [f"{b.line()}: {error}" for b, error in sorted(outcome.items()) if error is not None]
    for binding in sorted(b for b, error in outcome.items() if error is None):
        log.info("failover of route %s: granted %s on %s", route.name, binding.line(), route.destination)
    return report


def _remembered(zk: KazooClient, layout: ZkLayout, route: RouteConfig) -> Remembered | None:
    """What the leader's ACL sync last read at the route's source; None when it never did."""
    try:
        data, _ = zk.get(layout.acl_bindings(route.name))
        return Remembered.from_bytes(data)
    except (NoNodeError, ValueError):
        return None


def _row(binding: Binding) -> dict[str, str]:
    """A binding in the failover report (camelCase, as the report's other fields)."""
    row = asdict(binding)
    return {
        "resourceType": row["resource_type"],
        "name": row["name"],
        "pattern": row["pattern"],
        "principal": row["principal"],
        "host": row["host"],
        "operation": row["operation"],
        "permission": row["permission"],
    }
