"""The fleet's pure decisions: names, labels, what to add or remove, the order of a rolling restart.

No I/O and no clock here; ``fleet.manager`` applies these decisions to a Docker engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ferry.fleet.errors import FleetError

LABEL_FLEET = "io.ferry.fleet"
LABEL_ROLE = "io.ferry.role"
LABEL_INDEX = "io.ferry.index"
LABEL_PORT = "io.ferry.port"
LABEL_CONFIG = "io.ferry.config"
CONTROLLER = "controller"
WORKER = "worker"
ROLES = (CONTROLLER, WORKER)
CONFIG_IN_CONTAINER = "/etc/ferry/ferry.yaml"

_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,29}")


def check_fleet_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise FleetError(
            f"fleet name {name!r} is invalid: 1-30 of a-z, 0-9, '_' and '-', starting with a letter or digit"
        )
    return name


def container_name(fleet: str, role: str, index: int) -> str:
    """The container's name, also the controller's or worker's Ferry id: ``ferry-<fleet>-<role>-<n>``."""
    return f"ferry-{fleet}-{role}-{index}"


def labels(fleet: str, role: str, index: int, port: int, config: str) -> dict[str, str]:
    return {LABEL_FLEET: fleet, LABEL_ROLE: role, LABEL_INDEX: str(index), LABEL_PORT: str(port), LABEL_CONFIG: config}


def command(role: str, name: str, port: int) -> list[str]:
    """The ``ferry`` arguments a member runs with (the image's entry point is ``ferry``)."""
    port_flag = "--rest-port" if role == CONTROLLER else "--metrics-port"
    return [role, "--config", CONFIG_IN_CONTAINER, "--id", name, port_flag, str(port)]


@dataclass(frozen=True)
class Member:
    """One container of a fleet, as its labels and the engine describe it."""

    name: str
    role: str
    index: int
    port: int
    state: str  # the engine's: created, running, restarting, exited, ...

    @classmethod
    def from_labels(cls, name: str, container_labels: Mapping[str, str], state: str) -> Member:
        return cls(
            name,
            container_labels.get(LABEL_ROLE, "?"),
            int(container_labels.get(LABEL_INDEX, "0")),
            int(container_labels.get(LABEL_PORT, "0")),
            state,
        )


@dataclass(frozen=True)
class ScalePlan:
    add: tuple[int, ...]
    remove: tuple[int, ...]


def scale_plan(indices: Iterable[int], target: int) -> ScalePlan:
    """Which worker indices to add or remove so ``target`` remain.

    Removes the highest indices first (the newest workers); adds the lowest unused ones.
    """
    if target < 0:
        raise FleetError("--workers must be 0 or more")
    current = sorted(set(indices))
    if target <= len(current):
        return ScalePlan((), tuple(reversed(current[target:])))
    taken, candidate = set(current), 1
    add: list[int] = []
    while len(current) + len(add) < target:
        if candidate not in taken:
            add.append(candidate)
        candidate += 1
    return ScalePlan(tuple(add), ())


def rolling_order(members: Sequence[Member], leader: str | None) -> list[Member]:
    """Workers by index, then standby controllers, then the leader: leadership moves once."""
    workers = sorted((m for m in members if m.role == WORKER), key=lambda m: m.index)
    standbys = sorted((m for m in members if m.role == CONTROLLER and m.name != leader), key=lambda m: m.index)
    leading = [m for m in members if m.role == CONTROLLER and m.name == leader]
    return workers + standbys + leading
