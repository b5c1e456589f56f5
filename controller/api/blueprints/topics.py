"""``/topics``: list, show, add (one or many), expand and delete mirrored topics.

A body becomes typed values here, once (:class:`controller.topics.spec.TopicSpec`); the leader's
:class:`controller.topics.admin.TopicAdmin` checks only the domain's rules.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only
from ferry.controller.errors import BadRequest
from ferry.controller.topics.spec import TopicSpec

topics_api = Blueprint("topics", __name__)

_TOPIC_EXAMPLE = '{"topic": "orders", "numPartitions": 8}'


@topics_api.get("/topics")
def list_topics() -> ResponseReturnValue:
    return jsonify(rest_json.topics_json(current_controller().reads.list_topics()))


@topics_api.get("/topics/<topic>")
def get_topic(topic: str) -> ResponseReturnValue:
    view = current_controller().reads.topic_view(checks.topic_name(topic), checks.route_arg())
    return jsonify(rest_json.topic_json(view))


def _add_request() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if isinstance(body, dict) and "topics" in body:  # bulk: one write and one reconcile for them all
        many = checks.body(wire_requests.TopicsRequest, '{"topics": [' + _TOPIC_EXAMPLE + "]}")
        specs = [TopicSpec(entry.topic, entry.num_partitions, entry.start) for entry in many.topics]
        return {"specs": specs, "bulk": True, "route": many.route or checks.route_arg()}
    one = checks.body(wire_requests.TopicRequest, _TOPIC_EXAMPLE)
    spec = TopicSpec(one.topic, one.num_partitions, one.start)
    return {"specs": [spec], "bulk": False, "route": one.route or checks.route_arg()}


@topics_api.post("/topics")
@leader_only(_add_request)
def add_topic(specs: list[TopicSpec], bulk: bool, route: str | None) -> ResponseReturnValue:
    commands = current_controller().topics
    if bulk:
        return jsonify(rest_json.topics_json(commands.add_topics(specs, route))), 201
    return jsonify(rest_json.topic_json(commands.add_topic(specs[0], route))), 201


def _expand_request() -> dict[str, Any]:
    one = checks.body(wire_requests.TopicRequest, _TOPIC_EXAMPLE)
    if one.num_partitions is None:
        raise BadRequest("numPartitions is required")
    if one.start is not None:
        raise BadRequest("start: only when a topic is added (POST /topics); PUT only adds partitions")
    return {"topic": one.topic, "num_partitions": one.num_partitions, "route": one.route or checks.route_arg()}


@topics_api.put("/topics")
@leader_only(_expand_request)
def expand_topic(topic: str, num_partitions: int, route: str | None) -> ResponseReturnValue:
    return jsonify(rest_json.topic_json(current_controller().topics.expand_topic(topic, num_partitions, route)))


@topics_api.delete("/topics/<topic>")
@leader_only(lambda topic: {"topic": checks.topic_name(topic), "route": checks.route_arg()})
def delete_topic(topic: str, route: str | None) -> ResponseReturnValue:
    return jsonify(rest_json.deleted_json(current_controller().topics.delete_topic(topic, route)))
