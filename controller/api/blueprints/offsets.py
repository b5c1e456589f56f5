"""``/offset``, ``/noprogress``, ``/heartbeats``, ``/groups`` and ``/translate``: where the copy is, per
partition, worker and consumer group."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from ferry.common.model import PartitionKey
from ferry.common.vocabulary import MAX_PARTITIONS
from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only
from ferry.controller.topics.progress import OffsetSample

offsets_api = Blueprint("offsets", __name__)


def _offsets_json(samples: Mapping[PartitionKey, OffsetSample]) -> dict[str, Any]:
    return rest_json.offsets_json(samples, current_controller().reads.destination_topic)


@offsets_api.get("/offset")
def offsets() -> ResponseReturnValue:
    return jsonify(_offsets_json(current_controller().reads.offsets()))


@offsets_api.get("/offset/<topic>")
def topic_offsets(topic: str) -> ResponseReturnValue:
    return jsonify(_offsets_json(current_controller().reads.offsets(checks.topic_name(topic))))


@offsets_api.get(f"/offset/<topic>/<int(max={MAX_PARTITIONS - 1}):partition>")
def partition_offsets(topic: str, partition: int) -> ResponseReturnValue:
    return jsonify(_offsets_json(current_controller().reads.offsets(checks.topic_name(topic), partition)))


@offsets_api.get("/noprogress")
@leader_only()  # only the leader samples offsets over time
def noprogress() -> ResponseReturnValue:
    controller = current_controller()
    return jsonify(rest_json.noprogress_json(controller.jobs.noprogress(), controller.reads.destination_topic))


@offsets_api.get("/heartbeats")
@leader_only()  # only the leader reads heartbeats
def heartbeats() -> ResponseReturnValue:
    return jsonify(rest_json.heartbeats_json(current_controller().jobs.heartbeats()))


@offsets_api.get("/groups")
@leader_only()  # only the leader runs the checkpoint job
def groups() -> ResponseReturnValue:
    return jsonify(rest_json.groups_json(current_controller().jobs.groups()))


@offsets_api.get("/translate")
def translate() -> ResponseReturnValue:
    """Any controller answers: it reads the offset map on the destination, nothing of ZooKeeper."""
    query = checks.valid(wire_requests.TranslateRequest, request.args.to_dict(), "?topic=orders&partition=0&offset=42")
    result = current_controller().jobs.translate_offset(
        query.route, query.topic, query.partition, query.offset, query.direction == "reverse"
    )
    return jsonify(rest_json.offset_translation_json(result))


@offsets_api.get("/groups/<group>")
@leader_only(lambda group: {"group": checks.group_name(group)})
def group(group: str) -> ResponseReturnValue:
    return jsonify(rest_json.groups_json(current_controller().jobs.groups(group)))
