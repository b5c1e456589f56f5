"""Every answer the controller gives, built from its wire shape: REST (:mod:`controller.api.rest`) and
``ferry groups --json``.

Pure functions from the parts' typed answers (:mod:`controller.topics.reads`, :mod:`controller.topics.admin`,
:mod:`controller.jobs.scheduler`, :mod:`controller.tree.control`, :mod:`controller.groups.checkpoints`, and
:mod:`common.model`'s types) to JSON-ready dicts. Each shape is a class of :mod:`controller.api.wire_answers`
(``wire_answers.TopicViewAnswer``: named for its role, apart from the domain's ``TopicView``), built with its
snake_case fields and written with ``to_json()``: the camelCase keys, their order and the OpenAPI schemas live
there only. Three shapes with a row per topic or partition are the exception, for speed (160,000 partitions
take 0.3 s so, four times longer through the wire shapes): ``GET /topics``, ``GET /offset`` and a topic's view
are built as plain dicts with the same keys, and ``tests/unit/test_rest_json.py`` checks that each equals
what its wire shape writes for the same data.
No Flask, no I/O, so a CLI can shape the same way; the parts never import this module (``.importlinter``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ferry.common.core import tree
from ferry.common.core.diff import Mismatch
from ferry.common.core.heartbeat import HeartbeatView, Latency
from ferry.common.core.probes import Probe
from ferry.common.model import IdealState, PartitionKey
from ferry.controller.api import wire_answers, wire_requests
from ferry.controller.groups.checkpoints import GroupCheckpoints, GroupOffsetTranslation, SyncResult
from ferry.controller.groups.translate import OffsetTranslation
from ferry.controller.schemas.distributor import SchemaReport, SchemaStatus
from ferry.controller.topics.admin import Rebalanced, TopicDeleted
from ferry.controller.topics.progress import NoProgress, OffsetSample
from ferry.controller.topics.reads import Health, Instances, RouteTopic, SourceValidation, TopicView, Validation
from ferry.controller.tree.control import TreeView

Json = dict[str, Any]

# -- reads ------------------------------------------------------------------------------------


def health_json(health: Health, probe: Probe) -> Json:
    """A health probe's answer (``probe``: ``health.readiness()`` or ``health.liveness()``)."""
    return wire_answers.ControllerHealthAnswer(
        status=probe.reasons[0] if probe.reasons else "ok",
        id=health.controller_id,
        state=health.state,
        leader=health.leading,
        leader_id=health.leader_id,
        leader_url=health.leader_url,
        reasons=list(probe.reasons),
    ).to_json()


def topics_json(states: Iterable[IdealState]) -> Json:
    """``GET /topics`` and a bulk ``POST /topics``: route, topic and partition count of each."""
    # wire_answers.TopicListAnswer's shape, built as plain dicts (a bulk listing; see the module docstring).
    return {"topics": [{"topic": s.topic, "route": s.route, "partitions": s.partitions} for s in states]}


def _route_topic_json(one: RouteTopic) -> Json:
    workers: dict[str, list[int]] = {}
    for p, w in sorted(one.ideal.assignment.items()):
        workers.setdefault(w, []).append(p)
    return {
        "partitions": one.ideal.partitions,
        "idealState": {str(p): w for p, w in sorted(one.ideal.assignment.items())},
        "externalView": {str(p): v for p, v in sorted(one.external.partitions.items())},
        "workers": workers,
        "destination": one.destination,
        "destinationTopic": one.destination_topic,
    }


def topic_json(view: TopicView) -> Json:
    """One topic: with one route, that route's view at the top level; with several, flat maps keyed
    ``<route>/<partition>``; every route's own view under ``routes`` either way."""
    # wire_answers.TopicViewAnswer's shape, built as plain dicts (one row per partition; see the module docstring).
    per_route = {name: _route_topic_json(one) for name, one in view.routes.items()}
    if len(per_route) == 1:
        flat = dict(next(iter(per_route.values())))
    else:
        ideal: dict[str, str] = {}
        external: dict[str, Any] = {}
        workers: dict[str, list[str]] = {}
        for name, one in per_route.items():
            for p, w in one["idealState"].items():
                ideal[f"{name}/{p}"] = w
            for p, entry in one["externalView"].items():
                external[f"{name}/{p}"] = entry
            for w, parts in one["workers"].items():
                workers.setdefault(w, []).extend(f"{name}/{p}" for p in parts)
        flat = {"idealState": ideal, "externalView": external, "workers": workers}
    return {"topic": view.topic, **flat, "routes": per_route}


