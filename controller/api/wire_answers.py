"""Every JSON shape the controller answers with, declared once: its keys (camelCase aliases), their
order, which may be null and which may be left out, and what they mean.

:mod:`controller.api.rest_json` builds each answer from these shapes; the OpenAPI document
(:mod:`controller.api.openapi`) takes their schemas (:data:`RESPONSES`). A field declared with
:func:`absent_when_none` is left out of the answer (and not required by the schema) when it is None;
every other field is always there, null or not. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, RootModel

from ferry.common.vocabulary import ControllerState
from ferry.controller.api.wire import WireShape, absent_when_none


# -- errors, health, topics -----------------------------------------------------------------------
class Error(WireShape):
    """Every error answer; ``requestId`` is also in the ``X-Request-Id`` header."""

    error: str
    status: int
    request_id: str


class Health(WireShape):
    """``GET /health``, ``/health/ready`` and ``/health/live``: this controller, who leads, and the
    probe's answer (503 when it fails)."""

    status: str = Field(description="ok, or the first reason why not")
    id: str
    state: ControllerState
    leader: bool
    leader_id: str | None
    leader_url: str | None
    reasons: list[str] = Field(description="why the probe fails; empty when it passes")


class TopicSummary(WireShape):
    topic: str
    route: str
    partitions: int


class TopicList(WireShape):
    """``GET /topics``, and a bulk ``POST /topics`` (the topics it created)."""

    topics: list[TopicSummary]


class PartitionReport(WireShape):
    """What a partition's worker last reported."""

    worker: str
    state: str = Field(description="ONLINE, OFFLINE, ERROR or PAUSED")
    reason: str | None = absent_when_none(
        "why (ERROR, or a notice on an ONLINE partition); only when the worker gave one"
    )


class RouteTopicView(WireShape):
    """A topic on one route: partitions keyed by their id."""

    partitions: int
    ideal_state: dict[str, str] = Field(description="partition -> the worker it is assigned to")
    external_view: dict[str, PartitionReport] = Field(description="partition -> what its worker last reported")
    workers: dict[str, list[int]] = Field(description="worker -> the partitions assigned to it")
    destination: str = Field(description="the route's destination cluster")
    destination_topic: str = Field(description="the topic's name on the destination (renaming routes)")


class TopicView(WireShape):
    """A topic: with one route, that route's view at the top level (partitions keyed by their id);
    with several, flat maps keyed ``<route>/<id>``; every route's own view under ``routes`` either way."""

    topic: str
    partitions: int | None = absent_when_none("only when the topic is mirrored on one route")
    ideal_state: dict[str, str] = Field(description="partition -> the worker it is assigned to")
    external_view: dict[str, PartitionReport] = Field(description="partition -> what its worker last reported")
    workers: dict[str, list[int] | list[str]] = Field(description="worker -> the partitions assigned to it")
    destination: str | None = absent_when_none("only when the topic is mirrored on one route")
    destination_topic: str | None = absent_when_none("only when the topic is mirrored on one route")
    routes: dict[str, RouteTopicView] = Field(description="route -> the topic's view on it")


class Deleted(WireShape):
    topic: str
    deleted: bool = True


class Rebalanced(WireShape):
    rebalanced: bool = True
    moved: int = Field(description="partitions that changed worker")


# -- workers and validation ------------------------------------------------------------------------
class Instance(WireShape):
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


class Departed(WireShape):
    """A worker that left while the ideal states still give it partitions."""

    id: str
    partitions: list[str]


class Instances(WireShape):
    """``GET /instances``: live workers and what they hold."""

    instances: list[Instance]
    departed: list[Departed]


class Mismatch(WireShape):
    """A partition that is not ONLINE on its ideal worker, with its most important problem."""

    partition: str = Field(description="<route>/<topic>/<partition>")
    problem: str
    ideal_worker: str | None
    reported_worker: str | None
    reason: str | None = absent_when_none("what the worker reported; only when it gave a reason")


