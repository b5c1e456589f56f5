"""The ``tree`` section (a distribution tree's levels) and the check that routes never copy in a loop."""

from __future__ import annotations

from pydantic import Field, field_validator

from ferry.common.config.base import _Strict
from ferry.common.config.routes import Compression, RouteConfig
from ferry.common.core import naming as topic_naming
from ferry.common.core import tree as distribution_tree


class TreeConfig(_Strict):
    """Axual's distribution tree (:mod:`common.core.tree`): its routes are derived, one per distributor."""

    layout: str = Field(min_length=3)
    """clusters as leaves of a binary tree, e.g. 3(1(a,b),1(c,d)) or ((a,(b,c)),(d,e)); [level](left,right); levels
    default to heights"""
    include: list[str] = Field(min_length=1)
    """what every distributor mirrors (full-name regular expressions)"""
    exclude: list[str] = Field(default_factory=list)
    """... and not"""
    config_exclude: list[str] = Field(default_factory=list)
    """destination configs that do not follow"""
    replication_factor: int | None = Field(None, ge=1)
    """replicas of every distributor's destination topics (as a route's replication_factor); absent: the source
    topic's"""
    compression: Compression = "lz4"
    """every distributor's producer compression.type (as a route's compression)"""
    targets: dict[str, str] = Field(default_factory=dict)
    """distributor (<cluster>.L<level>) -> its target leaf; a distributor not named here: its subtree's first leaf"""
    switch_after_s: float = Field(60.0, ge=0)
    """the leader switches a distributor to another leaf of its subtree when its target has been unreachable this long;
    0: never by itself (`ferry tree switch` still can)"""
    probe_interval_s: float = Field(5.0, gt=0)
    """how often the leader probes every leaf"""

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: str) -> str:
        distribution_tree.parse(value)  # TreeError is a ValueError: pydantic reports it under tree.layout
        return value

    def derive_routes(self) -> list[RouteConfig]:
        """One identity-named route per distributor, flags-filtered at its level."""
        derived = distribution_tree.distributors(distribution_tree.parse(self.layout))
        targets = distribution_tree.choose_targets(derived, self.targets)
        return [
            RouteConfig(
                source=d.cluster,
                destination=targets[d.name],
                include=self.include,
                exclude=self.exclude,
                config_exclude=self.config_exclude,
                replication_factor=self.replication_factor,
                compression=self.compression,
                copy_level=d.level,
                distributor=d.name,
            )
            for d in derived
        ]


def loop_problem(routes: list[RouteConfig]) -> str | None:
    """The first cycle of identity-named routes holding a route without loop prevention, named; None if none.

    Such a cycle copies a record around forever (or at least back to where it came from).
    Routes that rename topics do not count: a renamed copy is another topic.
    """
    edges: dict[str, list[RouteConfig]] = {}
    for route in routes:
        if topic_naming.is_identity(route):
            edges.setdefault(route.source, []).append(route)
    for start in routes:
        if start.protected or not topic_naming.is_identity(start):
            continue
        # Breadth-first from the route's destination back to its source: the shortest cycle through it.
        previous: dict[str, RouteConfig] = {}
        frontier = [start.destination]
        seen = {start.destination}
        while frontier and start.source not in seen:
            following = []
            for cluster in frontier:
                for route in edges.get(cluster, []):
                    if route.destination not in seen:
                        seen.add(route.destination)
                        previous[route.destination] = route
                        following.append(route.destination)
            frontier = following
        if start.source not in seen:
            continue
        cycle = [start]
        cluster = start.source
        while cluster != start.destination:
            cycle.insert(1, previous[cluster])
            cluster = previous[cluster].source
        clusters = " -> ".join([r.source for r in cycle] + [start.source])
        unprotected = [r.name for r in cycle if not r.protected]
        return (
            f"routes {', '.join(r.name for r in cycle)} form a cycle ({clusters}) with identity naming; "
            f"{', '.join(unprotected)} {'has' if len(unprotected) == 1 else 'have'} no loop prevention, so records "
            f"would be copied around it again and again. Set loop_prevention: true on every route of the cycle, "
            f"or naming: prefix"
        )
    return None
