"""The failover endpoints: ``GET /routes``, ``GET /routes/<route>``, ``POST /routes/<route>/failover``.

Body of the POST (JSON object, every field optional): ``planned`` (bool, default false), ``groups``
and ``topics`` (regular expressions), ``quietS`` and ``timeoutS`` (seconds). The answer is the route's
failover state with its report; a route already failed over answers 409 with its state. The JSON is
the workflow's own report (:mod:`controller.failover.workflow`), returned as is.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Blueprint, jsonify, request

from ferry.controller.api.rest import _controller, _route, leader_only
from ferry.controller.errors import BadRequest

failover_api = Blueprint("failover", __name__)


def _route_name(route: Any) -> str:
    name = _route(route, "the path's")
    assert name is not None
    return name


def _number(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 3600:
        raise BadRequest(f"{key} must be a number of seconds from 0 to 3600")
    return float(value)


def _pattern(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 1000:
        raise BadRequest(f"{key} must be a regular expression (a string)")
    try:
        re.compile(value)
    except re.error as exc:
        raise BadRequest(f"{key} {value[:100]!r} is not a regular expression: {exc}") from None
    return value


def _failover_request(route: str) -> dict[str, Any]:
    body = request.get_json(silent=True) if request.get_data() else {}
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object (planned, groups, topics, quietS, timeoutS)")
    unknown = set(body) - {"planned", "groups", "topics", "quietS", "timeoutS"}
    if unknown:
        raise BadRequest(f"unknown fields {sorted(unknown)[:10]}")
    planned = body.get("planned", False)
    if not isinstance(planned, bool):
        raise BadRequest("planned must be true or false")
    return {"route": _route_name(route), "planned": planned, "groups": _pattern(body, "groups"),
            "topics": _pattern(body, "topics"), "quiet_s": _number(body, "quietS", 5.0),
            "timeout_s": _number(body, "timeoutS", 300.0)}


@failover_api.get("/routes")
def routes() -> Any:
    return jsonify({"routes": _controller().failover.routes()})  # type: ignore[attr-defined]


@failover_api.get("/routes/<route>")
def route(route: str) -> Any:
    return jsonify(_controller().failover.route(_route_name(route)))  # type: ignore[attr-defined]


@failover_api.post("/routes/<route>/failover")
@leader_only(_failover_request)
def failover(route: str, planned: bool, groups: str | None, topics: str | None, quiet_s: float,
             timeout_s: float) -> Any:
    return jsonify(_controller().failover.fail_over(  # type: ignore[attr-defined]
        route, planned, groups, topics, quiet_s, timeout_s))
