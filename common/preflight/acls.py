"""The Kafka ACLs Ferry's principal needs on each cluster, derived from a config.

Pure: plain data in (a :class:`~ferry.common.config.FerryConfig`, extra topic names), a sorted list
of :class:`Acl` bindings out; no I/O, no clock. ``ferry acls`` prints them as ``kafka-acls.sh``
command lines (:func:`command_lines`), ``docs/security.md`` lists them for a typical config, and
:func:`ferry.common.preflight.grants.check_granted` compares them with what a cluster grants.

What each feature does on Kafka, and so what it needs (Kafka's implications apply: ``Read``,
``Write`` and ``Alter`` imply ``Describe``; ``AlterConfigs`` implies ``DescribeConfigs``):

- every route, on its **source**: reads the mirrored topics (``Read``) and their configs
  (``DescribeConfigs``, config following), commits in the group ``ferry.<route>`` (``Read``), and
  reads one record back when it takes a partition whose copies exist but whose commits are gone (a
  topic created again: group ``ferry.<route>.probe`` ``Describe``).
- every route, on its **destination** (a tree distributor: every leaf it may switch to): creates the
  topics, adds partitions, follows configs (``Create``, ``Alter``, ``AlterConfigs``), writes with an
  idempotent producer (``Write``; ``IdempotentWrite`` on the cluster), reads its copies back when it
  takes a partition (resume from the provenance header: ``Read``, group ``ferry.<route>.lookback``
  ``Describe``), writes the exact offset map ``__ferry_offset_map`` (``Create``, ``Write``).
- the checkpoint job (``controller.checkpoint_interval_s`` > 0), on every destination: follows the
  offset map (``Read``; groups ``ferry-<controller id>-<cluster>.offset-map`` and
  ``ferry.checkpoints.<controller id>`` ``Describe``) and tombstones what retention removed
  (``Write``). With a route's ``groups``: lists and reads the matching groups on the source
  (``Describe`` on them; Kafka lists only groups the principal may describe), writes
  ``__ferry_checkpoints`` on the destination (``Create``, ``Write``) and, with
  ``sync_group_offsets``, describes the groups there and commits their translated offsets (``Read``).
- heartbeats (``heartbeats.interval_s`` > 0): creates ``ferry.heartbeats`` on every cluster of a
  route, writes it on every source (``Write``, ``IdempotentWrite``), reads it and the copies on
  every cluster (``Read``; group ``ferry.heartbeats.reader.<cluster>`` ``Describe``). Every route
  mirrors it like any other topic.
- ACL sync (a route's ``sync_acls``, the default): describes the ACLs on its source (``Describe`` on
  the cluster) and lists its groups there (Kafka lists those the principal may describe: the
  checkpoint job's ``Describe`` on them), describes and creates ACLs on its destination (``Alter``
  on the cluster; a failover grants the source's there too). ``Alter`` on a cluster lets the
  principal grant itself anything: turn ``sync_acls`` off where Ferry must not hold it (least
  privilege). Then nobody copies the applications' ACLs: :func:`application_lines` prints what the
  sync would have created, from bindings read at the source (``ferry acls --applications``).

A route's topics come from its ``include`` regular expressions: Kafka's ACLs know only literal
names and prefixes, so each expression becomes the literal name it can only match, or the longest
literal prefix every match starts with (:func:`name_patterns`; ``*``, every name, when there is
none). Topics added with ``POST /topics`` are not in the config: pass them as ``topics``.
An exactly-once route (``delivery_guarantee: exactly_once``) writes in transactions on each
destination, with one ``transactional.id`` per worker, ``ferry.<route>.<worker>``, which the leader
also uses to fence a lost worker's writer: ``Write`` and ``Describe`` on the transactional ids
prefixed ``ferry.<route>.``. Schema distribution talks to the registries over HTTP only, so it
needs no Kafka ACL.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ferry.common.config import FerryConfig, RouteConfig
from ferry.common.core import acl_sync, heartbeat
from ferry.common.core import naming as topic_naming
from ferry.common.core import tree as distribution_tree
from ferry.common.core.offset_map import CHECKPOINT_TOPIC, MAP_TOPIC
from ferry.common.errors import ConfigError
from ferry.common.placeholders import Unresolved

TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = "topic", "group", "cluster", "transactional-id"
LITERAL, PREFIXED = "literal", "prefixed"
# kafka-acls.sh's name of the cluster resource; "*" as a literal name: every resource of the type.
CLUSTER_NAME, ANY = "kafka-cluster", "*"
# Kafka's order of operations (AclOperation), for stable output.
_OPERATION_ORDER = [
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
]
_META = set(".^$*+?{}[]|()\\")
_QUANTIFIERS = set("*+?{")


@dataclass(frozen=True, order=True)
class Resource:
    """A Kafka resource pattern: type (topic, group, cluster), name, pattern type (literal, prefixed)."""

    type: str
    name: str
    pattern: str = LITERAL


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW binding for Ferry's principal on ``cluster`` (a name under the config's ``clusters``);
    ``why``: what needs it (not part of its identity)."""

    cluster: str
    resource: Resource
    operation: str
    why: tuple[str, ...] = field(default=(), compare=False)


