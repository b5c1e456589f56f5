"""What a request to mirror a topic asks for, as typed values: the REST edge builds them from a checked
request body, the tests and tools build them directly.

The values are already well formed (a Kafka topic name, a count from 1 to ``MAX_PARTITIONS``, a start
position as :func:`common.config.start_position` gives it); :class:`controller.topics.admin.TopicAdmin`
checks only what needs the domain: the source has the topic, the count fits the source's, the topic is
not internal nor mirrored already.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TopicSpec:
    """Mirror ``topic``: ``num_partitions`` of its partitions (None: every partition at the source), from
    ``start`` (earliest, latest or epoch milliseconds; None: the route's start)."""

    topic: str
    num_partitions: int | None = None
    start: str | int | None = None
