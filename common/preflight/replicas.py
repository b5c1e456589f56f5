"""``ferry check --connect``'s replica check: where a copy has, or would get, fewer replicas than its source.

Pure: topic -> replica count maps in (what the clusters' metadata showed), one warning line per
route out; no I/O. A route's topics are the source topics its ``include`` patterns mirror, and those
whose copy already exists on the destination (added with ``POST /topics``). A copy that exists is
judged by its own replica count; one to come by what Ferry would create it with
(:mod:`common.core.topics.replicas`: the route's ``replication_factor``, else the source's, capped
at the destination's brokers).
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.common.config import RouteConfig
from ferry.common.core import naming as topic_naming
from ferry.common.core.topics.replicas import mirrored_replicas

# How many topics a warning names before it says how many more.
NAMED = 5


def fewer_replicas(
    route: RouteConfig, source: Mapping[str, int], destination: Mapping[str, int], brokers: int
) -> list[tuple[str, int, int]]:
    """(source topic, replicas of its copy, replicas at the source) for every topic of the route whose
    copy has or would get fewer replicas than the source topic. ``source``, ``destination``: topic ->
    replica count on each cluster; ``brokers``: the destination's broker count."""
    found = []
    for topic, at_source in sorted(source.items()):
        if topic.startswith("__") or topic_naming.refusal(route, topic) is not None:
            continue
        target = route.destination_topic(topic)
        if target in destination:
            copy = destination[target]
        elif route.wants(topic):
            copy = mirrored_replicas(route.replication_factor, at_source, brokers).factor
        else:
            continue
        if copy < at_source:
            found.append((topic, copy, at_source))
    return found


def warning(route: RouteConfig, found: list[tuple[str, int, int]], brokers: int) -> str:
    """One line about ``found`` (:func:`fewer_replicas`) of ``route``, whose destination has ``brokers`` brokers."""
    named = ", ".join(f"{topic} ({copy} < {at_source})" for topic, copy, at_source in found[:NAMED])
    more = f" and {len(found) - NAMED} more" if len(found) > NAMED else ""
    why = [f"{route.destination} has {brokers} broker{'s' if brokers != 1 else ''}"]
    if route.replication_factor is not None:
        why.append(f"the route's replication_factor is {route.replication_factor}")
    return (
        f"{len(found)} topic{'s' if len(found) != 1 else ''} would have fewer replicas on {route.destination} "
        f"than at the source: {named}{more} ({'; '.join(why)})"
    )
