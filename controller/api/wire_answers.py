"""Every JSON shape the controller answers with, declared once: its keys (camelCase aliases), their
order, which may be null and which may be left out, and what they mean.

:mod:`controller.api.rest_json` builds each answer from these shapes; the OpenAPI document
(:mod:`controller.api.openapi`) takes their schemas (:data:`RESPONSES`). A field declared with
:func:`absent_when_none` is left out of the answer (and not required by the schema) when it is None;
every other field is always there, null or not. Each class's name ends in ``Answer``; the name the
OpenAPI document publishes it under is its ``title`` (``TopicViewAnswer`` is ``TopicView``). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, RootModel

from ferry.common.vocabulary import ControllerState
from ferry.controller.api.wire import WireShape, absent_when_none


# -- errors, health, topics -----------------------------------------------------------------------
class ErrorAnswer(WireShape, title="Error"):
    """Every error answer; ``requestId`` is also in the ``X-Request-Id`` header."""

    error: str
    status: int
    request_id: str


class ControllerHealthAnswer(WireShape, title="Health"):
    """``GET /health``, ``/health/ready`` and ``/health/live``: this controller, who leads, and the
    probe's answer (503 when it fails)."""

    status: str = Field(description="ok, or the first reason why not")
    id: str
    state: ControllerState
    leader: bool
    leader_id: str | None
    leader_url: str | None
    reasons: list[str] = Field(description="why the probe fails; empty when it passes")


class TopicSummaryAnswer(WireShape, title="TopicSummary"):
    topic: str
    route: str
    partitions: int


class TopicListAnswer(WireShape, title="TopicList"):
    """``GET /topics``, and a bulk ``POST /topics`` (the topics it created)."""

    topics: list[TopicSummaryAnswer]


class PartitionReportAnswer(WireShape, title="PartitionReport"):
    """What a partition's worker last reported."""

    worker: str
    state: str = Field(description="ONLINE, OFFLINE, ERROR or PAUSED")
    reason: str | None = absent_when_none(
        "why (ERROR, or a notice on an ONLINE partition); only when the worker gave one"
    )


class RouteTopicViewAnswer(WireShape, title="RouteTopicView"):
    """A topic on one route: partitions keyed by their id."""

    partitions: int
    ideal_state: dict[str, str] = Field(description="partition -> the worker it is assigned to")
    external_view: dict[str, PartitionReportAnswer] = Field(description="partition -> what its worker last reported")
    workers: dict[str, list[int]] = Field(description="worker -> the partitions assigned to it")
    destination: str = Field(description="the route's destination cluster")
    destination_topic: str = Field(description="the topic's name on the destination (renaming routes)")


class TopicViewAnswer(WireShape, title="TopicView"):
    """A topic: with one route, that route's view at the top level (partitions keyed by their id);
    with several, flat maps keyed ``<route>/<id>``; every route's own view under ``routes`` either way."""

    topic: str
    partitions: int | None = absent_when_none("only when the topic is mirrored on one route")
    ideal_state: dict[str, str] = Field(description="partition -> the worker it is assigned to")
    external_view: dict[str, PartitionReportAnswer] = Field(description="partition -> what its worker last reported")
    workers: dict[str, list[int] | list[str]] = Field(description="worker -> the partitions assigned to it")
    destination: str | None = absent_when_none("only when the topic is mirrored on one route")
    destination_topic: str | None = absent_when_none("only when the topic is mirrored on one route")
    routes: dict[str, RouteTopicViewAnswer] = Field(description="route -> the topic's view on it")


class DeletedAnswer(WireShape, title="Deleted"):
    topic: str
    deleted: bool = True


class RebalancedAnswer(WireShape, title="Rebalanced"):
    rebalanced: bool = True
    moved: int = Field(description="partitions that changed worker")


# -- workers and validation ------------------------------------------------------------------------
class InstanceAnswer(WireShape, title="Instance"):
    """A live worker."""

    id: str
    host: str
    pid: int
    metrics_url: str | None
    partitions: list[str] = Field(description="<route>/<topic>/<partition> of each partition it holds")
    online: int
    error: int
    generation: int | None = Field(description="the assignment generation it applied; null before its first status")
    leaving: bool


