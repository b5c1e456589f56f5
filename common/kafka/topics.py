"""Ferry's internal topics (the offset map, checkpoints, heartbeats), each created once per cluster.

Several processes create the same internal topic (every worker its route's offset-map topic, the
leader its checkpoint and heartbeat topics): whoever is second gets ``TOPIC_ALREADY_EXISTS``,
which is no error. Once a cluster has the topic, it is not asked again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

from ferry.common.kafka.errors import kafka_error


class InternalTopic:
    """One internal topic, and the clusters known to have it."""

    def __init__(self, topic: NewTopic, timeout_s: float) -> None:
        self.topic = topic
        self._timeout_s = timeout_s
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
        future = client.create_topics([self.topic])[self.topic.topic]
        try:
            future.result(timeout=self._timeout_s)
        except KafkaException as exc:
            if kafka_error(exc).code != KafkaError.TOPIC_ALREADY_EXISTS:  # another process was first
                raise
        except TimeoutError:  # the future's own timeout: no broker answered
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"no answer within {self._timeout_s:g} s")) from None
        self._ready.add(cluster)