def name_patterns(regex: str) -> list[tuple[str, str]]:
    """(pattern type, name) pairs that cover every name ``regex`` fully matches.

    ``orders`` -> literal ``orders``; ``orders\\.eu`` -> literal ``orders.eu``; ``orders-.*`` or
    ``orders-(a|b)`` -> prefixed ``orders-``; ``a|b.*`` -> literal ``a`` and prefixed ``b``;
    ``.*orders`` -> literal ``*`` (every name: no prefix is common to all matches).
    """
    alternatives = _top_level_alternatives(regex)
    if alternatives is None or len(alternatives) > 1:
        out: list[tuple[str, str]] = []
        for alternative in alternatives or [regex]:
            pairs = name_patterns(alternative) if alternatives else [(LITERAL, ANY)]
            out.extend(p for p in pairs if p not in out)
        return out
    text = regex.removeprefix("^")
    if text.endswith("$") and not text.endswith("\\$"):
        text = text[:-1]
    prefix: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 < len(text) and not text[i + 1].isalnum():
                literal, width = text[i + 1], 2
            else:
                break  # \d, \w, \b, ...: a class or an assertion
        elif char in _META:
            break
        else:
            literal, width = char, 1
        following = text[i + width] if i + width < len(text) else ""
        if following in _QUANTIFIERS:
            break  # this character may be absent or repeated
        prefix.append(literal)
        i += width
    name = "".join(prefix)
    if i == len(text) and name:
        return [(LITERAL, name)]
    return [(PREFIXED, name)] if name else [(LITERAL, ANY)]


def _top_level_alternatives(regex: str) -> list[str] | None:
    """``regex`` split at its top-level ``|``; None when its brackets do not balance."""
    parts, depth, start, i, in_class = [], 0, 0, 0, False
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]" or regex[i + 1 : i + 3] == "^]":
                i += 1 if regex[i + 1] == "]" else 2
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            parts.append(regex[start:i])
            start = i + 1
        i += 1
    if depth or in_class:
        return None
    return [*parts, regex[start:]]


def _destination_resource(route: RouteConfig, destination: str, source: Resource) -> Resource:
    """Where the copies of the source topics ``source`` live on ``destination`` (the route's naming)."""
    named = route.model_copy(update={"destination": destination})
    before, after = topic_naming.destination_topic(named, "\0").split("\0")
    if source.pattern == LITERAL and source.name != ANY:
        return Resource(TOPIC, f"{before}{source.name}{after}")
    prefix = before + ("" if source.name == ANY else source.name)
    return Resource(TOPIC, prefix, PREFIXED) if prefix else Resource(TOPIC, ANY)


def destinations(config: FerryConfig, route: RouteConfig) -> list[str]:
    """The clusters a route may write to: its destination; a tree distributor's whole subtree."""
    if route.distributor is None or config.tree is None:
        return [route.destination]
    for distributor in distribution_tree.distributors(distribution_tree.parse(config.tree.layout)):
        if distributor.name == route.distributor:
            return sorted(distributor.subtree)
    return [route.destination]


