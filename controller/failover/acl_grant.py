"""What a failover grants on the destination: every ACL the source had on the route's topics and
groups, WRITE included (the producers and consumers move to the destination), renamed as the topics are
(:func:`common.core.acl_sync.failover_grants`); and what the route's restore takes back.

Best effort: the bindings come from the source when it answers, else from what the leader's ACL sync
last read there (ZooKeeper ``acls/<route>``, :mod:`controller.jobs.acl_sync`); a destination that
refuses or does not answer leaves the failover done, with the reason in its report. The grant only
adds what the destination lacks, and the report names exactly those bindings (``granted``), which the
failover keeps in its state (:mod:`controller.failover.workflow`). :func:`revoke_grants` deletes
exactly those, nothing else, when the route is restored (the producers are back on the source): a
binding the destination held before the failover, or one the periodic sync created, is never in the list.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import asdict

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
from ferry.controller.errors import Unavailable
from ferry.controller.failover.document import AclGrants, AclRevocations, BindingRow, SkippedBinding

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0


def grant_source_acls(
    config: FerryConfig,
    route: RouteConfig,
    topics: Iterable[str],
    zk: KazooClient,
    layout: ZkLayout,
    *,
    granting: Iterable[Binding] = (),
    before_granting: Callable[[list[Binding]], None] | None = None,
) -> AclGrants:
    """Grants on the route's destination what the source had on ``topics`` (source names) and the
    route's groups; returns the report's ``acls`` entry: the destination, where the bindings came from
    (``source``, ``remembered`` or ``none``), those this failover granted, how many were there already,
    those skipped (no counterpart under the route's naming) and the errors.

    ``before_granting`` is called with the bindings about to be created, before they are: the caller
    writes them down. ``granting``: what an earlier attempt of the same failover wrote down so; those
    the destination holds now were granted by this failover and count as ``granted``, not
    ``alreadyThere``."""
    names = sorted(topics)
    report = AclGrants(destination=route.destination, from_="none", granted=[], already_there=0, skipped=[], errors=[])
    source = kafka_clients.admin(config.clusters[route.source])
    try:
        bindings = kafka_acls.describe(source, TIMEOUT_S)
        listed = kafka_acls.group_ids(source, TIMEOUT_S) if route.groups else []
        groups = [group for group in listed if route.wants_group(group)]
        report = report.model_copy(update={"from_": "source"})
    except (KafkaException, TimeoutError) as exc:
        report = report.model_copy(
            update={"errors": [f"reading the ACLs of source {route.source}: {kafka_error(exc)}"]}
        )
        remembered = _remembered(zk, layout, route)
        if remembered is None:
            return report
        bindings, groups = remembered.bindings, remembered.groups
        report = report.model_copy(update={"from_": "remembered", "remembered_at": remembered.at})
    plan = acl_sync.failover_grants(route, bindings, names, groups)
    skipped = [SkippedBinding(**asdict(s.binding), why=s.why) for s in plan.skipped]
    report = report.model_copy(update={"skipped": skipped})
    destination = kafka_clients.admin(config.clusters[route.destination])
    try:
        present = set(kafka_acls.describe(destination, TIMEOUT_S))
        lacking = acl_sync.missing(plan.bindings, present)
        if lacking and before_granting is not None:
            before_granting(lacking)
        outcome = kafka_acls.create(destination, lacking, TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        error = f"granting on destination {route.destination}: {kafka_error(exc)}"
        return report.model_copy(update={"errors": [*report.errors, error]})
    earlier = sorted(set(granting) & present & set(plan.bindings))  # an earlier attempt of this failover's
    created = sorted(b for b, error in outcome.items() if error is None)
    for binding in created:
        log.info("failover of route %s: granted %s on %s", route.name, binding.line(), route.destination)
    return report.model_copy(
        update={
            "already_there": len(plan.bindings) - len(lacking) - len(earlier),
            "granted": rows({*earlier, *created}),
            "errors": [
                *report.errors,
                *(f"{b.line()}: {error}" for b, error in sorted(outcome.items()) if error is not None),
            ],
        }
    )


def revoke_grants(config: FerryConfig, route: RouteConfig, granted: AclGrants | None) -> AclRevocations | None:
    """Deletes on the destination exactly the bindings a failover's report says it granted (``granted``,
    the report's ``acls`` entry); None when it granted none. A binding the destination's authorizer
    refuses to delete (Ferry's principal may not) is an error of the answer: remove it by hand. A
    destination that does not answer raises :class:`controller.errors.Unavailable`, nothing changed: retry."""
    if granted is None or not granted.granted:
        return None
    bindings = [row.binding() for row in granted.granted]
    cluster = granted.destination or route.destination
    try:
        outcome = kafka_acls.delete(kafka_clients.admin(config.clusters[cluster]), bindings, TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        raise Unavailable(
            f"route {route.name}: revoking the ACLs its failover granted on {cluster}: {kafka_error(exc)}; retry"
        ) from None
    lasting = {b: error for b, error in outcome.items() if error is not None and not kafka_acls.refused(error)}
    if lasting:
        first, error = sorted(lasting.items())[0]
        raise Unavailable(
            f"route {route.name}: revoking {first.line()} on {cluster}: {error}; retry (nothing else changed)"
        )
    revoked = sorted(b for b, error in outcome.items() if error is None)
    refused = {b: error for b, error in sorted(outcome.items()) if error is not None}
    for binding in revoked:
        log.info("restore of route %s: revoked %s on %s (its failover granted it)", route.name, binding.line(), cluster)
    for binding, error in refused.items():
        log.warning(
            "restore of route %s: %s stays on %s: %s (remove it by hand: kafka-acls.sh --remove)",
            route.name,
            binding.line(),
            cluster,
            error,
        )
    return AclRevocations(
        destination=cluster, revoked=rows(revoked), errors=[f"{b.line()}: {error}" for b, error in refused.items()]
    )


def _remembered(zk: KazooClient, layout: ZkLayout, route: RouteConfig) -> Remembered | None:
    """What the leader's ACL sync last read at the route's source; None when it never did."""
    try:
        data, _ = zk.get(layout.acl_bindings(route.name))
        return Remembered.from_bytes(data)
    except (NoNodeError, ValueError):
        return None


def rows(bindings: Iterable[Binding]) -> list[BindingRow]:
    """Bindings as a failover report's rows, sorted."""
    return [BindingRow.of(b) for b in sorted(bindings)]
