"""ACL sync per route, as MirrorMaker 2 has it: which of the source's ACL bindings a route copies to
its destination, under which names, and what a failover grants there.

Pure: plain data in (bindings, topic and group names, a route's naming), plain data out; no I/O,
no clock. The leader's job (:mod:`controller.jobs.acl_sync`) and the failover
(:mod:`controller.failover.acl_grant`) do the reading and the creating.

The rules (docs/security.md, "ACL sync"):

- A route's bindings are the source's bindings on its mirrored topics (those of its ideal state)
  and on its consumer groups (the groups its ``groups`` patterns select): a literal binding names
  one of them, a prefixed binding is a prefix of one, a literal ``*`` covers them all.
- The periodic sync copies only READ and DESCRIBE, ALLOW and DENY alike (a DENY READ that
  narrows a broader ALLOW must narrow it on the destination too). WRITE, ALL and every other
  operation never are: the copy stays write-protected for everyone but Ferry until a failover.
- A failover grants every operation the source had on the route's topics and groups, WRITE
  included: the producers move to the destination.
- Topic resources take the destination's name (the route's naming). A literal name is renamed
  exactly. A prefix (and a literal ``*``, the empty prefix) keeps its meaning only where the naming
  puts nothing after the topic name (identity, prefix and templates like ``"dr-{topic}"``): there
  a prefix ``P`` becomes the destination's text before the topic plus ``P``; under any other naming
  the binding is skipped (one :class:`Skipped` line). Group names stay as they are (Ferry commits
  translated offsets in the same group on the destination).
- Nothing is ever deleted on the destination: a sync only adds the bindings it lacks
  (:func:`missing`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ferry.common.core import naming as topic_naming

# Kafka's names (confluent-kafka's ResourceType, ResourcePatternType, AclOperation, AclPermissionType).
TOPIC, GROUP = "TOPIC", "GROUP"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"
ALLOW, DENY = "ALLOW", "DENY"
READ, WRITE, DESCRIBE, ALL = "READ", "WRITE", "DESCRIBE", "ALL"
WILDCARD = "*"  # a literal name covering every resource of its type
SYNCED_OPERATIONS = frozenset({READ, DESCRIBE})


@dataclass(frozen=True, order=True)
class Binding:
    """One Kafka ACL binding: a resource pattern (type, name, pattern type) and an entry (principal,
    host, operation, permission), every field spelt as Kafka's enums name it."""

    resource_type: str
    name: str
    pattern: str
    principal: str
    host: str
    operation: str
    permission: str

    def covers(self, name: str) -> bool:
        """Whether this binding's resource pattern applies to the resource called ``name``."""
        if self.pattern == PREFIXED:
            return name.startswith(self.name)
        return self.name in (name, WILDCARD)

    def line(self) -> str:
        """One line for logs and reports."""
        return (
            f"{self.permission} {self.principal} {self.operation} on {self.resource_type.lower()} "
            f"{self.pattern.lower()} {self.name!r} from {self.host}"
        )


@dataclass(frozen=True)
class Skipped:
    """A binding of the route's that has no counterpart on the destination, and why."""

    binding: Binding
    why: str


@dataclass(frozen=True)
class AclTranslation:
    """What the destination should hold (sorted, without duplicates) and what was skipped."""

    bindings: list[Binding]
    skipped: list[Skipped]


class SyncedRoute(topic_naming.NamedRoute, Protocol):
    """What ACL sync needs of a route (``common.config.RouteConfig`` has it)."""

    def wants_group(self, group: str) -> bool: ...


def route_bindings(
    route: SyncedRoute, bindings: Iterable[Binding], topics: Iterable[str], groups: Iterable[str]
) -> list[Binding]:
    """The bindings (every operation) that apply to the route's mirrored ``topics`` (source names) or
    its consumer ``groups``; a literal group binding counts when the route selects its name, listed or not."""
    topic_names, group_names = set(topics), set(groups)
    out = set()
    for binding in bindings:
        if binding.resource_type == TOPIC:
            names = topic_names
        elif binding.resource_type == GROUP:
            if binding.pattern == LITERAL and binding.name != WILDCARD and route.wants_group(binding.name):
                out.add(binding)
                continue
            names = group_names
        else:
            continue
        if any(binding.covers(name) for name in names):
            out.add(binding)
    return sorted(out)