def instances_json(instances: Instances) -> Json:
    return wire_answers.InstancesAnswer(
        instances=[
            wire_answers.InstanceAnswer(
                id=i.worker_id,
                host=i.info.host,
                pid=i.info.pid,
                metrics_url=i.info.metrics_url,
                partitions=i.partitions,
                online=i.online,
                error=i.error,
                generation=i.generation,
                leaving=i.leaving,
            )
            for i in instances.live
        ],
        departed=[wire_answers.DepartedAnswer(id=w, partitions=parts) for w, parts in instances.departed.items()],
    ).to_json()


def mismatch(m: Mismatch) -> wire_answers.MismatchAnswer:
    """A mismatch as ``/validation`` shows it (the same keys as ``ferry zk``'s,
    :meth:`common.core.diff.Mismatch.to_json`)."""
    return wire_answers.MismatchAnswer(
        partition=str(m.partition),
        problem=m.problem,
        ideal_worker=m.ideal_worker,
        reported_worker=m.reported_worker,
        reason=m.reason,
    )


def validation_json(validation: Validation) -> Json:
    return wire_answers.ValidationAnswer(
        ok=validation.ok,
        summary=validation.summary,
        mismatches=[mismatch(m) for m in validation.mismatches],
        spark=validation.spark,  # the last `ferry validate --store`, as stored, with checkedAt
        failover=validation.failover,  # routes not ACTIVE -> their failover state
        notices=[wire_answers.NoticeAnswer(**notice) for notice in validation.notices],
    ).to_json()


def source_validation_json(validation: SourceValidation) -> Json:
    spark = validation.spark
    return wire_answers.SourceValidationAnswer(
        ok=validation.ok,
        topics=validation.topics,
        mismatches=[
            wire_answers.SourceMismatchAnswer(
                route=m.route,
                topic=m.topic,
                ideal_partitions=m.ideal_partitions,
                source_partitions=m.source_partitions,
                problem=m.problem,
            )
            for m in validation.mismatches
        ],
        spark=None
        if spark is None
        else wire_answers.SparkCheckAnswer(checked_at=spark.get("checkedAt"), src_kafka=spark.get("srcKafka")),
    ).to_json()


# -- offsets ------------------------------------------------------------------------------------

DestinationTopic = Callable[[str, str], str]
"""(route, topic) -> the topic's name on the route's destination
(:meth:`controller.topics.reads.ReadSide.destination_topic`)."""


def offset_row(
    key: PartitionKey, sample: OffsetSample, destination_topic: DestinationTopic
) -> wire_answers.OffsetRowAnswer:
    """One partition's offsets; ``destinationTopic`` is the topic's name on the route's destination
    (the same name unless the route renames topics)."""
    return wire_answers.OffsetRowAnswer(
        partition=str(key),
        route=key.route,
        topic=key.topic,
        destination_topic=destination_topic(key.route, key.topic),
        partition_id=key.partition,
        committed=sample.committed,
        log_end=sample.end,
        lag=sample.lag,
    )


def offsets_json(samples: Mapping[PartitionKey, OffsetSample], destination_topic: DestinationTopic) -> Json:
    """``GET /offset``: wire_answers.OffsetsAnswer's shape as plain dicts (a bulk listing; see the module docstring)."""
    rows = []
    for key, sample in sorted(samples.items()):
        rows.append(
            {
                "partition": str(key),
                "route": key.route,
                "topic": key.topic,
                "destinationTopic": destination_topic(key.route, key.topic),
                "partitionId": key.partition,
                "committed": sample.committed,
                "logEnd": sample.end,
                "lag": sample.lag,
            }
        )
    return {"offsets": rows}


def noprogress_json(report: NoProgress, destination_topic: DestinationTopic) -> Json:
    rows = [
        wire_answers.NoProgressRowAnswer(
            **dict(offset_row(key, report.latest[key], destination_topic)), stalled_for_s=round(since, 1)
        )
        for key, since in sorted(report.stalled.items())
    ]
    return wire_answers.NoProgressAnswer(noprogress=rows, threshold_s=report.threshold_s).to_json()