def _topic_resources(route: RouteConfig, topics: Iterable[str]) -> list[Resource]:
    found: list[Resource] = []
    for regex in route.include:
        for pattern, name in name_patterns(regex):
            if pattern == LITERAL and name != ANY and not route.wants(name):
                continue  # excluded, or never mirrored on this route (prefix naming's cycle rule)
            found.append(Resource(TOPIC, name, pattern))
    found += [Resource(TOPIC, topic) for topic in topics if topic_naming.refusal(route, topic) is None]
    return sorted(set(found))


def required_acls(config: FerryConfig, topics: Iterable[str] = ()) -> list[Acl]:
    """Every ALLOW binding Ferry's principal needs, per cluster, for ``config``'s features; sorted.

    ``topics``: source topics mirrored on every route besides its ``include`` patterns (those
    added with ``POST /topics``). Pure: the config is plain data, nothing is asked of Kafka.
    """
    needs: dict[tuple[str, Resource, str], list[str]] = {}

    def need(cluster: str, resource: Resource, why: str, *operations: str) -> None:
        for operation in operations:
            reasons = needs.setdefault((cluster, resource, operation), [])
            if why not in reasons:
                reasons.append(why)

    extra = sorted(set(topics))
    checkpoints = config.controller.checkpoint_interval_s > 0
    for route in config.routes:
        source_topics = _topic_resources(route, extra)
        for resource in source_topics:
            need(route.source, resource, f"route {route.name}: read the mirrored topics", "Read", "DescribeConfigs")
        need(route.source, Resource(GROUP, route.group_id), f"route {route.name}: commit its source offsets", "Read")
        need(
            route.source,
            Resource(GROUP, f"{route.group_id}.probe"),
            f"route {route.name}: compare a source record with its copy (a topic created again)",
            "Describe",
        )
        group_patterns = sorted(
            {Resource(GROUP, name, pattern) for regex in route.groups for pattern, name in name_patterns(regex)}
        )
        if checkpoints or route.sync_acls:
            for resource in group_patterns:
                need(route.source, resource, f"route {route.name}: list the groups to checkpoint or sync", "Describe")
        if checkpoints and group_patterns:
            need(
                route.source,
                Resource(GROUP, "ferry.checkpoints.", PREFIXED),
                f"route {route.name}: the checkpoint job's reader",
                "Describe",
            )
        if route.sync_acls:
            need(
                route.source, Resource(CLUSTER, CLUSTER_NAME), f"route {route.name}: read the ACLs to sync", "Describe"
            )
        for destination in destinations(config, route):
            why = f"route {route.name}: copy to {destination}"
            if route.sync_acls:
                need(
                    destination,
                    Resource(CLUSTER, CLUSTER_NAME),
                    f"route {route.name}: create the synced ACLs on {destination}",
                    "Alter",
                )
            for resource in source_topics:
                need(
                    destination,
                    _destination_resource(route, destination, resource),
                    why,
                    "Read",
                    "Write",
                    "Create",
                    "Alter",
                    "AlterConfigs",
                )
            need(destination, Resource(CLUSTER, CLUSTER_NAME), why, "IdempotentWrite")
            if route.exactly_once:  # every worker's writer id, ferry.<route>.<worker>; the leader fences them too
                need(
                    destination,
                    Resource(TRANSACTIONAL_ID, f"ferry.{route.name}.", PREFIXED),
                    f"route {route.name}: write in transactions (exactly once), and fence a lost worker's writer",
                    "Write",
                    "Describe",
                )
            need(
                destination,
                Resource(GROUP, f"{route.group_id}.lookback"),
                f"route {route.name}: read its copies back when taking a partition",
                "Describe",
            )
            need(
                destination, Resource(TOPIC, MAP_TOPIC), f"route {route.name}: the exact offset map", "Write", "Create"
            )
            if not checkpoints:
                continue
            need(destination, Resource(TOPIC, MAP_TOPIC), "the checkpoint job: follow and trim the offset map", "Read")
            need(
                destination,
                Resource(GROUP, "ferry-", PREFIXED),
                "the checkpoint job: the offset map's reader",
                "Describe",
            )
            need(
                destination, Resource(GROUP, "ferry.checkpoints.", PREFIXED), "the checkpoint job's reader", "Describe"
            )
            if group_patterns:
                need(
                    destination,
                    Resource(TOPIC, CHECKPOINT_TOPIC),
                    f"route {route.name}: write checkpoints",
                    "Write",
                    "Create",
                )
                if config.controller.sync_group_offsets:
                    for resource in group_patterns:
                        need(destination, resource, f"route {route.name}: commit translated group offsets", "Read")
    if config.heartbeats.interval_s > 0:
        clusters = sorted({c for r in config.routes for d in destinations(config, r) for c in (r.source, d)})
        for cluster in clusters:
            need(cluster, Resource(TOPIC, heartbeat.TOPIC), "heartbeats: create and read the topic", "Create", "Read")
            need(cluster, Resource(GROUP, f"ferry.heartbeats.reader.{cluster}"), "heartbeats: the reader", "Describe")
        for route in config.routes:
            for destination in destinations(config, route):
                copy = _destination_resource(route, destination, Resource(TOPIC, heartbeat.TOPIC))
                need(destination, copy, "heartbeats: read the copies", "Read")
        for source in sorted({r.source for r in config.routes}):
            need(source, Resource(TOPIC, heartbeat.TOPIC), "heartbeats: write them", "Write")
            need(source, Resource(CLUSTER, CLUSTER_NAME), "heartbeats: write them", "IdempotentWrite")
    return sorted(
        Acl(cluster, resource, operation, tuple(why)) for (cluster, resource, operation), why in needs.items()
    )


