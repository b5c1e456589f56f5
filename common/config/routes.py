"""The ``routes`` section: what each route copies, from where to where, and how (MirrorMaker 2's
take-over and a route's ``start`` included).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import Field, field_validator

from ferry.common.config.base import _Strict, _valid_regexes
from ferry.common.core import naming as topic_naming
from ferry.common.core import tree as distribution_tree

Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]
# Kafka Streams' names for the same promises (processing.guarantee).
DeliveryGuarantee = Literal["exactly_once", "at_least_once"]

# Other systems' internal topics, never mirrored by include unless a route's exclude_internal says otherwise:
# MirrorMaker 2's topics.exclude defaults, then the standard names of Schema Registry, Kafka Connect
# (config.storage.topic, offset.storage.topic, status.storage.topic) and Confluent's components (ksqlDB's
# _confluent-ksql-* included). Kafka Streams' -changelog and -repartition topics are left to the
# application's owner: a data topic may end so too (docs/configuration.md, routes[].exclude_internal).
DEFAULT_EXCLUDE_INTERNAL = (
    r"__.*",
    r".*[\-\.]internal",
    r".*\.replica",
    r"_schemas",
    r"connect-configs",
    r"connect-offsets",
    r"connect-status",
    r"_confluent.*",
)
# MirrorMaker 2's groups.exclude defaults: console consumers, Connect's sink connectors, Kafka's own.
DEFAULT_GROUPS_EXCLUDE_INTERNAL = (r"console-consumer-.*", r"connect-.*", r"__.*")


class MirrorMaker2Config(_Strict):
    """Take over a MirrorMaker 2 mirror: a partition this route has neither committed nor copied
    starts where MirrorMaker 2 stopped (its source offset in Connect's offsets topic, else its
    latest offset sync), and consumer groups the route's own offset map cannot translate yet are
    translated by MirrorMaker 2's last checkpoints (see docs/migration-from-mirrormaker2.md).
    Names default to MirrorMaker 2's own (dedicated mode, default policy separator)."""

    source_alias: str | None = None
    """MirrorMaker 2's alias of the source cluster; absent: the route's source"""
    target_alias: str | None = None
    """MirrorMaker 2's alias of the destination cluster; absent: the route's destination"""
    connector: str = "MirrorSourceConnector"
    """the MirrorSourceConnector's name (in Connect's offsets topic keys)"""
    offsets_topic: str | None = None
    """Connect's offsets topic on the destination; absent: mm2-offsets.<source_alias>.internal"""
    offset_syncs_topic: str | None = None
    """MirrorMaker 2's offset syncs; absent: mm2-offset-syncs.<target_alias>.internal"""
    offset_syncs_on: Literal["source", "destination"] = "source"
    """the cluster holding the offset syncs (MirrorMaker 2's offset-syncs.topic.location)"""
    checkpoints_topic: str | None = None
    """MirrorMaker 2's checkpoints on the destination; absent: <source_alias>.checkpoints.internal"""

    def names(self, source: str, destination: str) -> MirrorMaker2Config:
        """Every name resolved for the route ``source -> destination``."""
        src = self.source_alias or source
        dst = self.target_alias or destination
        return self.model_copy(
            update={
                "source_alias": src,
                "target_alias": dst,
                "offsets_topic": self.offsets_topic or f"mm2-offsets.{src}.internal",
                "offset_syncs_topic": self.offset_syncs_topic or f"mm2-offset-syncs.{dst}.internal",
                "checkpoints_topic": self.checkpoints_topic or f"{src}.checkpoints.internal",
            }
        )


