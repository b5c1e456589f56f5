"""``ferry acls``: the Kafka ACLs a config needs (:mod:`common.preflight.acls`), and which of them a cluster lacks.

``ferry acls --config F [--principal P] [--topic T ...]`` prints, per cluster, the
``kafka-acls.sh`` lines that grant Ferry's principal exactly what the config's features need. It
connects to nothing and so needs no secret: a placeholder whose variable is not set or whose file
cannot be read here is left as written (:func:`common.config.load_config`'s ``keep_unavailable``),
unless it is in what the lines show (a cluster's ``bootstrap.servers``, ``sasl.username``).
:func:`check_granted` asks each cluster (AdminClient ``describe_acls``) what it grants the principal
and reports what is missing; ``ferry check --connect`` calls it.

With ``--applications``, for every route with ``sync_acls: false`` (least privilege: Ferry's principal
holds neither ``Describe`` on the source cluster nor ``Alter`` on the destination's), it also prints
what the route's ACL sync would have created on the destination (:func:`application_acls`: the
source's ``Read`` and ``Describe`` ACLs on the topics it mirrors and on its groups, renamed) and, as
comments to run at a failover, what a failover would have granted besides (``Write`` included). That
reads the source (its ACLs, topics and groups): describing ACLs needs ``Describe`` on the cluster, so
``--admin-config CLUSTER=FILE`` names librdkafka properties (an administrator's) to read it with.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from ferry.common.config import FerryConfig, RouteConfig, load_config
from ferry.common.core import acl_sync
from ferry.common.core import naming as topic_naming
from ferry.common.errors import ConfigError, FerryError
from ferry.common.kafka import acls as kafka_acls
from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.errors import kafka_error
from ferry.common.placeholders import Unresolved
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


@dataclass(frozen=True)
class ApplicationAcls:
    """For a route whose ACL sync is off: what the sync would create on its destination (``synced``),
    what a failover would grant besides (``at_failover``), and the source's bindings that have no
    counterpart there (``skipped``)."""

    route: RouteConfig
    synced: list[acl_sync.Binding]
    at_failover: list[acl_sync.Binding]
    skipped: list[acl_sync.Skipped]
    source_bindings: int  # how many bindings the source showed (0: none, or the asking client may not describe)


def application_acls(route: RouteConfig, properties: Mapping[str, Any], topics: Iterable[str] = ()) -> ApplicationAcls:
    """What the ACL sync of ``route`` would create on its destination now, read from its source with
    ``properties``: the source's bindings, the topics the route mirrors there (``include``, and
    ``topics`` added with ``POST /topics``) and the groups it selects. Raises ``KafkaException`` (or
    ``TimeoutError``) when the source does not answer."""
    admin = kafka_clients.admin(dict(properties))
    found = kafka_acls.describe(admin, _TIMEOUT_S)
    listed = admin.list_topics(timeout=_TIMEOUT_S).topics
    names = sorted(
        {str(t) for t in listed if route.wants(str(t))} | {t for t in topics if topic_naming.refusal(route, t) is None}
    )
    groups = [g for g in kafka_acls.group_ids(admin, _TIMEOUT_S) if route.wants_group(g)] if route.groups else []
    synced = acl_sync.synced(route, found, names, groups)
    granted = acl_sync.failover_grants(route, found, names, groups)
    return ApplicationAcls(
        route,
        synced.bindings,
        [b for b in granted.bindings if b not in set(synced.bindings)],
        granted.skipped,
        len(found),
    )


def _properties_file(text: str, origin: str) -> dict[str, str]:
    """``key=value`` lines (``#`` and ``!`` comments, blank lines skipped), as Java's and librdkafka's files."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{origin}:{number}: not a key=value line")
        out[key.strip()] = value.strip()
    return out


def _admin_configs(given: list[str]) -> dict[str, dict[str, str]]:
    """``--admin-config CLUSTER=FILE`` values: cluster -> the file's properties."""
    out = {}
    for item in given:
        cluster, sep, path = item.partition("=")
        if not sep or not cluster or not path:
            raise ConfigError(f"--admin-config {item!r}: write CLUSTER=FILE")
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ConfigError(f"--admin-config {cluster}: cannot read {path}: {exc.strerror}") from None
        out[cluster] = _properties_file(text, path)
    return out


def _reading_properties(config: FerryConfig, cluster: str, admin: Mapping[str, str] | None) -> dict[str, Any]:
    """The client properties to read ``cluster`` with: ``admin``'s instead of the config's when given (with
    the config's ``bootstrap.servers`` when it names none), else the config's; a value whose placeholder is
    not available here is an error naming it."""
    configured = dict(config.clusters[cluster])
    properties = {"bootstrap.servers": configured["bootstrap.servers"], **admin} if admin else configured
    for key, value in properties.items():
        if isinstance(value, Unresolved):
            raise ConfigError(f"clusters.{cluster}.{key}: {value.reason} (or pass --admin-config {cluster}=FILE)")
    return properties


def application_lines(
    config: FerryConfig,
    topics: Iterable[str] = (),
    admin_configs: Mapping[str, Mapping[str, str]] | None = None,
    command_config: str | None = None,
) -> list[str]:
    """``ferry acls --applications``: per route with ``sync_acls: false``, the ``kafka-acls.sh`` lines
    granting on its destination what its sync would, then as comments what a failover would grant besides."""
    lines: list[str] = []
    for route in config.routes:
        if route.sync_acls:
            continue
        source = _reading_properties(config, route.source, (admin_configs or {}).get(route.source))
        try:
            found = application_acls(route, source, topics)
        except (KafkaException, TimeoutError) as exc:
            raise FerryError(
                f"route {route.name}: reading the ACLs, topics and groups of source {route.source}: {kafka_error(exc)}"
            ) from None
        bootstrap = config.clusters[route.destination]["bootstrap.servers"]
        if isinstance(bootstrap, Unresolved):
            raise ConfigError(f"clusters.{route.destination}.bootstrap.servers: {bootstrap.reason}")
        lines += [
            "",
            f"# route {route.name} (sync_acls: false): the applications' ACLs its sync would copy to "
            f"{route.destination} (the source's Read and Describe on its topics and groups, renamed)",
        ]
        if not found.source_bindings:
            lines.append(
                f"# source {route.source} shows no ACLs: none there, or the client asking may not describe them "
                f"(that needs Describe on the cluster: --admin-config {route.source}=FILE with an administrator's "
                "librdkafka properties)"
            )
        lines += acls.application_lines(str(bootstrap), found.synced, command_config)
        lines += [f"# not copied: {s.binding.line()}: {s.why}" for s in found.skipped]
        if found.at_failover:
            lines.append(
                f"# at a failover of route {route.name}, once nobody copies it (Ferry grants nothing without "
                "sync_acls), and only then; remove them again when the producers are back on the source:"
            )
            lines += [f"# {line}" for line in acls.application_lines(str(bootstrap), found.at_failover, command_config)]
    return lines


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
    parser.add_argument(
        "--applications",
        action="store_true",
        help="for routes with sync_acls: false, also print the applications' ACLs their sync would copy to the "
        "destination, and (as comments) what a failover would grant; reads each such route's source",
    )
    parser.add_argument(
        "--admin-config",
        action="append",
        default=[],
        metavar="CLUSTER=FILE",
        help="with --applications: librdkafka properties (key=value lines) to read CLUSTER's ACLs with, instead of "
        "the config's (describing ACLs needs Describe on the cluster); repeatable",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config, keep_unavailable=True)
    for route in acls.unmatched_routes(config, args.topic):
        print(f"# route {route} has no include patterns: name the topics added with POST /topics with --topic")
    if args.admin_config and not args.applications:
        raise ConfigError("--admin-config goes with --applications")
    admin_configs = _admin_configs(args.admin_config)
    unknown = sorted(set(admin_configs) - set(config.clusters))
    if unknown:
        raise ConfigError(f"--admin-config: unknown clusters {unknown} (known: {sorted(config.clusters)})")
    for i, line in enumerate(acls.command_lines(config, args.principal, args.topic, args.command_config)):
        if line.startswith("# cluster") and i:
            print()
        print(line)
    if args.applications:
        lines = application_lines(config, args.topic, admin_configs, args.command_config)
        if not lines:
            print("\n# every route syncs its ACLs itself (sync_acls): no application ACL to grant by hand")
        for line in lines:
            print(line)
    return 0
