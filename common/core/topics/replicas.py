"""How many replicas a topic Ferry creates gets, and the ``min.insync.replicas`` that goes with them.

Pure: plain numbers in, plain numbers out; no I/O, no clock.

A mirrored topic gets the replication factor its route asks for (``replication_factor``), or else
its source topic's, so a disaster-recovery copy is as durable as what it copies whatever the
destination's ``default.replication.factor`` is. Ferry's own topics get their cluster's
``internal_topics`` replication factor (3 unless configured). Either is capped at the size of the
cluster the topic is created on: Kafka refuses a topic with more replicas than brokers, and a copy
with fewer replicas beats no copy (the caller logs the cap and counts it, ``ferry check --connect``
warns about it beforehand).

The cluster's size is not the brokers registered at the moment: a topic created while one broker
restarts would keep one replica fewer for good (Kafka never adds replicas by itself). It is the
brokers the cluster *knows*: those registered now and those that hold replicas of its existing
topics (the metadata names every replica's broker, up or down; a cluster's ``__consumer_offsets``
alone spreads over all its brokers). When fewer are registered than the topic is to get, and the
known brokers would give it more, the topic is not created yet (:func:`replicas_now` says wait):
the caller retries until the brokers are back. Broker configs (``default.replication.factor``,
``offsets.topic.replication.factor``) are left out: they say what an operator meant, not how many
brokers there are, and reading them needs ``DescribeConfigs`` on the cluster, which Ferry's least
privilege does not grant. A broker that holds no replica yet and is down is missed: the topic then
gets the replicas the cluster can give now.

A destination topic's ``min.insync.replicas`` follows the source's like its other configs, but
never above the destination topic's own replica count: with more, no write with ``acks=all``
(Ferry's) could ever succeed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True)
class Replicas:
    """The replication factor a topic is created with, and what was asked for before the cap."""

    factor: int
    wanted: int

    @property
    def capped(self) -> bool:
        return self.factor < self.wanted


def replicas_for(wanted: int, brokers: int) -> Replicas:
    """``wanted`` replicas on a cluster of ``brokers`` brokers (at least one replica, at most one per broker)."""
    wanted = max(1, wanted)
    return Replicas(max(1, min(wanted, brokers)), wanted)


def replicas_now(wanted: int, registered: int, known: int) -> Replicas | None:
    """The replicas a topic of ``wanted`` replicas is created with now, on a cluster whose ``registered``
    brokers answer of the ``known`` ones (registered or holding replicas); None: not now, wait for the
    missing brokers. Capped only at the cluster's own size (the known brokers), never below it."""
    wanted = max(1, wanted)
    target = min(wanted, max(1, registered, known))
    return Replicas(target, wanted) if registered >= target else None


def mirrored_replicas(configured: int | None, at_source: int, brokers: int) -> Replicas:
    """A mirrored topic's replicas: the route's ``configured`` factor, else the source topic's
    (``at_source``), capped at the destination's ``brokers``."""
    return replicas_for(configured if configured is not None else at_source, brokers)


def replica_count(replicas_per_partition: Iterable[int]) -> int:
    """A topic's replication factor from its partitions' replica counts (the largest; 0 for none)."""
    return max(replicas_per_partition, default=0)


def capped_configs(configs: Mapping[str, str], replicas: int) -> dict[str, str]:
    """``configs`` with ``min.insync.replicas`` lowered to ``replicas`` where it is higher (a value
    that is no number is left alone: the broker judges it)."""
    result = dict(configs)
    value = result.get(MIN_INSYNC_REPLICAS)
    if value is not None and replicas > 0:
        try:
            wanted = int(value)
        except ValueError:
            return result
        if wanted > replicas:
            result[MIN_INSYNC_REPLICAS] = str(replicas)
    return result