# -- topic commands -------------------------------------------------------------------------------


def deleted_json(deleted: TopicDeleted) -> Json:
    return wire_answers.DeletedAnswer(topic=deleted.topic).to_json()


def rebalanced_json(rebalanced: Rebalanced) -> Json:
    return wire_answers.RebalancedAnswer(moved=rebalanced.moved).to_json()


# -- the distribution tree ------------------------------------------------------------------------


def tree_json(view: TreeView) -> Json:
    rows = [
        wire_answers.DistributorAnswer(
            name=r.distributor.name,
            cluster=r.distributor.cluster,
            level=r.distributor.level,
            mask=tree.format_flags(r.distributor.mask),
            bit=tree.format_flags(r.distributor.bit),
            subtree=list(r.distributor.subtree),
            subtree_layout=r.distributor.subtree_layout,
            target=r.target,
            switched=r.switched,
            state=r.state,
        )
        for r in view.distributors
    ]
    return wire_answers.TreeViewAnswer(
        layout=view.layout,
        switch_after_s=view.switch_after_s,
        distributors=rows,
        unreachable=view.unreachable,
        table=view.table,
    ).to_json()


def target_switched_json(targets: Mapping[str, str]) -> dict[str, str]:
    """``POST /tree/{distributor}/target``: every switched distributor -> its leaf."""
    return wire_answers.TargetSwitchedAnswer(dict(targets)).to_json()


# -- heartbeats -----------------------------------------------------------------------------------


def _figures(latency: Latency | None) -> wire_answers.FiguresAnswer:
    if latency is None:
        return wire_answers.FiguresAnswer(latency_s=None, since_last_s=None)
    return wire_answers.FiguresAnswer(
        latency_s=round(latency.latency_s, 3), since_last_s=round(latency.since_last_s, 3)
    )


def heartbeats_json(view: HeartbeatView) -> Json:
    return wire_answers.HeartbeatsAnswer(
        end_to_end=[
            wire_answers.EndToEndAnswer(
                origin=a.origin,
                cluster=a.cluster,
                hops=a.hops,
                latency_s=round(a.latency_s, 3),
                since_last_s=round(a.since_last_s, 3),
            )
            for a in view.end_to_end
        ],
        routes={name: _figures(latency) for name, latency in view.routes.items()},
    ).to_json()


# -- consumer-group checkpoints (REST /groups and `ferry groups --json`) -------------------------


def _group_partition(t: GroupOffsetTranslation) -> wire_answers.GroupPartitionAnswer:
    return wire_answers.GroupPartitionAnswer(
        route=t.route,
        group=t.group,
        topic=t.topic,
        partition=t.partition,
        source_offset=t.source_offset,
        source_log_end=t.source_end,
        lag=t.lag,
        destination_topic=t.destination_topic,
        destination_offset=t.destination_offset,
        method=t.method,
    )


def translation_json(t: GroupOffsetTranslation) -> Json:
    return _group_partition(t).to_json()


def offset_translation_json(t: OffsetTranslation) -> Json:
    """``GET /translate`` and ``ferry offsets translate --json``."""
    return wire_answers.TranslationAnswer(
        route=t.route,
        topic=t.topic,
        destination_topic=t.destination_topic,
        partition=t.partition,
        direction=t.direction,
        offset=t.offset,
        translated_offset=t.translated,
        exact=t.exact,
        method=t.method,
    ).to_json()


def groups_json(checkpoints: GroupCheckpoints) -> Json:
    ages = checkpoints.ages
    return wire_answers.GroupsAnswer(
        groups=[
            wire_answers.GroupRowAnswer(
                group=group,
                checkpoint_age_s={route: round(age, 3) for (route, g), age in sorted(ages.items()) if g == group},
                partitions=[_group_partition(t) for t in translations],
            )
            for group, translations in checkpoints.by_group.items()
        ]
    ).to_json()


def sync_json(result: SyncResult) -> Json:
    return wire_answers.GroupSyncedAnswer(group=result.group, synced=result.synced, skipped=result.skipped).to_json()