def principal_of(cluster: str, properties: Mapping[str, object], given: str | None = None) -> str:
    """``User:<name>``: ``given`` (``User:`` added when it names no type), else the cluster's ``sasl.username``."""
    name = given or properties.get("sasl.username")
    if not name:
        raise ConfigError(f"cluster {cluster!r} has no sasl.username: name Ferry's principal with --principal")
    if isinstance(name, Unresolved):
        raise ConfigError(
            f"clusters.{cluster}.sasl.username: {name.reason} (or name Ferry's principal with --principal)"
        )
    name = str(name)
    return name if ":" in name else f"User:{name}"


def grouped(acls: Iterable[Acl]) -> dict[str, dict[Resource, list[str]]]:
    """cluster -> resource -> its operations (Kafka's order): one ``kafka-acls.sh`` line per resource."""
    out: dict[str, dict[Resource, list[str]]] = {}
    for acl in acls:
        operations = out.setdefault(acl.cluster, {}).setdefault(acl.resource, [])
        if acl.operation not in operations:
            operations.append(acl.operation)
    for resources in out.values():
        for operations in resources.values():
            operations.sort(key=_OPERATION_ORDER.index)
    return {cluster: dict(sorted(resources.items())) for cluster, resources in sorted(out.items())}


def command_line(
    bootstrap: str, principal: str, resource: Resource, operations: Iterable[str], command_config: str | None = None
) -> str:
    """The ``kafka-acls.sh`` line granting ``operations`` on ``resource`` to ``principal``
    (``command_config``: the administrator's client properties file it connects with)."""
    words = ["kafka-acls.sh", "--bootstrap-server", bootstrap]
    if command_config:
        words += ["--command-config", command_config]
    words += ["--add", "--allow-principal", principal]
    for operation in operations:
        words += ["--operation", operation]
    if resource.type == CLUSTER:
        words.append("--cluster")
    else:
        words += [f"--{resource.type}", _quoted(resource.name), "--resource-pattern-type", resource.pattern]
    return " ".join(words)


def _quoted(name: str) -> str:
    return shlex.quote(name)


def _operation(kafka_name: str) -> str:
    """Kafka's enum name of an operation (``DESCRIBE_CONFIGS``) as kafka-acls.sh spells it (``DescribeConfigs``)."""
    return "".join(word.capitalize() for word in kafka_name.split("_"))


