"""Axual's distribution tree: clusters as the leaves of a binary tree, distributors, copy flags.

Pure: no I/O, no clock.

The operator writes the tree as one line (config key ``tree.layout``)::

    node   := cluster | [level] "(" node "," node ")"
    e.g.  "3(1(c1,c2),1(c3,c4))"     Axual's four-cluster example, levels 3 and 1 as Axual draws it
          "((c1,(c2,c3)),(c4,c5))"   an unbalanced tree; levels derived: 3, 2, 1 and 1

A node without a level gets its height (1 above two leaves, the larger child's height + 1 above
that), which gives the unbalanced example above its levels; a level may be given to match a drawing
(Axual's balanced example uses 3 and 1). Levels must grow strictly from every leaf to the
root, since a distributor's mask covers its own bit and all lower ones.

**Distributors.** On every leaf there is one distributor per node above it (per *level*); the
distributor of level ``L`` on leaf ``x`` copies to the other child subtree of that node, i.e. to
one chosen leaf of it (its *target*), which the operator may switch to another leaf of the same
subtree. **Copy flags** (an integer bitmask, carried in the provenance header): level ``L``'s bit
is ``1 << (L-1)`` and its mask is ``(1 << L) - 1`` (its bit and all lower bits). A distributor
copies a record only when ``flags & mask == 0`` and sets its bit on the copy; a record without the
header counts as flags 0. Every record produced on a leaf thus reaches every other leaf once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

MAX_LEVEL = 62  # flags travel as a decimal integer; keep them a signed 64-bit value for other readers

_TOKEN = re.compile(r"\s*(?:(\d+)?\s*(\()|(\))|(,)|([A-Za-z0-9_-]+))")


class TreeError(ValueError):
    """A layout that is not a valid distribution tree; the message says where and why."""


@dataclass(frozen=True)
class Node:
    """A leaf (``cluster`` set) or an inner node (``level``, ``left``, ``right`` set)."""

    cluster: str | None = None
    level: int = 0
    left: Node | None = None
    right: Node | None = None

    def leaves(self) -> tuple[str, ...]:
        if self.cluster is not None:
            return (self.cluster,)
        assert self.left is not None and self.right is not None
        return self.left.leaves() + self.right.leaves()

    def render(self) -> str:
        """The layout line of this (sub)tree, levels written out."""
        if self.cluster is not None:
            return self.cluster
        assert self.left is not None and self.right is not None
        return f"{self.level}({self.left.render()},{self.right.render()})"


def bit(level: int) -> int:
    return 1 << (level - 1)


def mask(level: int) -> int:
    return (1 << level) - 1


def copy_flags(flags: int, level: int) -> int | None:
    """The copy's flags when the distributor of ``level`` copies a record carrying ``flags``; None: it does not."""
    if flags & mask(level):
        return None
    return flags | bit(level)


def format_flags(flags: int, width: int = 4) -> str:
    """Flags as Axual draws them, e.g. ``0101``."""
    return format(flags, "b").zfill(width)


def parse(layout: str) -> Node:
    """Parses a layout line (module docstring); :class:`TreeError` names the problem."""
    tokens = list(_tokens(layout))
    position = 0

    def node() -> Node:
        nonlocal position
        if position >= len(tokens):
            raise TreeError(f"layout {layout!r} ends too early")
        kind, value = tokens[position]
        position += 1
        if kind == "name":
            return Node(cluster=value)
        if kind != "open":
            raise TreeError(f"layout {layout!r}: expected a cluster or '(' but found {value!r}")
        left = node()
        expect("comma")
        right = node()
        expect("close")
        level = int(value) if value else max(_height(left), _height(right)) + 1
        return Node(level=level, left=left, right=right)

    def expect(kind: str) -> None:
        nonlocal position
        if position >= len(tokens) or tokens[position][0] != kind:
            found = tokens[position][1] if position < len(tokens) else "the end"
            raise TreeError(
                f"layout {layout!r}: expected {dict(comma=',', close=')')[kind]!r} but found {found!r}"
                " (each node has exactly two children)"
            )
        position += 1

    root = node()
    if position != len(tokens):
        raise TreeError(f"layout {layout!r}: unexpected {tokens[position][1]!r} after the root")
    if root.cluster is not None:
        raise TreeError(f"layout {layout!r}: a tree needs at least two clusters")
    leaves = root.leaves()
    twice = sorted({leaf for leaf in leaves if leaves.count(leaf) > 1})
    if twice:
        raise TreeError(f"layout {layout!r}: clusters {twice} appear more than once")
    _check_levels(root, layout)
    return root


def _tokens(layout: str) -> Iterator[tuple[str, str]]:
    position = 0
    text = layout.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise TreeError(f"layout {layout!r}: cannot read {text[position : position + 10].strip()!r}")
        level, opening, closing, comma, name = match.groups()
        if opening:
            yield "open", level or ""
        elif closing:
            yield "close", ")"
        elif comma:
            yield "comma", ","
        else:
            yield "name", name
        position = match.end()