class DepartedAnswer(WireShape, title="Departed"):
    """A worker that left while the ideal states still give it partitions."""

    id: str
    partitions: list[str]


class InstancesAnswer(WireShape, title="Instances"):
    """``GET /instances``: live workers and what they hold."""

    instances: list[InstanceAnswer]
    departed: list[DepartedAnswer]


class MismatchAnswer(WireShape, title="Mismatch"):
    """A partition that is not ONLINE on its ideal worker, with its most important problem."""

    partition: str = Field(description="<route>/<topic>/<partition>")
    problem: str
    ideal_worker: str | None
    reported_worker: str | None
    reason: str | None = absent_when_none("what the worker reported; only when it gave a reason")


class NoticeAnswer(WireShape, title="Notice"):
    """An ONLINE partition whose worker reports something: records deleted at the source before they
    were copied, a destination topic created again."""

    route: str
    topic: str
    partition: int
    worker: str | None
    reason: str


class ValidationAnswer(WireShape, title="Validation"):
    """``GET /validation``: the ideal state against what workers report."""

    ok: bool
    summary: dict[str, int] = Field(description="partitions per state")
    mismatches: list[MismatchAnswer]
    spark: dict[str, Any] | None = Field(description="the last `ferry validate --store`, as stored, with checkedAt")
    failover: dict[str, str] = Field(description="routes not ACTIVE -> their failover state (docs/runbook.md)")
    notices: list[NoticeAnswer]


class SourceMismatchAnswer(WireShape, title="SourceMismatch"):
    route: str
    topic: str
    ideal_partitions: int
    source_partitions: int | None = Field(description="null: the source has no such topic")
    problem: str


class SparkCheckAnswer(WireShape, title="SparkCheck"):
    """The source part of the last `ferry validate --store`."""

    checked_at: Any = Field(description="when it ran (Unix time)")
    src_kafka: Any


class SourceValidationAnswer(WireShape, title="SourceValidation"):
    """``GET /validation/srcKafka``: partition counts at the source against the ideal state."""

    ok: bool
    topics: int = Field(description="how many (route, topic) were compared")
    mismatches: list[SourceMismatchAnswer]
    spark: SparkCheckAnswer | None


# -- offsets and progress ---------------------------------------------------------------------------
class OffsetRowAnswer(WireShape, title="OffsetRow"):
    """One partition's offsets."""

    partition: str = Field(description="<route>/<topic>/<partition>")
    route: str
    topic: str
    destination_topic: str = Field(description="the topic's name on the destination (renaming routes)")
    partition_id: int
    committed: int | None = Field(description="null: nothing committed yet")
    log_end: int
    lag: int


class OffsetsAnswer(WireShape, title="Offsets"):
    """``GET /offset``: committed and log-end offsets."""

    offsets: list[OffsetRowAnswer]


class NoProgressRowAnswer(OffsetRowAnswer, title="NoProgressRow"):
    stalled_for_s: float = Field(description="seconds since its committed offset moved")


class NoProgressAnswer(WireShape, title="NoProgress"):
    """``GET /noprogress``: lagging partitions whose committed offset has not moved."""

    noprogress: list[NoProgressRowAnswer]
    threshold_s: float


class FiguresAnswer(WireShape, title="Figures"):
    latency_s: float | None = Field(description="the latest heartbeat's latency; null: none yet")
    since_last_s: float | None = Field(description="seconds since the latest heartbeat arrived")


class EndToEndAnswer(WireShape, title="EndToEnd"):
    origin: str
    cluster: str
    hops: int
    latency_s: float
    since_last_s: float


class HeartbeatsAnswer(WireShape, title="Heartbeats"):
    """``GET /heartbeats``: latency and time since the last heartbeat, end to end and per route."""

    end_to_end: list[EndToEndAnswer]
    routes: dict[str, FiguresAnswer]


# -- consumer groups ---------------------------------------------------------------------------------
class GroupPartitionAnswer(WireShape, title="GroupPartition"):
    """One group's position on one partition, on both clusters."""

    route: str
    group: str
    topic: str = Field(description="the topic at the source")
    partition: int
    source_offset: int
    source_log_end: int | None
    lag: int | None
    destination_topic: str
    destination_offset: int | None = Field(description="null: pending")
    method: Literal["exact", "timestamp", "mirrormaker2", "ahead", "pending"]


