"""REST for an operator's controls (:mod:`controller.operate.control`): pause and resume, cordon,
drain and uncordon, the autobalancing switch and route throttles.

Every write is checked here first (a standby answers a bad request itself), then forwarded to the
leader by a standby (:func:`controller.api.edge.leader_only`). Bad input is a 400, an unknown topic a 404.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from ferry.common.core.operate.controls import CORDON, DRAIN, Throttle
from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only
from ferry.controller.errors import BadRequest
from ferry.controller.operate.control import WorkerControl

operate_api = Blueprint("operate", __name__)

_WORKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # fullmatch


def _pause_request(topic: str) -> dict[str, Any]:
    body = checks.body(
        wire_requests.PauseRequest, '{"partitions": [0, 1]} (or no body at all: the whole topic)', optional=True
    )
    return {"topic": checks.topic_name(topic), "partitions": body.partitions, "route": body.route or checks.route_arg()}


@operate_api.post("/topics/<topic>/pause")
@leader_only(_pause_request)
def pause(topic: str, partitions: list[int] | None, route: str | None) -> ResponseReturnValue:
    return jsonify(rest_json.paused_json(current_controller().operate.pause(topic, partitions, route).to_json()))


@operate_api.post("/topics/<topic>/resume")
@leader_only(_pause_request)
def resume(topic: str, partitions: list[int] | None, route: str | None) -> ResponseReturnValue:
    paused = current_controller().operate.pause(topic, partitions, route, resume=True)
    return jsonify(rest_json.paused_json(paused.to_json()))


def _worker(worker: str) -> dict[str, Any]:
    if not _WORKER_ID.fullmatch(worker):
        raise BadRequest(f"not a worker id: {worker[:80]!r}")
    return {"worker": worker}


def _worker_json(control: WorkerControl) -> dict[str, Any]:
    return rest_json.worker_control_json(control.worker, control.cordon, control.partitions)


@operate_api.get("/workers/<worker>")
def worker(worker: str) -> ResponseReturnValue:
    return jsonify(_worker_json(current_controller().operate.worker(_worker(worker)["worker"])))


@operate_api.post("/workers/<worker>/cordon")
@leader_only(_worker)
def cordon(worker: str) -> ResponseReturnValue:
    return jsonify(_worker_json(current_controller().operate.cordon(worker, CORDON)))


@operate_api.post("/workers/<worker>/drain")
@leader_only(_worker)
def drain(worker: str) -> ResponseReturnValue:
    return jsonify(_worker_json(current_controller().operate.cordon(worker, DRAIN)))


@operate_api.post("/workers/<worker>/uncordon")
@leader_only(_worker)
def uncordon(worker: str) -> ResponseReturnValue:
    return jsonify(_worker_json(current_controller().operate.cordon(worker, None)))


@operate_api.get("/controls")
def controls() -> ResponseReturnValue:
    return jsonify(rest_json.controls_json(current_controller().operate.view().to_json()))


@operate_api.get("/autobalancing")
def autobalancing() -> ResponseReturnValue:
    return jsonify(rest_json.autobalancing_json(current_controller().operate.view().autobalancing))


@operate_api.put("/autobalancing")
@leader_only(lambda: {"enabled": checks.body(wire_requests.AutobalancingRequest, '{"enabled": false}').enabled})
def set_autobalancing(enabled: bool) -> ResponseReturnValue:
    return jsonify(rest_json.autobalancing_json(current_controller().operate.set_autobalancing(enabled)))


def _throttle_request(route: str) -> dict[str, Any]:
    name = checks.route_name(route, "the path's")
    body = checks.body(wire_requests.ThrottleRequest, '{"max_bytes_per_s": 1000000, "max_records_per_s": null}')
    return {"route": name, "throttle": Throttle(body.max_bytes_per_s, body.max_records_per_s)}


@operate_api.put("/routes/<route>/throttle")
@leader_only(_throttle_request)
def set_throttle(route: str, throttle: Throttle) -> ResponseReturnValue:
    return jsonify(rest_json.throttle_json(current_controller().operate.set_throttle(route, throttle).to_json()))