def _height(node: Node) -> int:
    if node.cluster is not None:
        return 0
    assert node.left is not None and node.right is not None
    return max(_height(node.left), _height(node.right)) + 1


def _check_levels(node: Node, layout: str) -> None:
    if node.cluster is not None:
        return
    assert node.left is not None and node.right is not None
    if not 1 <= node.level <= MAX_LEVEL:
        raise TreeError(f"layout {layout!r}: level {node.level} is outside 1..{MAX_LEVEL}")
    for child in (node.left, node.right):
        if child.cluster is None and child.level >= node.level:
            raise TreeError(
                f"layout {layout!r}: level {child.level} ({child.render()}) must be lower than the "
                f"level {node.level} above it: levels grow from the leaves to the root"
            )
        _check_levels(child, layout)


@dataclass(frozen=True)
class Distributor:
    """The distributor of ``level`` on leaf ``cluster``: copies to one leaf of ``subtree``."""

    cluster: str
    level: int
    subtree: tuple[str, ...]  # the leaves it may copy to, in layout order
    subtree_layout: str

    @property
    def name(self) -> str:
        """``<cluster>.L<level>``: unique per distributor."""
        return f"{self.cluster}.L{self.level}"

    @property
    def mask(self) -> int:
        return mask(self.level)

    @property
    def bit(self) -> int:
        return bit(self.level)


def distributors(root: Node) -> list[Distributor]:
    """Every distributor of the tree, by cluster (layout order), then level (lowest first)."""
    found: list[Distributor] = []

    def walk(node: Node) -> None:
        if node.cluster is not None:
            return
        assert node.left is not None and node.right is not None
        for here, there in ((node.left, node.right), (node.right, node.left)):
            for leaf in here.leaves():
                found.append(Distributor(leaf, node.level, there.leaves(), there.render()))
        walk(node.left)
        walk(node.right)

    walk(root)
    order = {leaf: i for i, leaf in enumerate(root.leaves())}
    return sorted(found, key=lambda d: (order[d.cluster], d.level))


def choose_targets(tree: list[Distributor], chosen: Mapping[str, str]) -> dict[str, str]:
    """Each distributor's target leaf: ``chosen[name]`` when given, else its subtree's first leaf.

    :class:`TreeError` when a chosen leaf is not in the distributor's subtree or names no distributor.
    """
    names = {d.name: d for d in tree}
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise TreeError(f"targets name no distributor: {unknown} (distributors: {sorted(names)})")
    targets: dict[str, str] = {}
    for d in tree:
        target = chosen.get(d.name, d.subtree[0])
        if target not in d.subtree:
            raise TreeError(f"target {target!r} of {d.name} is not a leaf of its subtree {list(d.subtree)}")
        targets[d.name] = target
    return targets


def table(tree: list[Distributor], targets: Mapping[str, str], states: Mapping[str, str] | None = None) -> str:
    """The distributors as a table a person can read (``ferry tree``, REST ``?format=text``)."""
    rows = [("DISTRIBUTOR", "CLUSTER", "LEVEL", "MASK", "SETS", "SUBTREE", "TARGET", "STATE")]
    width = max((d.level for d in tree), default=4)
    width = max(width, 4)
    for d in tree:
        rows.append(
            (
                d.name,
                d.cluster,
                str(d.level),
                format_flags(d.mask, width),
                format_flags(d.bit, width),
                d.subtree_layout,
                targets.get(d.name, "-"),
                (states or {}).get(d.name, "-"),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def ascii_tree(root: Node) -> str:
    """The tree drawn sideways (root left, leaves right), for docs and ``ferry tree``."""
    lines: list[str] = []

    def draw(node: Node, prefix: str, last: bool, top: bool) -> None:
        connector = "" if top else ("`-- " if last else "|-- ")
        label = (
            node.cluster if node.cluster is not None else f"level {node.level} (mask {format_flags(mask(node.level))})"
        )
        lines.append(f"{prefix}{connector}{label}")
        if node.cluster is None:
            assert node.left is not None and node.right is not None
            child_prefix = prefix + ("" if top else ("    " if last else "|   "))
            draw(node.left, child_prefix, False, False)
            draw(node.right, child_prefix, True, False)

    draw(root, "", True, True)
    return "\n".join(lines)


def switches(
    tree: list[Distributor],
    targets: Mapping[str, str],
    unreachable_since: Mapping[str, float],
    now: float,
    after_s: float,
) -> dict[str, str]:
    """Distributor -> new target, for each whose target leaf has been unreachable for ``after_s`` or longer.

    The new target is the first leaf of the same subtree that is reachable now (None reachable:
    no switch; the distributor keeps waiting for its target). Pure: the caller probes the leaves
    and keeps ``unreachable_since`` (leaf -> when it was first seen unreachable).
    """
    decided: dict[str, str] = {}
    for d in tree:
        current = targets.get(d.name, d.subtree[0])
        since = unreachable_since.get(current)
        if since is None or now - since < after_s:
            continue
        for leaf in d.subtree:
            if leaf != current and leaf not in unreachable_since:
                decided[d.name] = leaf
                break
    return decided
