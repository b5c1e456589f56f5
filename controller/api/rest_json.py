"""Every JSON shape the controller answers with: REST (:mod:`controller.api.rest`) and ``ferry groups --json``.

Pure functions from the parts' typed answers (:mod:`controller.topics.reads`, :mod:`controller.topics.admin`,
:mod:`controller.jobs.scheduler`, :mod:`controller.tree.control`, :mod:`controller.groups.checkpoints`, and model
types) to JSON-ready dicts: the camelCase keys and their order live here only. No Flask, no I/O,
so a CLI can shape the same way; the parts never import this module (``.importlinter``).
The OpenAPI document (:mod:`controller.api.openapi`) describes these shapes; those with a model in
:mod:`controller.api.models` are built from it, so their schema is the model's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ferry.common.core import tree
from ferry.common.core.heartbeat import HeartbeatView, Latency
from ferry.common.model import IdealState, PartitionKey
from ferry.controller.api import models
from ferry.controller.groups.checkpoints import GroupCheckpoints, SyncResult, Translation
from ferry.controller.groups.translate import OffsetTranslation
from ferry.controller.schemas.distributor import SchemaReport, SchemaStatus
from ferry.controller.topics.admin import Rebalanced, TopicDeleted
from ferry.controller.topics.progress import NoProgress, OffsetSample
from ferry.controller.topics.reads import Health, Instances, RouteTopic, SourceValidation, TopicView, Validation
from ferry.controller.tree.control import TreeView

Json = dict[str, Any]

# -- reads ------------------------------------------------------------------------------------


def health_json(health: Health) -> Json:
    return models.Health(status="ok" if health.zookeeper_connected else "zookeeper unreachable",
                         id=health.controller_id, state=health.state, leader=health.leading,
                         leader_id=health.leader_id, leader_url=health.leader_url).to_json()


def topics_json(states: Iterable[IdealState]) -> Json:
    """``GET /topics`` and a bulk ``POST /topics``: route, topic and partition count of each."""
    # models.TopicList's shape, built as plain dicts: 160,000 topics take 0.06 s so, 0.5 s through the
    # model (tests/unit/test_rest_json.py checks the two agree).
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
    return {
        "instances": [
            {"id": i.worker_id, "host": i.info.host, "pid": i.info.pid, "metricsUrl": i.info.metrics_url,
             "partitions": i.partitions, "online": i.online, "error": i.error, "generation": i.generation,
             "leaving": i.leaving}
            for i in instances.live
        ],
        "departed": [{"id": w, "partitions": parts} for w, parts in instances.departed.items()],
    }


def validation_json(validation: Validation) -> Json:
    return {
        "ok": validation.ok,
        "summary": validation.summary,
        "mismatches": [m.to_json() for m in validation.mismatches],  # shared with `ferry zk` (common.core.diff)
        "spark": validation.spark,  # the last `ferry validate --store`, as stored, with checkedAt
        "failover": validation.failover,  # routes not ACTIVE -> their failover state
        "notices": validation.notices,
    }


def source_validation_json(validation: SourceValidation) -> Json:
    spark = validation.spark
    return {
        "ok": validation.ok,
        "topics": validation.topics,
        "mismatches": [{"route": m.route, "topic": m.topic, "idealPartitions": m.ideal_partitions,
                        "sourcePartitions": m.source_partitions, "problem": m.problem}
                       for m in validation.mismatches],
        "spark": None if spark is None else {"checkedAt": spark.get("checkedAt"), "srcKafka": spark.get("srcKafka")},
    }


# -- offsets ------------------------------------------------------------------------------------

DestinationTopic = Callable[[str, str], str]
"""(route, topic) -> the topic's name on the route's destination (:meth:`controller.topics.reads.ReadSide.destination_topic`)."""


def offset_json(key: PartitionKey, sample: OffsetSample, destination_topic: DestinationTopic) -> Json:
    """One partition's offsets; ``destinationTopic`` is the topic's name on the route's destination
    (the same name unless the route renames topics)."""
    return {"partition": str(key), "route": key.route, "topic": key.topic,
            "destinationTopic": destination_topic(key.route, key.topic),
            "partitionId": key.partition, "committed": sample.committed, "logEnd": sample.end, "lag": sample.lag}


def offsets_json(samples: Mapping[PartitionKey, OffsetSample], destination_topic: DestinationTopic) -> Json:
    return {"offsets": [offset_json(key, sample, destination_topic) for key, sample in sorted(samples.items())]}


def noprogress_json(report: NoProgress, destination_topic: DestinationTopic) -> Json:
    rows = [{**offset_json(key, report.latest[key], destination_topic), "stalledForS": round(since, 1)}
            for key, since in sorted(report.stalled.items())]
    return {"noprogress": rows, "thresholdS": report.threshold_s}


# -- topic commands -------------------------------------------------------------------------------


def deleted_json(deleted: TopicDeleted) -> Json:
    return models.Deleted(topic=deleted.topic).to_json()


def rebalanced_json(rebalanced: Rebalanced) -> Json:
    return models.Rebalanced(moved=rebalanced.moved).to_json()


# -- the distribution tree ------------------------------------------------------------------------


def tree_json(view: TreeView) -> Json:
    rows = [{"name": r.distributor.name, "cluster": r.distributor.cluster, "level": r.distributor.level,
             "mask": tree.format_flags(r.distributor.mask), "bit": tree.format_flags(r.distributor.bit),
             "subtree": list(r.distributor.subtree), "subtreeLayout": r.distributor.subtree_layout,
             "target": r.target, "switched": r.switched, "state": r.state} for r in view.distributors]
    return {"layout": view.layout, "switchAfterS": view.switch_after_s, "distributors": rows,
            "unreachable": view.unreachable, "table": view.table}


# -- heartbeats -----------------------------------------------------------------------------------


def _figures(latency: Latency | None) -> dict[str, float | None]:
    if latency is None:
        return {"latencyS": None, "sinceLastS": None}
    return {"latencyS": round(latency.latency_s, 3), "sinceLastS": round(latency.since_last_s, 3)}


def heartbeats_json(view: HeartbeatView) -> Json:
    return {
        "endToEnd": [{"origin": a.origin, "cluster": a.cluster, "hops": a.hops, **_figures(a)} for a in view.end_to_end],
        "routes": {name: _figures(latency) for name, latency in view.routes.items()},
    }


# -- consumer-group checkpoints (REST /groups and `ferry groups --json`) -------------------------


def translation_json(t: Translation) -> Json:
    return {"route": t.route, "group": t.group, "topic": t.topic, "partition": t.partition,
            "sourceOffset": t.source_offset, "sourceLogEnd": t.source_end, "lag": t.lag,
            "destinationTopic": t.destination_topic, "destinationOffset": t.destination_offset,
            "method": t.method}


def offset_translation_json(t: OffsetTranslation) -> Json:
    """``GET /translate`` and ``ferry offsets translate --json``."""
    return {"route": t.route, "topic": t.topic, "destinationTopic": t.destination_topic, "partition": t.partition,
            "direction": t.direction, "offset": t.offset, "translatedOffset": t.translated,
            "exact": t.exact, "method": t.method}


def groups_json(checkpoints: GroupCheckpoints) -> Json:
    ages = checkpoints.ages
    return {"groups": [
        {"group": group, "checkpointAgeS": {route: round(age, 3) for (route, g), age in sorted(ages.items()) if g == group},
         "partitions": [translation_json(t) for t in translations]}
        for group, translations in checkpoints.by_group.items()
    ]}


def sync_json(result: SyncResult) -> Json:
    out: Json = {"group": result.group, "synced": result.synced}
    if result.skipped is not None:
        out["skipped"] = result.skipped
    return out


# -- schema distribution (GET /schemas, POST /schemas/sync) ---------------------------------------


def schema_report_json(report: SchemaReport) -> Json:
    """One distribution pass, as ``POST /schemas/sync`` answers it."""
    subjects = [
        {"subject": s.subject, "version": s.latest.version, "id": s.latest.schema_id,
         "versions": {str(v.version): v.schema_id for v in s.versions},
         "states": {str(version): state for version, state in s.states.items()},
         "targets": {target: {"subject": status.target_subject, "state": status.state.value,
                              "syncedVersions": list(status.synced_versions),
                              "missingVersions": list(status.missing_versions), "conflict": status.conflict}
                     for target, status in s.targets.items()}}
        for s in report.subjects
    ]
    return {
        "primary": report.primary,
        "targets": report.targets,
        "checkedAt": report.checked_at,
        "subjects": subjects,
        "inSync": report.in_sync,
        "outOfSync": report.out_of_sync,
        "conflicts": [{"target": c.target, "subject": c.subject, "version": c.version, "id": c.schema_id,
                       "targetSubject": c.target_subject, "reason": c.reason} for c in report.conflicts],
        "copied": [{"target": c.target, "subject": c.subject, "version": c.version, "id": c.schema_id,
                    "targetSubject": c.target_subject} for c in report.copied],
        "stateChanged": [{"target": c.target, "subject": c.subject, "version": c.version,
                          "targetSubject": c.target_subject, "state": c.state} for c in report.state_changed],
        "unreachable": report.unreachable,
    }


def schema_status_json(status: SchemaStatus) -> Json:
    """``GET /schemas``: the last successful pass, and ``lastError`` (a later pass failed; else null)."""
    return {**schema_report_json(status.report), "lastError": status.last_error}