class GroupRowAnswer(WireShape, title="GroupRow"):
    group: str
    checkpoint_age_s: dict[str, float] = Field(description="route -> seconds since its last checkpoint")
    partitions: list[GroupPartitionAnswer]


class GroupsAnswer(WireShape, title="Groups"):
    """``GET /groups``: consumer groups' source offsets translated to the destination."""

    groups: list[GroupRowAnswer]


class GroupSyncedAnswer(WireShape, title="GroupSynced"):
    """What a sync did for one group: ``synced`` offsets committed, or why none (``skipped``)."""

    group: str
    synced: int
    skipped: str | None = absent_when_none("why nothing was synced; only then")


class TranslationAnswer(WireShape, title="Translation"):
    """``GET /translate``: one consumer position translated."""

    route: str
    topic: str = Field(description="the topic at the source")
    destination_topic: str
    partition: int
    direction: Literal["forward", "reverse"] = Field(
        description="forward: a source position to the destination; reverse: back"
    )
    offset: int = Field(description="the position asked about (the next offset to read)")
    translated_offset: int | None = Field(description="the position on the other cluster; null: pending")
    exact: bool = Field(description="true only when the offset map gave the answer")
    method: Literal["exact", "timestamp", "pending"]


# -- schema distribution ---------------------------------------------------------------------------
class SchemaTargetStatusAnswer(WireShape, title="SchemaTargetStatus"):
    subject: str = Field(description="the translated subject on that target")
    state: Literal["in_sync", "pending", "conflict"]
    synced_versions: list[int]
    missing_versions: list[int]
    conflict: str | None


class SchemaSubjectAnswer(WireShape, title="SchemaSubject"):
    subject: str
    version: int = Field(description="latest")
    id: int = Field(description="schema ID of the latest version")
    versions: dict[str, int] = Field(description="version -> schema ID")
    states: dict[str, str] = Field(description="version -> state on the primary (DISABLED: soft-deleted)")
    targets: dict[str, SchemaTargetStatusAnswer]


class SchemaCopyAnswer(WireShape, title="SchemaCopy"):
    target: str
    subject: str
    version: int
    id: int
    target_subject: str


class SchemaConflictAnswer(SchemaCopyAnswer, title="SchemaConflict"):
    reason: str


class SchemaStateChangeAnswer(WireShape, title="SchemaStateChange"):
    target: str
    subject: str
    version: int
    target_subject: str
    state: str


class SchemaReportAnswer(WireShape, title="SchemaReport"):
    """``POST /schemas/sync``: one distribution pass."""

    primary: str = Field(description="the primary registry's cluster")
    targets: list[str]
    checked_at: float = Field(description="when the pass ran (Unix time)")
    subjects: list[SchemaSubjectAnswer]
    in_sync: bool
    out_of_sync: dict[str, int] = Field(description="target -> subjects not in sync")
    conflicts: list[SchemaConflictAnswer]
    copied: list[SchemaCopyAnswer]
    state_changed: list[SchemaStateChangeAnswer] = Field(
        description="copies whose state now follows the primary's (soft delete: DISABLED)"
    )
    unreachable: dict[str, str] = Field(description="targets this pass could not reach -> why (left out of it)")


class SchemaStatusAnswer(SchemaReportAnswer, title="SchemaStatus"):
    """``GET /schemas``: the last successful pass, and why a later one failed."""

    last_error: str | None = Field(description="why the passes since this report failed; null: they did not")


# -- the distribution tree ------------------------------------------------------------------------
class DistributorAnswer(WireShape, title="Distributor"):
    name: str = Field(description="<cluster>.L<level>")
    cluster: str
    level: int
    mask: str
    bit: str
    subtree: list[str] = Field(description="the leaves it may copy to")
    subtree_layout: str
    target: str = Field(description="the leaf it copies to")
    switched: bool = Field(description="the target was switched at run time")
    state: str


class TreeViewAnswer(WireShape, title="TreeView"):
    """``GET /tree``: the distribution tree's distributors."""

    layout: str
    switch_after_s: float
    distributors: list[DistributorAnswer]
    unreachable: list[str] = Field(description="leaves the leader finds unreachable")
    table: str = Field(description="the same, as a text table")


