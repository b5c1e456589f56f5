"""REST for an operator's controls (:mod:`controller.operate.control`): pause and resume, cordon,
drain and uncordon, the autobalancing switch and route throttles.

Every write is checked here first (a standby answers a bad request itself), then forwarded to the
leader by a standby (:func:`controller.api.rest.leader_only`). Bad input is a 400, an unknown topic a 404.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, jsonify, request

from ferry.common.core.operate.controls import CORDON, DRAIN, Throttle
from ferry.controller.api.rest import MAX_PARTITIONS, _controller, _route, _route_arg, _topic, leader_only
from ferry.controller.errors import BadRequest

operate_api = Blueprint("operate", __name__)

_WORKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")  # fullmatch
MAX_RATE = 1e15


def _object_body(allow_empty: bool) -> dict[str, Any]:
    if not request.get_data():
        if allow_empty:
            return {}
        raise BadRequest("the request needs a JSON object body")
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _pause_request(topic: str) -> dict[str, Any]:
    body = _object_body(allow_empty=True)
    unknown = sorted(set(body) - {"partitions", "route"})
    if unknown:
        raise BadRequest(f"unknown fields {unknown}"[:200])
    partitions = body.get("partitions")
    if partitions is not None and (not isinstance(partitions, list) or not partitions or len(partitions) > 100_000
            or not all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < MAX_PARTITIONS for p in partitions)):
        raise BadRequest("partitions must be a non-empty list of partition ids")
    route = _route(body.get("route"), "the body's") or _route_arg()
    return {"topic": _topic(topic), "partitions": partitions, "route": route}


@operate_api.post("/topics/<topic>/pause")
@leader_only(_pause_request)
def pause(topic: str, partitions: list[int] | None, route: str | None) -> Any:
    return jsonify(_controller().operate.pause(topic, partitions, route))


@operate_api.post("/topics/<topic>/resume")
@leader_only(_pause_request)
def resume(topic: str, partitions: list[int] | None, route: str | None) -> Any:
    return jsonify(_controller().operate.pause(topic, partitions, route, resume=True))


def _worker(worker: str) -> dict[str, Any]:
    if not _WORKER_ID.fullmatch(worker):
        raise BadRequest(f"not a worker id: {worker[:80]!r}")
    return {"worker": worker}


def _worker_json(control: Any) -> dict[str, Any]:
    return {"worker": control.worker, "cordon": control.cordon, "partitions": control.partitions}


@operate_api.get("/workers/<worker>")
def worker(worker: str) -> Any:
    return jsonify(_worker_json(_controller().operate.worker(_worker(worker)["worker"])))


@operate_api.post("/workers/<worker>/cordon")
@leader_only(_worker)
def cordon(worker: str) -> Any:
    return jsonify(_worker_json(_controller().operate.cordon(worker, CORDON)))


@operate_api.post("/workers/<worker>/drain")
@leader_only(_worker)
def drain(worker: str) -> Any:
    return jsonify(_worker_json(_controller().operate.cordon(worker, DRAIN)))


@operate_api.post("/workers/<worker>/uncordon")
@leader_only(_worker)
def uncordon(worker: str) -> Any:
    return jsonify(_worker_json(_controller().operate.cordon(worker, None)))


@operate_api.get("/controls")
def controls() -> Any:
    return jsonify(_controller().operate.view())


@operate_api.get("/autobalancing")
def autobalancing() -> Any:
    return jsonify({"enabled": _controller().operate.view()["autobalancing"]})


def _autobalancing_request() -> dict[str, Any]:
    body = _object_body(allow_empty=False)
    enabled = body.get("enabled")
    if not isinstance(enabled, bool) or set(body) != {"enabled"}:
        raise BadRequest('the body must be {"enabled": true|false}')
    return {"enabled": enabled}


@operate_api.put("/autobalancing")
@leader_only(_autobalancing_request)
def set_autobalancing(enabled: bool) -> Any:
    return jsonify(_controller().operate.set_autobalancing(enabled))


def _rate(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_RATE:
        raise BadRequest(f"{name} must be a positive number (or null: no limit)")
    return float(value)


def _throttle_request(route: str) -> dict[str, Any]:
    name = _route(route, "the path's")
    body = _object_body(allow_empty=False)
    unknown = sorted(set(body) - {"max_bytes_per_s", "max_records_per_s"})
    if unknown:
        raise BadRequest(f"unknown fields {unknown}"[:200])
    return {"route": name, "throttle": Throttle(_rate(body, "max_bytes_per_s"), _rate(body, "max_records_per_s"))}


@operate_api.put("/routes/<route>/throttle")
@leader_only(_throttle_request)
def set_throttle(route: str, throttle: Throttle) -> Any:
    return jsonify(_controller().operate.set_throttle(route, throttle))