def _affixes(route: topic_naming.NamedRoute) -> tuple[str, str]:
    before, _, after = topic_naming.destination_topic(route, "\0").partition("\0")
    return before, after


def renamed(route: topic_naming.NamedRoute, binding: Binding) -> Binding | Skipped:
    """``binding`` as it reads on the route's destination, or why it has no counterpart there."""
    if binding.resource_type != TOPIC:
        return binding
    before, after = _affixes(route)
    if binding.pattern == LITERAL and binding.name != WILDCARD:
        return _with_name(binding, f"{before}{binding.name}{after}", LITERAL)
    if after:
        return Skipped(
            binding,
            f"route naming {route.naming!r} puts text after the topic name, so a "
            f"{'prefix' if binding.pattern == PREFIXED else 'wildcard'} has no counterpart on {route.destination}",
        )
    prefix = before + ("" if binding.pattern == LITERAL else binding.name)
    return _with_name(binding, prefix, PREFIXED) if prefix else _with_name(binding, WILDCARD, LITERAL)


def _with_name(binding: Binding, name: str, pattern: str) -> Binding:
    return Binding(
        binding.resource_type,
        name,
        pattern,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission,
    )


def _translate(route: topic_naming.NamedRoute, bindings: Iterable[Binding]) -> AclTranslation:
    wanted: set[Binding] = set()
    skipped = []
    for binding in bindings:
        found = renamed(route, binding)
        if isinstance(found, Skipped):
            skipped.append(found)
        else:
            wanted.add(found)
    return AclTranslation(sorted(wanted), sorted(skipped, key=lambda s: s.binding))


def synced(
    route: SyncedRoute, bindings: Iterable[Binding], topics: Iterable[str], groups: Iterable[str]
) -> AclTranslation:
    """What the periodic sync wants on the destination: the route's READ and DESCRIBE bindings, renamed."""
    kept = [b for b in route_bindings(route, bindings, topics, groups) if b.operation in SYNCED_OPERATIONS]
    return _translate(route, kept)


def failover_grants(
    route: SyncedRoute, bindings: Iterable[Binding], topics: Iterable[str], groups: Iterable[str]
) -> AclTranslation:
    """What a failover grants on the destination: every binding of the route's, WRITE included, renamed."""
    return _translate(route, route_bindings(route, bindings, topics, groups))


def missing(wanted: Iterable[Binding], present: Iterable[Binding]) -> list[Binding]:
    """The wanted bindings the destination lacks (a sync only adds: nothing present is ever removed)."""
    return sorted(set(wanted) - set(present))


# -- what the leader remembers (ZooKeeper ``acls/<route>``) for a failover with the source gone ------------


@dataclass(frozen=True, kw_only=True)
class Remembered:
    """The route's source bindings (every operation) as the last sync read them, its topics and groups then."""

    at: float
    topics: list[str]
    groups: list[str]
    bindings: list[Binding]

    def to_bytes(self) -> bytes:
        data = {
            "at": self.at,
            "topics": sorted(self.topics),
            "groups": sorted(self.groups),
            "bindings": [asdict(b) for b in sorted(self.bindings)],
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Remembered:
        """Raises ``ValueError`` when ``data`` is not what :meth:`to_bytes` writes."""
        try:
            raw: dict[str, Any] = json.loads(data)
            return cls(
                at=float(raw["at"]),
                topics=[str(t) for t in raw["topics"]],
                groups=[str(g) for g in raw["groups"]],
                bindings=[Binding(**row) for row in raw["bindings"]],
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a remembered ACL set: {exc}") from None

    def same_as(self, other: Remembered | None) -> bool:
        """Whether ``other`` holds the same topics, groups and bindings (whatever its time)."""
        return other is not None and (sorted(self.topics), sorted(self.groups), sorted(self.bindings)) == (
            sorted(other.topics),
            sorted(other.groups),
            sorted(other.bindings),
        )
