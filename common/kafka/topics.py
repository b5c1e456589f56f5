"""Ferry's internal topics (the offset map, checkpoints, heartbeats), each created once per cluster.

Several processes create the same internal topic (every worker its route's offset-map topic, the
leader its checkpoint and heartbeat topics): whoever is second gets ``TOPIC_ALREADY_EXISTS``,
which is no error. Once a cluster has the topic, it is not asked again.

Each is created with its cluster's replication factor (``internal_topics`` in the config), capped
at the cluster's size, never at the brokers that happen to be registered: while a broker the cluster
knows is away, the topic waits (:func:`creation_replicas`, :mod:`common.core.topics.replicas`), told
by the metadata of the same admin client just before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.core.topics.replicas import Replicas, replicas_for, replicas_now
from ferry.common.kafka.errors import kafka_error

log = logging.getLogger(__name__)


class WaitingForBrokers(KafkaException):
    """A topic not created yet: fewer brokers are registered than it is to get, and the cluster has more.

    A temporary condition (a ``KafkaException`` with code ``BROKER_NOT_AVAILABLE``): the caller tries again."""

    def __init__(self, reason: str) -> None:
        super().__init__(KafkaError(KafkaError.BROKER_NOT_AVAILABLE, reason))


def creation_replicas(client: Any, wanted: int, registered: Collection[int], timeout_s: float) -> Replicas:
    """The replicas to create a topic of ``wanted`` replicas with now, through admin ``client``, whose
    metadata just showed ``registered`` broker ids. With fewer registered than wanted, the whole
    cluster's metadata tells the brokers that hold replicas (:func:`common.core.topics.replicas.replicas_now`).
    Raises :class:`WaitingForBrokers` (not now) or ``KafkaException``."""
    if len(registered) >= wanted:
        return replicas_for(wanted, len(registered))
    metadata = client.list_topics(timeout=timeout_s)
    up = set(metadata.brokers)
    known = up | {
        broker
        for topic in metadata.topics.values()
        for partition in topic.partitions.values()
        for broker in partition.replicas
    }
    replicas = replicas_now(wanted, len(up), len(known))
    if replicas is None:
        missing = sorted(known - up)
        raise WaitingForBrokers(
            f"{len(up)} of the cluster's {len(known)} brokers are registered (missing: {missing}), "
            f"the topic is to get {wanted} replicas: it waits for them"
        )
    return replicas


class InternalTopic:
    """One internal topic, and the clusters known to have it.

    ``replication_factor(cluster)``: the replicas wanted on ``cluster`` before the broker cap.
    """

    def __init__(
        self,
        *,
        name: str,
        timeout_s: float,
        replication_factor: Callable[[str], int],
        config: Mapping[str, str] | None = None,
        partitions: int = 1,
    ) -> None:
        self.name = name
        self._timeout_s = timeout_s
        self._replication_factor = replication_factor
        self._config = dict(config or {})
        self._partitions = partitions
        self._ready: set[str] = set()

    def ready(self, cluster: str) -> bool:
        """Whether ``cluster`` is known to have the topic."""
        return cluster in self._ready

    def ensure(self, cluster: str, admin: Callable[[], Any]) -> Replicas | None:
        """Creates the topic on ``cluster`` through ``admin()`` unless it is known to be there; the
        replicas it was created with here (None: it was there already). Raises :class:`WaitingForBrokers`
        while brokers of the cluster are away, :class:`KafkaException` when the cluster refuses or does
        not answer."""
        if cluster in self._ready:
            return None
        client = admin()  # held until the answer: a client dropped at once cancels its requests
        registered = client.list_topics(self.name, timeout=self._timeout_s).brokers
        replicas = creation_replicas(client, self._replication_factor(cluster), registered, self._timeout_s)
        topic = NewTopic(self.name, self._partitions, replicas.factor, config=self._config)
        future = client.create_topics([topic])[self.name]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            if kafka_error(exc).code != KafkaError.TOPIC_ALREADY_EXISTS:  # another process was first
                raise
            self._ready.add(cluster)
            return None
        except TimeoutError:  # the future's own timeout: no broker answered
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer within {self._timeout_s:g} s")) from None
        else:
            if replicas.capped:
                log.warning(
                    "created %s on %s with %d replicas instead of %d: the cluster has %d brokers",
                    self.name,
                    cluster,
                    replicas.factor,
                    replicas.wanted,
                    replicas.factor,  # capped only at the cluster's size
                )
        self._ready.add(cluster)
        return replicas
