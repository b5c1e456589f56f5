"""Ferry's domain words, as types: states, problems, operation kinds, and named ids.

Every enum here is a string enum: a member *is* its value (``PartitionState.ONLINE == "ONLINE"``,
``json.dumps`` and f-strings write ``ONLINE``), so the words on the wire (ZooKeeper payloads, REST
answers, metrics labels, Spark columns) are the same as when they were plain strings, and a
payload written by an older Ferry reads back unchanged.

Pure: no I/O. Words used by one package only may live there; these are shared across packages.
"""

from __future__ import annotations

import re
import sys
from enum import Enum
from typing import NewType

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - Python 3.10: the same behaviour as 3.11's enum.StrEnum

    class StrEnum(str, Enum):
        """``enum.StrEnum`` for Python 3.10: ``str()`` and ``format()`` give the value."""

        __str__ = str.__str__
        __format__ = str.__format__  # type: ignore[assignment]


WorkerId = NewType("WorkerId", str)
"""A worker's id (``ferry worker --id``): its ``workers/live/<id>`` node and its assignment's name."""

RouteName = NewType("RouteName", str)
"""A route's name, ``<source>.<destination>`` (two cluster names from the config)."""


class PartitionState(StrEnum):
    """What a worker reports for a partition (uReplicator's OnlineOffline model, plus ERROR).

    ``OFFLINE -> ONLINE`` (acquired), ``ONLINE -> OFFLINE`` (released), ``ONLINE -> ERROR``
    (stopped: the reason is carried), ``ERROR -> OFFLINE`` (released), ``ONLINE <-> PAUSED``
    (an operator paused or resumed it: still held, acknowledged offsets committed, not consumed),
    ``PAUSED -> OFFLINE`` (released).
    """

    ONLINE = "ONLINE"
    OFFLINE = "OFFLINE"
    ERROR = "ERROR"
    PAUSED = "PAUSED"


HELD_STATES = frozenset({PartitionState.ONLINE, PartitionState.ERROR, PartitionState.PAUSED})
"""States in which a worker holds a partition (its consumer is assigned to it)."""


class Problem(StrEnum):
    """What is wrong with a partition (``/validation``, ``ferry validate``), most important first:
    a partition reports only the first that applies."""

    ERROR = "error"  # a worker reports it ERROR (the reason is carried)
    UNASSIGNED = "unassigned"  # the ideal state has no worker for it
    WORKER_DEAD = "worker_dead"  # its ideal worker is not live
    WRONG_WORKER = "wrong_worker"  # another worker than the ideal one reports it ONLINE
    MISSING = "missing"  # no worker reports it ONLINE or ERROR
    NOT_ONLINE = "not_online"  # its ideal worker reports it OFFLINE
    UNEXPECTED = "unexpected"  # a worker reports it ONLINE or ERROR, but the ideal state does not have it


class ControllerState(StrEnum):
    """A controller's lifecycle: ``STANDBY -> LEADING -> STANDBY`` (lead lost), any -> ``STOPPED``.

    ``GET /health`` answers it as ``state``.
    """

    STANDBY = "STANDBY"
    LEADING = "LEADING"
    STOPPED = "STOPPED"


class WorkerState(StrEnum):
    """A worker's lifecycle (``worker/service.py`` says when each transition happens)::

        STARTING -> RUNNING <-> SUSPENDED;  RUNNING -> DRAINING -> STOPPED

    The worker's ``GET /health`` answers it as ``status``.
    """

    STARTING = "STARTING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    DRAINING = "DRAINING"
    STOPPED = "STOPPED"


class OpKind(StrEnum):
    """One ZooKeeper write of a leader's fenced transaction (``controller/lead/store.py`` ``Op``)."""

    CREATE = "create"
    SET = "set"
    DELETE = "delete"


# -- name rules: the one definition of each, used by the config, the REST edge, the OpenAPI document
# and the domain. Patterns are written without anchors; ``*_NAME`` are compiled for ``fullmatch``
# (a pattern's ``$`` would also match before a trailing newline).

TOPIC_PATTERN = r"[A-Za-z0-9._-]{1,249}"
"""Kafka's own rule (``org.apache.kafka.common.internals.Topic``): 1-249 of ``[A-Za-z0-9._-]``, not ``.`` or ``..``."""
CLUSTER_PATTERN = r"[A-Za-z0-9_-]{1,64}"
"""A cluster name in the config: it becomes part of ZooKeeper node names, route names and group ids."""
ROUTE_PATTERN = rf"{CLUSTER_PATTERN}\.{CLUSTER_PATTERN}"
"""A route, ``<source>.<destination>``: two cluster names."""
DISTRIBUTOR_PATTERN = rf"{CLUSTER_PATTERN}\.L[0-9]{{1,2}}"
"""A distributor of the distribution tree, ``<cluster>.L<level>``."""
GROUP_PATTERN = r"[!-.0-~]{0,124}[!-\-0-~][!-.0-~]{0,124}"
"""A consumer group id as Ferry's REST paths take it: printable ASCII without ``/``, not only dots
(Kafka itself allows any group id)."""
MAX_PARTITIONS = 2**31 - 1
"""Kafka's partition ids are int32: a topic has at most this many partitions."""

TOPIC_NAME = re.compile(TOPIC_PATTERN)
CLUSTER_NAME = re.compile(CLUSTER_PATTERN)
ROUTE_NAME = re.compile(ROUTE_PATTERN)
DISTRIBUTOR_NAME = re.compile(DISTRIBUTOR_PATTERN)
GROUP_NAME = re.compile(GROUP_PATTERN)


def anchored(pattern: str) -> str:
    """``pattern`` anchored at both ends, as JSON Schema's ``pattern`` (a search) needs it."""
    return f"^{pattern}$"


def topic_name_problem(name: object) -> str | None:
    """Why ``name`` is not a legal Kafka topic name, or None when it is."""
    if not isinstance(name, str) or not name:
        return "a topic name must be a non-empty string"
    if name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > 249:
        return f"topic name is {len(name)} characters long; Kafka allows at most 249"
    if not TOPIC_NAME.fullmatch(name):
        return f"topic name {name!r} may contain only ASCII letters, digits, '.', '_' and '-'"
    return None
