"""Which records each route copies in an identity-named topology (active-active, mesh, chain).

Pure: no I/O, no clock.

"Never copy a record back to where it was" is not enough in a mesh: in ``a``, ``b``, ``c`` fully
meshed, ``c`` would get ``a``'s record from ``a`` and again from ``b``. So every origin gets one
*forwarding tree*: the breadth-first tree from the origin over the routes with loop prevention
(ties broken by cluster name, so every worker derives the same tree from the same config). A
route ``s -> d`` copies a record that originated at ``o`` only when ``s -> d`` is an edge of
``o``'s tree, and never when ``d`` is on the record's path. Each cluster reachable from ``o``
thus gets each record of ``o`` once, on the shortest route:

- ``a <-> b``: ``a``'s tree is ``a -> b``; ``b -> a`` copies only records that originated at ``b``.
- a full mesh: every tree is the origin's direct routes; nobody forwards another cluster's record.
- a chain ``a -> b -> c``: ``a``'s tree is ``a -> b -> c``; ``b`` forwards ``a``'s records to ``c``.

A record without the provenance header originated at the cluster it is on (the route's source),
and a route always copies those (a direct route is in its source's tree).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ferry.common.core import tree
from ferry.common.core.provenance import Provenance


class LoopRoute(Protocol):
    @property
    def source(self) -> str: ...

    @property
    def destination(self) -> str: ...


def forwarding_trees(routes: Iterable[LoopRoute]) -> dict[str, frozenset[tuple[str, str]]]:
    """Per origin cluster, the ``(source, destination)`` routes its records travel."""
    out: dict[str, list[str]] = {}
    for route in routes:
        out.setdefault(route.source, []).append(route.destination)
    trees: dict[str, frozenset[tuple[str, str]]] = {}
    for origin in sorted(out):
        reached = {origin}
        edges: set[tuple[str, str]] = set()
        frontier = [origin]
        while frontier:
            following = []
            for cluster in sorted(frontier):
                for destination in sorted(out.get(cluster, [])):
                    if destination not in reached:
                        reached.add(destination)
                        edges.add((cluster, destination))
                        following.append(destination)
            frontier = following
        trees[origin] = frozenset(edges)
    return trees


def copied_origins(routes: Iterable[LoopRoute], source: str, destination: str) -> frozenset[str]:
    """The origins whose records the route ``source -> destination`` copies (its source's always)."""
    trees = forwarding_trees(routes)
    origins = {origin for origin, edges in trees.items() if (source, destination) in edges}
    return frozenset(origins | {source})


def copy_flags(
    provenance: Provenance | None, destination: str, origins: frozenset[str] | None, level: int | None
) -> int | None:
    """Whether a route copies a record, and with which copy flags: None means skip it.

    ``provenance``: the record's header (None: a local record, flags 0). ``level``: the route is
    a tree distributor of that level (copy flags decide, :func:`common.core.tree.copy_flags`).
    ``origins``: the route has loop prevention and copies records of these origins only (see
    :func:`copied_origins`); a record that came from or through ``destination`` is never copied.
    Neither: the record is copied, its flags kept.
    """
    flags = provenance.flags if provenance is not None else 0
    if level is not None:
        return tree.copy_flags(flags, level)
    if (
        origins is not None
        and provenance is not None
        and (provenance.passed_through(destination) or provenance.origin not in origins)
    ):
        return None
    return flags
