"""``ferry check --connect``'s topic listing: what a route's ``include`` mirrors, and what its exclusions keep out.

Pure: a route and the source cluster's topic names in, one line out; no I/O. A route's ``include``
patterns match topics; its ``exclude`` patterns, and other systems' internal topics
(``exclude_internal``, Kafka's own ``__*``), remove some of them. The line names the topics
mirrored and those the internal exclusion removed, so an operator sees both before the route runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ferry.common.config import RouteConfig

# How many topics a line names of each kind before it says how many more.
NAMED = 20


def included_topics(route: RouteConfig, topics: Iterable[str]) -> tuple[list[str], list[str]]:
    """(topics ``route``'s include mirrors, topics include matches that are internal and left out), sorted.

    A topic that ``exclude`` or the route's naming keeps out is in neither: those are the operator's own choice.
    """
    mirrored, internal = [], []
    for topic in sorted(set(topics)):
        if route.wants(topic):
            mirrored.append(topic)
        elif (
            any(re.fullmatch(p, topic) for p in route.include)
            and not any(re.fullmatch(p, topic) for p in route.exclude)
            and route.is_internal(topic)
        ):
            internal.append(topic)
    return mirrored, internal


def summary(route: RouteConfig, topics: Iterable[str]) -> str:
    """One line: the topics the route's include mirrors from its source and the internal ones it leaves out."""
    mirrored, internal = included_topics(route, topics)
    line = f"include mirrors {_named(mirrored)} of {route.source}"
    if internal:
        line += f"; left out as internal (exclude_internal): {_named(internal)}"
    return line


def _named(topics: list[str]) -> str:
    if not topics:
        return "no topic"
    more = f" and {len(topics) - NAMED} more" if len(topics) > NAMED else ""
    return f"{len(topics)} topic{'s' if len(topics) != 1 else ''} ({', '.join(topics[:NAMED])}{more})"
