"""``/instances`` (the workers, a rebalance), ``/tree`` (the distribution tree, a switch of a
distributor's target) and ``/validation`` (what ZooKeeper and the source say against the ideal state)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify, request
from flask.typing import ResponseReturnValue

from ferry.common.vocabulary import DISTRIBUTOR_NAME
from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only
from ferry.controller.errors import BadRequest

instances_api = Blueprint("instances", __name__)


@instances_api.get("/instances")
def instances() -> ResponseReturnValue:
    return jsonify(rest_json.instances_json(current_controller().reads.instances()))


@instances_api.post("/instances")
@leader_only()
def rebalance() -> ResponseReturnValue:
    return jsonify(rest_json.rebalanced_json(current_controller().topics.rebalance_now()))


@instances_api.get("/tree")
def tree_view() -> ResponseReturnValue:
    form = request.args.get("format", "json")
    if form not in ("json", "text"):
        raise BadRequest(f"format must be json or text, not {form[:20]!r}")
    view = current_controller().tree.tree_view()
    if form == "text":
        return Response(view.table + "\n", content_type="text/plain; charset=utf-8")
    return jsonify(rest_json.tree_json(view))


def _switch_request(distributor: str) -> dict[str, Any]:
    if not DISTRIBUTOR_NAME.fullmatch(distributor):
        raise BadRequest(f"a distributor is named <cluster>.L<level>, not {distributor[:80]!r}")
    return {
        "distributor": distributor,
        "target": checks.body(wire_requests.TargetRequest, '{"target": "<cluster>"}').target,
    }


@instances_api.post("/tree/<distributor>/target")
@leader_only(_switch_request)
def switch_target(distributor: str, target: str) -> ResponseReturnValue:
    switched = current_controller().tree.switch_target(distributor, target, "operator's request")
    return jsonify(rest_json.target_switched_json(switched))


@instances_api.get("/validation")
def validation() -> ResponseReturnValue:
    return jsonify(rest_json.validation_json(current_controller().reads.validation()))


@instances_api.get("/validation/srcKafka")
def source_validation() -> ResponseReturnValue:
    return jsonify(rest_json.source_validation_json(current_controller().reads.source_validation()))