class Notice(WireShape):
    """An ONLINE partition whose worker reports something: records deleted at the source before they
    were copied, a destination topic created again."""

    route: str
    topic: str
    partition: int
    worker: str | None
    reason: str


class Validation(WireShape):
    """``GET /validation``: the ideal state against what workers report."""

    ok: bool
    summary: dict[str, int] = Field(description="partitions per state")
    mismatches: list[Mismatch]
    spark: dict[str, Any] | None = Field(description="the last `ferry validate --store`, as stored, with checkedAt")
    failover: dict[str, str] = Field(description="routes not ACTIVE -> their failover state (docs/runbook.md)")
    notices: list[Notice]


class SourceMismatch(WireShape):
    route: str
    topic: str
    ideal_partitions: int
    source_partitions: int | None = Field(description="null: the source has no such topic")
    problem: str


class SparkCheck(WireShape):
    """The source part of the last `ferry validate --store`."""

    checked_at: Any = Field(description="when it ran (Unix time)")
    src_kafka: Any


class SourceValidation(WireShape):
    """``GET /validation/srcKafka``: partition counts at the source against the ideal state."""

    ok: bool
    topics: int = Field(description="how many (route, topic) were compared")
    mismatches: list[SourceMismatch]
    spark: SparkCheck | None


# -- offsets and progress ---------------------------------------------------------------------------
class OffsetRow(WireShape):
    """One partition's offsets."""

    partition: str = Field(description="<route>/<topic>/<partition>")
    route: str
    topic: str
    destination_topic: str = Field(description="the topic's name on the destination (renaming routes)")
    partition_id: int
    committed: int | None = Field(description="null: nothing committed yet")
    log_end: int
    lag: int


class Offsets(WireShape):
    """``GET /offset``: committed and log-end offsets."""

    offsets: list[OffsetRow]


class NoProgressRow(OffsetRow):
    stalled_for_s: float = Field(description="seconds since its committed offset moved")


class NoProgress(WireShape):
    """``GET /noprogress``: lagging partitions whose committed offset has not moved."""

    noprogress: list[NoProgressRow]
    threshold_s: float


class Figures(WireShape):
    latency_s: float | None = Field(description="the latest heartbeat's latency; null: none yet")
    since_last_s: float | None = Field(description="seconds since the latest heartbeat arrived")


class EndToEnd(WireShape):
    origin: str
    cluster: str
    hops: int
    latency_s: float
    since_last_s: float


class Heartbeats(WireShape):
    """``GET /heartbeats``: latency and time since the last heartbeat, end to end and per route."""

    end_to_end: list[EndToEnd]
    routes: dict[str, Figures]


# -- consumer groups ---------------------------------------------------------------------------------
class GroupPartition(WireShape):
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


class GroupRow(WireShape):
    group: str
    checkpoint_age_s: dict[str, float] = Field(description="route -> seconds since its last checkpoint")
    partitions: list[GroupPartition]


class Groups(WireShape):
    """``GET /groups``: consumer groups' source offsets translated to the destination."""

    groups: list[GroupRow]


class GroupSynced(WireShape):
    """What a sync did for one group: ``synced`` offsets committed, or why none (``skipped``)."""

    group: str
    synced: int
    skipped: str | None = absent_when_none("why nothing was synced; only then")


class Translation(WireShape):
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
class SchemaTargetStatus(WireShape):
    subject: str = Field(description="the translated subject on that target")
    state: Literal["in_sync", "pending", "conflict"]
    synced_versions: list[int]
    missing_versions: list[int]
    conflict: str | None


class SchemaSubject(WireShape):
    subject: str
    version: int = Field(description="latest")
    id: int = Field(description="schema ID of the latest version")
    versions: dict[str, int] = Field(description="version -> schema ID")
    states: dict[str, str] = Field(description="version -> state on the primary (DISABLED: soft-deleted)")
    targets: dict[str, SchemaTargetStatus]


