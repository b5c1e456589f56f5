"""``ferry acls``: the Kafka ACLs a config needs (:mod:`common.preflight.acls`), and which of them a cluster lacks.

``ferry acls --config F [--principal P] [--topic T ...]`` prints, per cluster, the
``kafka-acls.sh`` lines that grant Ferry's principal exactly what the config's features need. It
connects to nothing and so needs no secret: a placeholder whose variable is not set or whose file
cannot be read here is left as written (:func:`common.config.load_config`'s ``keep_unavailable``),
unless it is in what the lines show (a cluster's ``bootstrap.servers``, ``sasl.username``).
:func:`check_granted` asks each cluster (AdminClient ``describe_acls``) what it grants the principal
and reports what is missing; ``ferry check --connect`` calls it.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ferry.common.config import FerryConfig, load_config
from ferry.common.errors import ConfigError
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.preflight import acls

_TIMEOUT_S = 15.0
# A filter's "any name" and "any host": None, which confluent-kafka's annotations (str) do not admit.
_MATCH_ANY: Any = None
_RESOURCE_TYPES = {
    ResourceType.TOPIC: acls.TOPIC,
    ResourceType.GROUP: acls.GROUP,
    ResourceType.BROKER: acls.CLUSTER,
    ResourceType.TRANSACTIONAL_ID: acls.TRANSACTIONAL_ID,
}
_PATTERNS = {ResourcePatternType.LITERAL: acls.LITERAL, ResourcePatternType.PREFIXED: acls.PREFIXED}


@dataclass(frozen=True)
class ClusterGrants:
    """One cluster's answer: the needed bindings it does not grant, or why it could not be asked."""

    cluster: str
    principal: str
    missing: list[acls.Acl] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.missing


def _operation_name(operation: AclOperation) -> str:
    return "".join(word.capitalize() for word in operation.name.split("_"))


def granted_acls(cluster: str, properties: Mapping[str, Any], principal: str) -> list[acls.Acl]:
    """The ALLOW bindings ``cluster`` holds for ``principal`` (and ``User:*``), as :class:`acls.Acl`.

    Describing ACLs needs ``Describe`` on the cluster resource: use an administrator's properties
    when Ferry's principal lacks it. Raises ``KafkaException`` when the cluster refuses or does not answer.
    """
    admin = kafka_clients.admin(dict(properties))
    found: list[acls.Acl] = []
    for who in dict.fromkeys([principal, "User:*"]):
        wanted = AclBindingFilter(
            ResourceType.ANY,
            _MATCH_ANY,
            ResourcePatternType.ANY,
            who,
            _MATCH_ANY,
            AclOperation.ANY,
            AclPermissionType.ALLOW,
        )
        for binding in admin.describe_acls(wanted, request_timeout=_TIMEOUT_S).result(_TIMEOUT_S):
            kind = _RESOURCE_TYPES.get(binding.restype)
            pattern = _PATTERNS.get(binding.resource_pattern_type)
            if kind is None or pattern is None:
                continue  # delegation tokens: Ferry needs none
            name = acls.CLUSTER_NAME if kind == acls.CLUSTER else binding.name
            found.append(acls.Acl(cluster, acls.Resource(kind, name, pattern), _operation_name(binding.operation)))
    return found


def check_granted(
    config: FerryConfig,
    principal: str | None = None,
    topics: Iterable[str] = (),
    admin_clusters: Mapping[str, Mapping[str, Any]] | None = None,
    clusters: Iterable[str] | None = None,
) -> dict[str, ClusterGrants]:
    """Per cluster that needs ACLs, which of :func:`acls.required_acls` it does not grant.

    ``principal``: Ferry's (default: each cluster's ``sasl.username``). ``topics``: as for
    :func:`acls.required_acls`. ``admin_clusters``: client properties to ask a cluster with instead of the
    config's (describing ACLs needs ``Describe`` on the cluster, which Ferry itself does not need).
    ``clusters``: ask only these (default: every cluster that needs ACLs). A cluster that cannot be asked
    (unreachable, no authorizer) or that reports no ACL for the principal (none granted, or the asking client
    may not describe them) gets ``error`` set, one line; nothing raises for it.
    """
    required = acls.required_acls(config, topics)
    out: dict[str, ClusterGrants] = {}
    asked = None if clusters is None else set(clusters)
    for cluster in sorted({acl.cluster for acl in required if asked is None or acl.cluster in asked}):
        properties = dict(config.clusters[cluster])
        try:
            who = acls.principal_of(cluster, properties, principal)
        except ConfigError as exc:  # no SASL user: nothing to ask the cluster about
            out[cluster] = ClusterGrants(cluster, "", error=str(exc))
            continue
        try:
            granted = granted_acls(cluster, (admin_clusters or {}).get(cluster, properties), who)
        except KafkaException as exc:
            out[cluster] = ClusterGrants(cluster, who, error=f"cannot describe its ACLs: {kafka_error(exc)}")
            continue
        needed = [acl for acl in required if acl.cluster == cluster]
        # A client without Describe on the cluster gets an empty answer, not an error (librdkafka
        # drops the broker's CLUSTER_AUTHORIZATION_FAILED): say that it may be the reason.
        error = (
            None
            if granted
            else (
                f"the cluster reports no ACLs for {who}: none are granted, or the client asking may not describe "
                f"ACLs (that needs Describe on the cluster: ask with an administrator's properties)"
            )
        )
        out[cluster] = ClusterGrants(cluster, who, acls.missing(needed, granted), error)
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "acls",
        help="print the Kafka ACLs Ferry's principal needs on each cluster, as kafka-acls.sh lines",
        description="Prints, per cluster, the kafka-acls.sh command lines that grant Ferry's principal what the "
        "config's routes, group checkpoints, heartbeats and offset map need, and nothing more. Connects to nothing: "
        "the config's secrets (${env:...}, ${file:...}) need not be available.",
    )
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument(
        "--principal", help="Ferry's Kafka principal (User:NAME or NAME); default: each cluster's sasl.username"
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="TOPIC",
        help="a source topic mirrored besides the routes' include patterns (added with POST /topics); repeatable",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="an administrator's client properties file, added to each line (kafka-acls.sh --command-config)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config, keep_unavailable=True)
    for route in acls.unmatched_routes(config, args.topic):
        print(f"# route {route} has no include patterns: name the topics added with POST /topics with --topic")
    for i, line in enumerate(acls.command_lines(config, args.principal, args.topic, args.command_config)):
        if line.startswith("# cluster") and i:
            print()
        print(line)
    return 0