def application_lines(
    bootstrap: str, bindings: Iterable[acl_sync.Binding], command_config: str | None = None
) -> list[str]:
    """``kafka-acls.sh`` lines creating ``bindings`` (any principal, host, ``ALLOW`` or ``DENY``) as they are:
    one line per resource, principal, host and permission, with its operations (Kafka's order)."""
    merged: dict[tuple[str, str, str, str, str, str], list[str]] = {}
    for b in sorted(bindings):
        key = (b.resource_type, b.name, b.pattern, b.principal, b.host, b.permission)
        operations = merged.setdefault(key, [])
        name = _operation(b.operation)
        if name not in operations:
            operations.append(name)
    lines = []
    for (kind, name, pattern, principal, host, permission), operations in merged.items():
        side = "deny" if permission == acl_sync.DENY else "allow"
        words = ["kafka-acls.sh", "--bootstrap-server", bootstrap]
        if command_config:
            words += ["--command-config", command_config]
        words += ["--add", f"--{side}-principal", _quoted(principal)]
        if host != ANY:
            words += [f"--{side}-host", _quoted(host)]
        for operation in sorted(operations, key=lambda o: _OPERATION_ORDER.index(o) if o in _OPERATION_ORDER else 99):
            words += ["--operation", operation]
        words += [f"--{kind.lower()}", _quoted(name), "--resource-pattern-type", pattern.lower()]
        lines.append(" ".join(words))
    return lines


def command_lines(
    config: FerryConfig, principal: str | None = None, topics: Iterable[str] = (), command_config: str | None = None
) -> list[str]:
    """``kafka-acls.sh`` lines per cluster (a ``#`` line heads each cluster), for :func:`required_acls`."""
    return lines_for(config, required_acls(config, topics), principal, command_config)


def lines_for(
    config: FerryConfig, found: Iterable[Acl], principal: str | None = None, command_config: str | None = None
) -> list[str]:
    """``kafka-acls.sh`` lines granting ``found`` (e.g. what :func:`missing` returned), per cluster of ``config``."""
    lines: list[str] = []
    for cluster, resources in grouped(found).items():
        properties = dict(config.clusters[cluster])
        who = principal_of(cluster, properties, principal)
        bootstrap = properties["bootstrap.servers"]
        if isinstance(bootstrap, Unresolved):
            raise ConfigError(f"clusters.{cluster}.bootstrap.servers: {bootstrap.reason}")
        lines.append(f"# cluster {cluster}: principal {who}")
        lines += [
            command_line(str(bootstrap), who, resource, operations, command_config)
            for resource, operations in resources.items()
        ]
    return lines


def unmatched_routes(config: FerryConfig, topics: Iterable[str] = ()) -> list[str]:
    """Routes with neither ``include`` patterns nor ``topics``: their topics are unknown to the config."""
    given = list(topics)
    return [route.name for route in config.routes if not route.include and not given]


# What an allowed operation lets a principal do besides itself (Kafka's AclAuthorizer rules).
_IMPLIES = {
    "All": set(_OPERATION_ORDER),
    "Read": {"Describe"},
    "Write": {"Describe"},
    "Delete": {"Describe"},
    "Alter": {"Describe"},
    "AlterConfigs": {"DescribeConfigs"},
}


def _covers(granted: Resource, wanted: Resource) -> bool:
    if granted.type != wanted.type:
        return False
    if granted.pattern == LITERAL:
        return granted.name == ANY or (wanted.pattern == LITERAL and granted.name == wanted.name)
    if granted.pattern == PREFIXED:
        return wanted.name.startswith(granted.name) and wanted.name != ANY
    return False


def missing(required: Iterable[Acl], granted: Iterable[Acl]) -> list[Acl]:
    """The ``required`` bindings that no ``granted`` ALLOW binding (of the same cluster) covers.

    A grant covers a need when its operation is the same, ``All``, or implies it (``Read`` implies
    ``Describe``, ...) and its resource is the same, the literal ``*``, or a prefix of the needed name.
    Pure; DENY bindings are not considered (pass ALLOW bindings only).
    """
    by_cluster: dict[str, list[Acl]] = {}
    for acl in granted:
        by_cluster.setdefault(acl.cluster, []).append(acl)
    return [
        need
        for need in required
        if not any(
            (g.operation == need.operation or need.operation in _IMPLIES.get(g.operation, set()))
            and _covers(g.resource, need.resource)
            for g in by_cluster.get(need.cluster, [])
        )
    ]
