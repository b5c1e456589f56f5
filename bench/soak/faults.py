"""The faults the soak can inject, declared once in :data:`FAULTS` (pure: data, no I/O).

Each entry says what the fault is called (``--faults kill,stop``), what it does (the command's help
and the report's fault table), how long it is expected to take (the schedule keeps the gaps between
faults from that), whether a run draws it unless ``--faults`` says otherwise, and how it is run: a
call on the soak's nemesis (:class:`FaultTarget`, which :class:`ferry.bench.soak.nemesis.Nemesis` is).
The command line, the schedule, the nemesis and the report all read this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

# An outage fault (ZooKeeper stopped for ``--zookeeper-down-s``) is expected to take the outage and this
# much more: the stop before it and the start after it.
OUTAGE_MARGIN_S = 5.0


class FaultTarget(Protocol):
    """What the faults act through: each method applies one fault, returns once it is over, and names
    what it hit (a worker, a controller, a broker)."""

    def kill_worker(self) -> str: ...

    def stop_worker(self) -> str: ...

    def kill_leader(self) -> str: ...

    def stop_zookeeper(self) -> str: ...

    def restart_broker(self, cluster: str) -> str: ...

    def add_and_remove_worker(self) -> str: ...

    def move_partitions(self) -> str: ...


@dataclass(frozen=True, kw_only=True)
class Fault:
    """One fault of the soak: ``name`` (on the command line and in the report), what it ``does``, how
    long it is ``expected_s`` to take from start to end (an ``outage`` fault: as long as the outage
    asked for, plus :data:`OUTAGE_MARGIN_S`), whether a run draws it ``by_default``, and how it is
    ``run`` on a :class:`FaultTarget` (returning what it hit)."""

    name: str
    does: str
    expected_s: float
    run: Callable[[FaultTarget], str]
    by_default: bool = True
    outage: bool = False


FAULTS: tuple[Fault, ...] = (
    Fault(
        name="kill",
        does="kill -9 of a worker (the supervisor starts it again)",
        expected_s=5.0,
        run=lambda target: target.kill_worker(),
    ),
    Fault(
        name="stop",
        does="SIGSTOP of a worker past its ZooKeeper session timeout, then SIGCONT",
        expected_s=12.0,
        run=lambda target: target.stop_worker(),
    ),
    Fault(
        name="leader",
        does="kill -9 of the leading controller",
        expected_s=5.0,
        run=lambda target: target.kill_leader(),
    ),
    Fault(
        name="zookeeper",
        does="ZooKeeper stopped for --zookeeper-down-s, then started again",
        expected_s=120.0,
        run=lambda target: target.stop_zookeeper(),
        outage=True,
    ),
    Fault(
        name="dst-broker",
        does="one destination broker restarted",
        expected_s=30.0,
        run=lambda target: target.restart_broker("dst"),
    ),
    Fault(
        name="src-broker",
        does="the source broker restarted",
        expected_s=30.0,
        run=lambda target: target.restart_broker("src"),
    ),
    Fault(
        name="scale",
        does="a worker added, then removed",
        expected_s=30.0,
        run=lambda target: target.add_and_remove_worker(),
    ),
    # Drains, chained drains, cordons and a worker joining and leaving, each a second or two apart.
    Fault(
        name="moves",
        does="partitions moved between live workers faster than they acknowledge",
        expected_s=25.0,
        run=lambda target: target.move_partitions(),
    ),
)

NAMES: tuple[str, ...] = tuple(fault.name for fault in FAULTS)
DEFAULT: tuple[str, ...] = tuple(fault.name for fault in FAULTS if fault.by_default)
_BY_NAME: Mapping[str, Fault] = {fault.name: fault for fault in FAULTS}
# How long each fault is expected to take, start to end, an outage fault's as declared (not as asked for).
EXPECTED_S: Mapping[str, float] = {fault.name: fault.expected_s for fault in FAULTS}


def named(name: str) -> Fault:
    """The fault called ``name``; KeyError for a name not in :data:`FAULTS`."""
    return _BY_NAME[name]


def parse_faults(text: str) -> tuple[str, ...]:
    """``kill,stop,...`` -> the faults' names, in the order given; ValueError naming an unknown one."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in _BY_NAME]
    if unknown or not names:
        raise ValueError(f"unknown faults {unknown}; choose from {','.join(NAMES)}")
    return names


def expected_lengths(outage_s: float) -> dict[str, float]:
    """Each fault's expected length in seconds, an outage fault's from ``outage_s`` (``--zookeeper-down-s``)."""
    return {fault.name: outage_s + OUTAGE_MARGIN_S if fault.outage else fault.expected_s for fault in FAULTS}


def help_text() -> str:
    """The faults for ``--help``: each name and what it does; those drawn by default marked."""
    return "; ".join(f"{fault.name}{'' if fault.by_default else ' (off by default)'}: {fault.does}" for fault in FAULTS)