class TargetSwitchedAnswer(RootModel[dict[str, str]], title="TargetSwitched"):
    """``POST /tree/{distributor}/target``: every switched distributor -> the leaf it copies to now."""

    def to_json(self) -> dict[str, str]:
        return dict(self.root)


# -- an operator's controls ------------------------------------------------------------------------
class PausedPartitionsAnswer(WireShape, title="PausedPartitions"):
    """A topic's paused partitions per route (null: the whole topic)."""

    topic: str
    paused: dict[str, list[int] | None]


class WorkerControlAnswer(WireShape, title="WorkerControl"):
    worker: str
    cordon: Literal["cordon", "drain"] | None
    partitions: int = Field(description="partitions the ideal states still give it")


class ThrottleAnswer(WireShape, title="ThrottleAnswer"):
    """A route's throttle as set (null: no limit on that measure)."""

    route: str
    max_bytes_per_s: float | None = Field(alias="max_bytes_per_s")
    max_records_per_s: float | None = Field(alias="max_records_per_s")


class RouteThrottleAnswer(WireShape, title="RouteThrottle"):
    max_bytes_per_s: float | None = Field(alias="max_bytes_per_s")
    max_records_per_s: float | None = Field(alias="max_records_per_s")
    runtime: bool = Field(description="set at run time (else the config's)")


class ControlsAnswer(WireShape, title="Controls"):
    """``GET /controls``: paused partitions, cordoned workers, autobalancing and every route's throttle."""

    paused: dict[str, dict[str, list[int] | None]] = Field(description="route -> topic -> partitions (null: all)")
    cordoned: dict[str, Literal["cordon", "drain"]]
    autobalancing: bool
    throttles: dict[str, RouteThrottleAnswer]


# -- failover ------------------------------------------------------------------------------------
class RouteStateAnswer(WireShape, title="RouteState"):
    """A route's failover state, as the failover workflow wrote it (fields it has not written yet are absent)."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=False)

    route: str
    source: str | None = Field(None, description="the source cluster (GET /routes)")
    destination: str | None = Field(None, description="the destination cluster (GET /routes)")
    state: Literal["ACTIVE", "REQUESTED", "DRAINING", "SYNCING", "FAILED_OVER", "FAILING_BACK"]
    planned: bool | None = None
    groups: str | None = Field(None, description="the groups' regular expression")
    topics: str | None = Field(None, description="the topics' regular expression")
    partitions: dict[str, int] | None = Field(None, description="topic -> partitions failed over")
    requested_at: int | float | None = None
    updated_at: int | float | None = None
    drain: dict[str, Any] | None = Field(
        None, description="planned: the source ends and committed offsets it waited for"
    )
    report: dict[str, Any] | None = Field(None, description="per partition and per group, what the failover did")
    failback: dict[str, Any] | None = None
    dry_run: bool | None = Field(None, description="a dry run's answer: nothing changed")
    phases: list[str] | None = Field(None, description="dry run: the phases the failover would go through")
    plan: dict[str, Any] | None = Field(
        None, description="dry run: the RPO (unplanned) or what is left to copy (planned), and each group's position"
    )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = self.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return out


class RoutesAnswer(WireShape, title="Routes"):
    """``GET /routes``: every configured route and its failover state."""

    routes: list[RouteStateAnswer]

    def to_json(self) -> dict[str, Any]:
        return {"routes": [route.to_json() for route in self.routes]}


RESPONSES: tuple[type[WireShape] | type[RootModel[Any]], ...] = (
    ErrorAnswer,
    ControllerHealthAnswer,
    TopicListAnswer,
    TopicViewAnswer,
    DeletedAnswer,
    RebalancedAnswer,
    InstancesAnswer,
    ValidationAnswer,
    SourceValidationAnswer,
    OffsetsAnswer,
    NoProgressAnswer,
    HeartbeatsAnswer,
    GroupsAnswer,
    GroupSyncedAnswer,
    TranslationAnswer,
    SchemaReportAnswer,
    SchemaStatusAnswer,
    TreeViewAnswer,
    TargetSwitchedAnswer,
    PausedPartitionsAnswer,
    WorkerControlAnswer,
    ThrottleAnswer,
    ControlsAnswer,
    RouteStateAnswer,
    RoutesAnswer,
)