class SchemaCopy(WireShape):
    target: str
    subject: str
    version: int
    id: int
    target_subject: str


class SchemaConflict(SchemaCopy):
    reason: str


class SchemaStateChange(WireShape):
    target: str
    subject: str
    version: int
    target_subject: str
    state: str


class SchemaReport(WireShape):
    """``POST /schemas/sync``: one distribution pass."""

    primary: str = Field(description="the primary registry's cluster")
    targets: list[str]
    checked_at: float = Field(description="when the pass ran (Unix time)")
    subjects: list[SchemaSubject]
    in_sync: bool
    out_of_sync: dict[str, int] = Field(description="target -> subjects not in sync")
    conflicts: list[SchemaConflict]
    copied: list[SchemaCopy]
    state_changed: list[SchemaStateChange] = Field(
        description="copies whose state now follows the primary's (soft delete: DISABLED)"
    )
    unreachable: dict[str, str] = Field(description="targets this pass could not reach -> why (left out of it)")


class SchemaStatus(SchemaReport):
    """``GET /schemas``: the last successful pass, and why a later one failed."""

    last_error: str | None = Field(description="why the passes since this report failed; null: they did not")


# -- the distribution tree ------------------------------------------------------------------------
class Distributor(WireShape):
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


class TreeView(WireShape):
    """``GET /tree``: the distribution tree's distributors."""

    layout: str
    switch_after_s: float
    distributors: list[Distributor]
    unreachable: list[str] = Field(description="leaves the leader finds unreachable")
    table: str = Field(description="the same, as a text table")


class TargetSwitched(RootModel[dict[str, str]]):
    """``POST /tree/{distributor}/target``: every switched distributor -> the leaf it copies to now."""

    def to_json(self) -> dict[str, str]:
        return dict(self.root)


# -- an operator's controls ------------------------------------------------------------------------
class PausedPartitions(WireShape):
    """A topic's paused partitions per route (null: the whole topic)."""

    topic: str
    paused: dict[str, list[int] | None]


class WorkerControl(WireShape):
    worker: str
    cordon: Literal["cordon", "drain"] | None
    partitions: int = Field(description="partitions the ideal states still give it")


class ThrottleAnswer(WireShape):
    """A route's throttle as set (null: no limit on that measure)."""

    route: str
    max_bytes_per_s: float | None = Field(alias="max_bytes_per_s")
    max_records_per_s: float | None = Field(alias="max_records_per_s")


class RouteThrottle(WireShape):
    max_bytes_per_s: float | None = Field(alias="max_bytes_per_s")
    max_records_per_s: float | None = Field(alias="max_records_per_s")
    runtime: bool = Field(description="set at run time (else the config's)")


class Controls(WireShape):
    """``GET /controls``: paused partitions, cordoned workers, autobalancing and every route's throttle."""

    paused: dict[str, dict[str, list[int] | None]] = Field(description="route -> topic -> partitions (null: all)")
    cordoned: dict[str, Literal["cordon", "drain"]]
    autobalancing: bool
    throttles: dict[str, RouteThrottle]


# -- failover ------------------------------------------------------------------------------------
class RouteState(WireShape):
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


class Routes(WireShape):
    """``GET /routes``: every configured route and its failover state."""

    routes: list[RouteState]

    def to_json(self) -> dict[str, Any]:
        return {"routes": [route.to_json() for route in self.routes]}


RESPONSES: tuple[type[WireShape] | type[RootModel[Any]], ...] = (
    Error,
    Health,
    TopicList,
    TopicView,
    Deleted,
    Rebalanced,
    Instances,
    Validation,
    SourceValidation,
    Offsets,
    NoProgress,
    Heartbeats,
    Groups,
    GroupSynced,
    Translation,
    SchemaReport,
    SchemaStatus,
    TreeView,
    TargetSwitched,
    PausedPartitions,
    WorkerControl,
    ThrottleAnswer,
    Controls,
    RouteState,
    Routes,
)
