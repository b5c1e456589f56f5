"""Kafka ACL bindings in and out of a cluster (AdminClient ``describe_acls``, ``create_acls`` and
``delete_acls``), as the plain :class:`common.core.acl_sync.Binding` the pure core computes with; and a
cluster's group ids.

Describing ACLs needs ``Describe`` on the cluster resource, creating and deleting them ``Alter`` on it.
A client without ``Describe`` gets an empty answer, not an error (librdkafka drops the broker's
CLUSTER_AUTHORIZATION_FAILED); a cluster without an authorizer answers with an error
(SECURITY_DISABLED), raised as ``KafkaException`` like every other failure. A binding the cluster
refuses to create or delete comes back as its :class:`common.kafka.errors.KafkaFailure`
(:func:`refused`: the principal may not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ferry.common.core.acl_sync import GROUP, TOPIC, Binding
from ferry.common.kafka.errors import KafkaFailure, kafka_error

# A filter's "any name", "any principal" and "any host": None, which confluent-kafka's annotations do not admit.
_ANY: Any = None


def describe(admin: Any, timeout_s: float, resource_types: Iterable[str] = (TOPIC, GROUP)) -> list[Binding]:
    """Every literal and prefixed binding the cluster holds on resources of ``resource_types``."""
    out: list[Binding] = []
    for kind in resource_types:
        wanted = AclBindingFilter(
            ResourceType[kind],
            _ANY,
            ResourcePatternType.ANY,
            _ANY,
            _ANY,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        for found in admin.describe_acls(wanted, request_timeout=timeout_s).result(timeout_s):
            if found.resource_pattern_type not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
                continue
            out.append(
                Binding(
                    found.restype.name,
                    found.name,
                    found.resource_pattern_type.name,
                    found.principal,
                    found.host,
                    found.operation.name,
                    found.permission_type.name,
                )
            )
    return sorted(set(out))


def _fields(b: Binding) -> tuple[Any, ...]:
    return (
        ResourceType[b.resource_type],
        b.name,
        ResourcePatternType[b.pattern],
        b.principal,
        b.host,
        AclOperation[b.operation],
        AclPermissionType[b.permission],
    )


def create(admin: Any, bindings: Iterable[Binding], timeout_s: float) -> dict[Binding, KafkaFailure | None]:
    """Creates ``bindings`` (one that exists already stays as it is); per binding, None or why it failed."""
    asked = {AclBinding(*_fields(b)): b for b in bindings}
    if not asked:
        return {}
    return _outcomes(asked, admin.create_acls(list(asked), request_timeout=timeout_s), timeout_s)


def delete(admin: Any, bindings: Iterable[Binding], timeout_s: float) -> dict[Binding, KafkaFailure | None]:
    """Deletes exactly ``bindings``: each is asked as a filter that matches only itself (every field
    given, no ``ANY``), so nothing else goes; one that is not there is no failure. Per binding, None
    or why it failed."""
    asked = {AclBindingFilter(*_fields(b)): b for b in bindings}
    if not asked:
        return {}
    return _outcomes(asked, admin.delete_acls(list(asked), request_timeout=timeout_s), timeout_s)


def _outcomes(
    asked: Mapping[Any, Binding], futures: Mapping[Any, Any], timeout_s: float
) -> dict[Binding, KafkaFailure | None]:
    """Per binding asked, None once its future answered, or why it failed."""
    out: dict[Binding, KafkaFailure | None] = {}
    for acl, future in futures.items():
        try:
            future.result(timeout_s)
            out[asked[acl]] = None
        except KafkaException as exc:
            out[asked[acl]] = kafka_error(exc)
    return out


def refused(failure: KafkaFailure) -> bool:
    """Whether the cluster's authorizer refused the principal (``*_AUTHORIZATION_FAILED``), as opposed to
    any other failure (unreachable, no authorizer, a timeout)."""
    return failure.name.endswith("AUTHORIZATION_FAILED")


def group_ids(admin: Any, timeout_s: float) -> list[str]:
    """The consumer groups the cluster lists (only those the client may describe)."""
    listed = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout_s)
    return sorted(group.group_id for group in listed.valid)