# -- schema distribution (GET /schemas, POST /schemas/sync) ---------------------------------------


def _schema_report(report: SchemaReport) -> dict[str, Any]:
    """The report's fields, as keyword arguments of :class:`wire_answers.SchemaReportAnswer` (and its GET form)."""
    subjects = [
        wire_answers.SchemaSubjectAnswer(
            subject=s.subject,
            version=s.latest.version,
            id=s.latest.schema_id,
            versions={str(v.version): v.schema_id for v in s.versions},
            states={str(version): state for version, state in s.states.items()},
            targets={
                target: wire_answers.SchemaTargetStatusAnswer(
                    subject=status.target_subject,
                    state=status.state.value,
                    synced_versions=list(status.synced_versions),
                    missing_versions=list(status.missing_versions),
                    conflict=status.conflict,
                )
                for target, status in s.targets.items()
            },
        )
        for s in report.subjects
    ]
    return {
        "primary": report.primary,
        "targets": report.targets,
        "checked_at": report.checked_at,
        "subjects": subjects,
        "in_sync": report.in_sync,
        "out_of_sync": report.out_of_sync,
        "conflicts": [
            wire_answers.SchemaConflictAnswer(
                target=c.target,
                subject=c.subject,
                version=c.version,
                id=c.schema_id,
                target_subject=c.target_subject,
                reason=c.reason,
            )
            for c in report.conflicts
        ],
        "copied": [
            wire_answers.SchemaCopyAnswer(
                target=c.target, subject=c.subject, version=c.version, id=c.schema_id, target_subject=c.target_subject
            )
            for c in report.copied
        ],
        "state_changed": [
            wire_answers.SchemaStateChangeAnswer(
                target=c.target, subject=c.subject, version=c.version, target_subject=c.target_subject, state=c.state
            )
            for c in report.state_changed
        ],
        "unreachable": report.unreachable,
    }


def schema_report_json(report: SchemaReport) -> Json:
    """One distribution pass, as ``POST /schemas/sync`` answers it."""
    return wire_answers.SchemaReportAnswer(**_schema_report(report)).to_json()


def schema_status_json(status: SchemaStatus) -> Json:
    """``GET /schemas``: the last successful pass, and ``lastError`` (a later pass failed; else null)."""
    return wire_answers.SchemaStatusAnswer(**_schema_report(status.report), last_error=status.last_error).to_json()


# -- an operator's controls and failover ------------------------------------------------------------


def controls_json(view: Mapping[str, Any]) -> Json:
    """``GET /controls``, from :meth:`controller.operate.control.FleetControls.view`."""
    return wire_answers.ControlsAnswer(
        paused=view["paused"],
        cordoned=view["cordoned"],
        autobalancing=view["autobalancing"],
        throttles={
            route: wire_answers.RouteThrottleAnswer(**throttle) for route, throttle in view["throttles"].items()
        },
    ).to_json()


def paused_json(answer: Mapping[str, Any]) -> Json:
    """A pause or resume: the topic's paused partitions per route."""
    return wire_answers.PausedPartitionsAnswer(topic=answer["topic"], paused=answer["paused"]).to_json()


def worker_control_json(worker: str, cordon: str | None, partitions: int) -> Json:
    return wire_answers.WorkerControlAnswer(worker=worker, cordon=cordon, partitions=partitions).to_json()


def autobalancing_json(enabled: bool) -> Json:
    return wire_requests.AutobalancingRequest(enabled=enabled).to_json()


def throttle_json(answer: Mapping[str, Any]) -> Json:
    """A route's throttle as set (:meth:`controller.operate.control.FleetControls.set_throttle`)."""
    return wire_answers.ThrottleAnswer(**answer).to_json()


def route_state_json(state: Mapping[str, Any]) -> Json:
    """A route's failover state, as the failover workflow wrote it (:mod:`controller.failover.workflow`)."""
    return wire_answers.RouteStateAnswer.model_validate(state).to_json()


def routes_json(states: Iterable[Mapping[str, Any]]) -> Json:
    return wire_answers.RoutesAnswer(
        routes=[wire_answers.RouteStateAnswer.model_validate(state) for state in states]
    ).to_json()
