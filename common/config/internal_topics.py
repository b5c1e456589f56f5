"""The ``internal_topics`` section: how Ferry's own topics are created on each cluster.

Ferry's own topics are the offset map (``__ferry_offset_map``) and the checkpoints
(``__ferry_checkpoints``) on every route's destination, and the heartbeats (``ferry.heartbeats``)
on every cluster a route touches. Their settings live here, not under ``clusters``: a cluster's
entry is passed to librdkafka (and Spark) as it is, and librdkafka refuses properties it does not
know.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from ferry.common.config.base import _Strict

DEFAULT_INTERNAL_REPLICATION_FACTOR = 3


class InternalTopicsConfig(_Strict):
    replication_factor: int = Field(DEFAULT_INTERNAL_REPLICATION_FACTOR, ge=1)
    """replicas of Ferry's own topics (__ferry_offset_map, __ferry_checkpoints, ferry.heartbeats) on every cluster,
    capped at the cluster's size (logged; while brokers of the cluster are away a topic waits for them); MirrorMaker 2's
    offset-syncs/checkpoints/heartbeats.topic.replication.factor"""
    clusters: dict[str, int] = Field(default_factory=dict)
    """cluster name -> the replication factor of Ferry's own topics there, where it differs from replication_factor"""

    @field_validator("clusters")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        bad = sorted(name for name, factor in value.items() if factor < 1)
        if bad:
            raise ValueError(f"a replication factor is at least 1 (clusters {bad})")
        return value

    def replication_factor_on(self, cluster: str) -> int:
        """The replication factor Ferry's own topics are created with on ``cluster`` (before the broker cap)."""
        return self.clusters.get(cluster, self.replication_factor)
