"""The leader's topic observer: what to whitelist, expand, and which destination configs to set.

Pure: plain data in, plain data out; no I/O, no clock. :class:`controller.service.Controller`
gathers the inputs (source topics, ideal states, removed topics, topic configs) and applies
the decisions.

- A source topic is whitelisted on a route when its full name matches one of the route's
  ``include`` patterns and none of its ``exclude`` patterns, it is not internal (Kafka's own
  ``__*``, whatever the route says, and other systems' internal topics: the route's
  ``exclude_internal``, :meth:`common.config.RouteConfig.wants`), and nobody removed it through
  ``DELETE /topics/<topic>`` (until someone POSTs it again).
- A mirrored topic whose source gained partitions is expanded to the source's count.
- Destination topic configs follow the source's topic-level configs, except the route's
  ``config_exclude`` keys; ``min.insync.replicas`` never above the destination topic's replica
  count (:mod:`common.core.topics.replicas`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ferry.common.config import RouteConfig
from ferry.common.core.topics.replicas import capped_configs
from ferry.common.model import IdealState, TopicKey


def is_internal(topic: str) -> bool:
    """Kafka's own topics (``__consumer_offsets``, ``__transaction_state``, ...) are never mirrored by ``include``,
    whatever a route's ``exclude_internal`` says."""
    return topic.startswith("__")


@dataclass(frozen=True)
class Decisions:
    add: dict[TopicKey, int] = field(default_factory=dict)  # topic -> partitions to mirror
    expand: dict[TopicKey, int] = field(default_factory=dict)  # topic -> new partition count


def decide(
    routes: Collection[RouteConfig],
    source_topics: Mapping[str, Mapping[str, int]],
    ideal: Mapping[TopicKey, IdealState],
    removed: Collection[TopicKey],
) -> Decisions:
    """``source_topics``: route name -> {topic: partitions at the route's source}."""
    decisions = Decisions()
    for route in routes:
        for topic, partitions in sorted(source_topics.get(route.name, {}).items()):
            key = TopicKey(route.name, topic)
            state = ideal.get(key)
            if state is not None:
                if partitions > state.partitions:
                    decisions.expand[key] = partitions
            elif route.include and not is_internal(topic) and key not in removed and route.wants(topic):
                decisions.add[key] = partitions
    return decisions


def config_changes(
    source: Mapping[str, str], destination: Mapping[str, str], exclude: Collection[str], replicas: int = 0
) -> dict[str, str]:
    """The destination topic configs to set so they follow the source (excluded keys never);
    ``replicas``: the destination topic's replica count, which caps ``min.insync.replicas`` (0: unknown)."""
    wanted = capped_configs(source, replicas)
    return {name: value for name, value in wanted.items() if name not in exclude and destination.get(name) != value}
