"""Topic naming per route: what a source topic is called on the destination, and back.

Pure: no I/O, no clock. A route's ``naming`` is one of

- ``identity`` (the default): the same name on both sides;
- ``prefix``: MirrorMaker 2's default replication policy, ``<source>.<topic>``. Like MirrorMaker 2,
  a topic whose chain of prefixes already names the destination (``b.t``, ``c.b.t`` on a route
  to ``b``) is never mirrored to it, so nothing like ``a.b.t`` appears in an ``a <-> b`` pair;
- a template holding ``{topic}`` exactly once and optionally ``{source}`` and ``{destination}``,
  e.g. ``"{source}.{topic}"`` or ``"prod-{topic}"``.

Every naming is a fixed text before and after the topic, so the mapping is reversible:
:func:`source_topic` undoes :func:`destination_topic` (``source_topic(r, destination_topic(r, t)) == t``),
which the offset translation (exact offsets) needs. The ideal state, ZooKeeper and the REST paths
keep the *source* name (a route's unit of work is a source partition); the destination name is
used wherever the destination cluster is touched: topic creation, config following, offsets,
``ferry validate``/``audit`` and the views that show it.
"""

from __future__ import annotations

import re
from typing import Protocol

IDENTITY = "identity"
PREFIX = "prefix"
PREFIX_SEPARATOR = "."  # MirrorMaker 2's replication.policy.separator default

_FIELD = re.compile(r"\{([^{}]*)\}")
_TEMPLATE_FIELDS = {"topic", "source", "destination"}
_LEGAL_AFFIX = re.compile(r"^[a-zA-Z0-9._-]*$")


class NamedRoute(Protocol):
    """What naming needs of a route (``common.config.RouteConfig`` has it)."""

    @property
    def source(self) -> str: ...

    @property
    def destination(self) -> str: ...

    @property
    def naming(self) -> str: ...


def naming_problem(naming: str) -> str | None:
    """Why ``naming`` is not a usable naming, or None when it is (checked by the config loader)."""
    if naming in (IDENTITY, PREFIX):
        return None
    fields = _FIELD.findall(naming)
    unknown = sorted(set(fields) - _TEMPLATE_FIELDS)
    if unknown:
        return f"naming template {naming!r} uses unknown fields {unknown} (known: topic, source, destination)"
    if fields.count("topic") != 1:
        return f"naming must be identity, prefix, or a template holding {{topic}} exactly once, not {naming!r}"
    rest = _FIELD.sub("", naming)
    if "{" in rest or "}" in rest or not _LEGAL_AFFIX.match(rest):
        return f"naming template {naming!r} may hold only ASCII letters, digits, '.', '_', '-' besides its fields"
    return None


def _affixes(route: NamedRoute) -> tuple[str, str]:
    """The fixed text before and after the topic on the destination."""
    if route.naming == IDENTITY:
        return "", ""
    if route.naming == PREFIX:
        return route.source + PREFIX_SEPARATOR, ""
    before, _, after = route.naming.partition("{topic}")
    values = {"source": route.source, "destination": route.destination}
    return (before.format_map(values), after.format_map(values))


def is_identity(route: NamedRoute) -> bool:
    """Whether the route keeps topic names (``identity``, or a template that renders to ``{topic}``)."""
    return _affixes(route) == ("", "")


def destination_topic(route: NamedRoute, topic: str) -> str:
    """The name of source topic ``topic`` on the route's destination."""
    before, after = _affixes(route)
    return f"{before}{topic}{after}"


def source_topic(route: NamedRoute, destination_topic: str) -> str | None:
    """The source topic whose copy is ``destination_topic``, or None when no source name maps to it."""
    before, after = _affixes(route)
    if len(destination_topic) <= len(before) + len(after):
        return None  # nothing (or an empty name) left between the affixes
    if not destination_topic.startswith(before) or not destination_topic.endswith(after):
        return None
    return destination_topic[len(before) : len(destination_topic) - len(after)]


def mirrored(route: NamedRoute, topic: str) -> bool:
    """Whether the route may mirror ``topic`` at all.

    With ``prefix`` naming, a topic whose prefix chain names the destination came from it
    (MirrorMaker 2's cycle rule: ``b.t`` is never mirrored back to ``b``, nor ``c.b.t``).
    """
    if route.naming != PREFIX:
        return True
    return route.destination not in topic.split(PREFIX_SEPARATOR)[:-1]


def refusal(route: NamedRoute, topic: str) -> str | None:
    """Why the route does not mirror ``topic`` (one line), or None when it does."""
    if not mirrored(route, topic):
        return (
            f"topic {topic!r} came from {route.destination} (its prefix names it); route "
            f"{route.source}.{route.destination} never mirrors it back"
        )
    name = destination_topic(route, topic)
    if len(name) > 249:
        return f"topic {topic!r} would be {name[:40]!r}... on {route.destination}: longer than Kafka's 249 characters"
    return None