class RouteConfig(_Strict):
    source: str
    """the cluster records are read from (a name under clusters)"""
    destination: str
    """the cluster records are written to (a name under clusters)"""
    include: list[str] = Field(default_factory=list)
    """auto-whitelisting by the leader's topic observer: a source topic whose full name matches one of these regular
    expressions (and none of exclude) is mirrored without a POST; empty: POST /topics only"""
    exclude: list[str] = Field(default_factory=list)
    """... and none of these"""
    exclude_internal: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDE_INTERNAL))
    """... nor of these: other systems' internal topics, which include never mirrors (full-name regular expressions;
    POST /topics still can). The default is MirrorMaker 2's topics.exclude (__.*, .*[-.]internal, .*\\.replica), Schema
    Registry's _schemas, Kafka Connect's connect-configs, connect-offsets and connect-status, and Confluent's
    _confluent.* (ksqlDB's _confluent-ksql-* among them); [] mirrors them too (Kafka's own __* topics never are).
    Kafka Streams' *-changelog and *-repartition topics are not in it: list your applications' own,
    <application.id>-.*-(changelog|repartition), in exclude. ferry check --connect lists what it removes"""
    config_exclude: list[str] = Field(default_factory=list)
    """destination topic configs that do not follow the source (e.g. retention.ms on a DR copy)"""
    replication_factor: int | None = Field(None, ge=1)
    """replicas of the destination topics this route creates, capped at the destination cluster's size (logged and
    counted; while brokers of the cluster are away a topic waits for them rather than get fewer replicas); absent:
    each source topic's own replica count (MirrorMaker 2's replication.factor); min.insync.replicas follows the
    source's, never above the destination topic's replicas"""
    groups: list[str] = Field(default_factory=list)
    """consumer groups whose id fully matches one of these regular expressions (and none of groups_exclude) get their
    committed offsets checkpointed to the destination"""
    groups_exclude: list[str] = Field(default_factory=list)
    """... except these (Ferry's own ferry.* groups never are)"""
    groups_exclude_internal: list[str] = Field(default_factory=lambda: list(DEFAULT_GROUPS_EXCLUDE_INTERNAL))
    """... nor these: other systems' groups, never checkpointed; the default is MirrorMaker 2's groups.exclude
    (console-consumer-.*, connect-.*, __.*); [] checkpoints them too"""
    naming: str = topic_naming.IDENTITY
    """destination topic name: identity, prefix (<source>.<topic>, MirrorMaker 2), or a template with {topic} once and
    optionally {source}/{destination}, e.g. \"prod-{topic}\""""
    compression: Compression = "lz4"
    """the destination producer's compression.type for this route: mirrored traffic usually crosses datacenters, and
    lz4 saves most of the bytes of compressible records for little CPU (BENCHMARKS.md); a compression.type in
    worker.producer overrides it for every route"""
    delivery_guarantee: DeliveryGuarantee = "exactly_once"
    """exactly_once (the default): each worker writes the route's copies, and the offset-map segments that describe
    them, in Kafka transactions on the destination, and the leader fences a lost worker's writer before its
    partitions move, so a read_committed consumer of the destination sees every record once, and the route copies on
    while ZooKeeper is unreachable; consumers of the destination set isolation.level=read_committed (Java's default
    is read_uncommitted, which also shows aborted copies), and see a record once its transaction commits, up to one
    worker.transaction_interval_s later; the workers need WRITE and DESCRIBE on the route's transactional ids
    (docs/security.md). at_least_once: plain idempotent writes, visible at once to any consumer: a worker that dies,
    or pauses past its session, may leave records written twice, and the route pauses while its worker cannot reach
    ZooKeeper (docs/design.md)"""
    loop_prevention: bool = False
    """skip records whose provenance path holds the destination (they came from it or through it) or that are not this
    route's to forward: what makes identity-named active-active and meshes loop-free (docs/topologies.md); needed on
    identity-named cycles (refused without)"""
    # Set on the routes derived from ``tree`` (common/core/tree.py): the distributor's level (its copy
    # flags decide what it copies) and its name, ``<cluster>.L<level>``, which names the route
    # and its consumer group so that switching its target leaf keeps its committed offsets.
    copy_level: int | None = Field(None, ge=1, le=distribution_tree.MAX_LEVEL)
    """set by tree: the tree level of this route's distributor"""
    distributor: str | None = None
    """set by tree: the distributor this route belongs to (<cluster>.L<level>)"""
    mirrormaker2: MirrorMaker2Config | None = None
    """take over the MirrorMaker 2 mirror of this route: start where it stopped instead of at auto_offset_reset
    (docs/migration-from-mirrormaker2.md)"""
    max_bytes_per_s: float | None = Field(None, gt=0)
    """throttle: the route copies at most this many bytes a second across the fleet (each worker gets a share: by its
    partitions' measured demand with controller.balance: load, by its part of the route's partitions with count);
    PUT /routes/<route>/throttle overrides it at run time; absent: no limit"""
    max_records_per_s: float | None = Field(None, gt=0)
    """throttle: at most this many records a second across the fleet, as max_bytes_per_s"""
    sync_acls: bool = True
    """copy the source's READ and DESCRIBE ACLs on the mirrored topics and on the groups that groups selects to the
    destination (renamed as the topics are; never WRITE, so the copy stays write-protected; nothing deleted), every
    controller.acl_sync_interval_s, grant the rest (WRITE included) at failover and revoke what the failover granted at
    ferry failback --restore (docs/security.md, "ACL sync"); needs Alter on the destination cluster. false: least
    privilege, no ACL copied or granted (ferry acls --applications prints what to grant by hand); MirrorMaker 2's
    sync.topic.acls.enabled"""
    start: Literal["earliest", "latest"] | int | None = None
    """where a partition starts when nothing of the route is on the destination yet and nothing is committed: earliest,
    latest, or a time (ISO 8601, e.g. 2026-01-31T12:00:00Z, or epoch milliseconds): the first record at or after it;
    unset: worker.auto_offset_reset. Resuming from the destination always wins"""

    @field_validator("start", mode="before")
    @classmethod
    def _start(cls, value: Any) -> Any:
        return start_position(value)

    @field_validator("include", "exclude", "exclude_internal", "groups", "groups_exclude", "groups_exclude_internal")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _valid_regexes(value)

    @field_validator("naming")
    @classmethod
    def _naming(cls, value: str) -> str:
        problem = topic_naming.naming_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def wants(self, topic: str) -> bool:
        """Whether the observer mirrors ``topic`` by itself (full-name match)."""
        return (
            any(re.fullmatch(p, topic) for p in self.include)
            and not any(re.fullmatch(p, topic) for p in self.exclude)
            and not self.is_internal(topic)
            and topic_naming.refusal(self, topic) is None
        )

    def is_internal(self, topic: str) -> bool:
        """Whether ``topic`` is another system's internal topic to this route (``exclude_internal``), or Kafka's own."""
        return topic.startswith("__") or any(re.fullmatch(p, topic) for p in self.exclude_internal)

    def destination_topic(self, topic: str) -> str:
        """The name of source topic ``topic`` on the destination (:mod:`common.core.naming`)."""
        return topic_naming.destination_topic(self, topic)

    @property
    def protected(self) -> bool:
        """Whether records that would come back are filtered (by path or by copy flags)."""
        return self.loop_prevention or self.copy_level is not None

    def wants_group(self, group: str) -> bool:
        """Whether the checkpoint job translates ``group``'s offsets (full-name match; never Ferry's own groups)."""
        if group.startswith("ferry."):
            return False
        return any(re.fullmatch(p, group) for p in self.groups) and not any(
            re.fullmatch(p, group) for p in (*self.groups_exclude, *self.groups_exclude_internal)
        )

    @property
    def name(self) -> str:
        """``<source>.<destination>`` (a tree's distributor: ``<cluster>.L<level>``): a ZooKeeper node name, unique per
        route."""
        return self.distributor or f"{self.source}.{self.destination}"

    @property
    def group_id(self) -> str:
        """The consumer group, on the source cluster, that holds this route's committed offsets."""
        return f"ferry.{self.name}"

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == "exactly_once"

    def transactional_id(self, worker_id: str) -> str:
        """The ``transactional.id`` of ``worker_id``'s writer for this route on the destination: stable across
        the worker's restarts, so the leader can fence it (a throwaway ``init_transactions`` with the same id)
        before it hands the worker's partitions to another worker."""
        return f"ferry.{self.name}.{worker_id}"


def start_position(value: Any) -> Literal["earliest", "latest"] | int | None:
    """A route's ``start``: earliest, latest, or a time as epoch milliseconds (from ISO 8601 or epoch ms)."""
    if value is None or value in ("earliest", "latest"):
        return value
    if isinstance(value, bool):
        raise ValueError(f"start must be earliest, latest, an ISO 8601 time or epoch milliseconds, not {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return int(moment.timestamp() * 1000)
    raise ValueError(f"start must be earliest, latest, an ISO 8601 time or epoch milliseconds, not {value!r}")
