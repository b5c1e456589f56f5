"""Ferry's internal topics (the offset map, checkpoints, heartbeats), each created once per cluster.

Several processes create the same internal topic (every worker its route's offset-map topic, the
leader its checkpoint and heartbeat topics): whoever is second gets ``TOPIC_ALREADY_EXISTS``,
which is no error. Once a cluster has the topic, it is not asked again.

Each is created with its cluster's replication factor (``internal_topics`` in the config), capped
at the cluster's broker count (:mod:`common.core.topics.replicas`), which the metadata of the same admin
client tells just before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.core.topics.replicas import replicas_for
from ferry.common.kafka.errors import kafka_error

log = logging.getLogger(__name__)


class InternalTopic:
    """One internal topic, and the clusters known to have it.

    ``replication_factor(cluster)``: the replicas wanted on ``cluster`` before the broker cap.
    """

    def __init__(
        self,
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

    def ensure(self, cluster: str, admin: Callable[[], Any]) -> None:
        """Creates the topic on ``cluster`` through ``admin()`` unless it is known to be there.
        Raises :class:`KafkaException` when the cluster refuses or does not answer."""
        if cluster in self._ready:
            return
        client = admin()  # held until the answer: a client dropped at once cancels its requests
        brokers = len(client.list_topics(self.name, timeout=self._timeout_s).brokers)
        replicas = replicas_for(self._replication_factor(cluster), brokers)
        topic = NewTopic(self.name, self._partitions, replicas.factor, config=self._config)
        future = client.create_topics([topic])[self.name]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            if kafka_error(exc).code != KafkaError.TOPIC_ALREADY_EXISTS:  # another process was first
                raise
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
                    brokers,
                )
        self._ready.add(cluster)
