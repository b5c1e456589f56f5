"""The failover endpoints: ``GET /routes``, ``GET /routes/<route>``, ``POST /routes/<route>/failover``.

The POST's body is :class:`controller.api.request_models.FailoverRequest` (every field optional, the body
too). The answer is the route's failover state with its report; a route already failed over answers 409
with its state. The state is the workflow's own document (:mod:`controller.failover.workflow`), written
through :class:`controller.api.response_models.RouteState` (fields it has not written yet stay absent).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

from ferry.controller.api import rest_json
from ferry.controller.api.request_models import FailoverRequest
from ferry.controller.api.rest import _checked, _controller, _route, leader_only

failover_api = Blueprint("failover", __name__)


def _route_name(route: Any) -> str:
    name = _route(route, "the path's")
    assert name is not None
    return name


def _failover_request(route: str) -> dict[str, Any]:
    body = _checked(FailoverRequest, '{"planned": true, "quietS": 5} (or no body at all)', optional=True)
    return {
        "route": _route_name(route),
        "planned": body.planned,
        "groups": body.groups,
        "topics": body.topics,
        "quiet_s": body.quiet_s,
        "timeout_s": body.timeout_s,
    }


@failover_api.get("/routes")
def routes() -> Any:
    return jsonify(rest_json.routes_json(_controller().failover.routes()))  # type: ignore[attr-defined]


@failover_api.get("/routes/<route>")
def route(route: str) -> Any:
    return jsonify(rest_json.route_state_json(_controller().failover.route(_route_name(route))))  # type: ignore[attr-defined]


@failover_api.post("/routes/<route>/failover")
@leader_only(_failover_request)
def failover(
    route: str, planned: bool, groups: str | None, topics: str | None, quiet_s: float, timeout_s: float
) -> Any:
    return jsonify(
        rest_json.route_state_json(
            _controller().failover.fail_over(  # type: ignore[attr-defined]
                route, planned, groups, topics, quiet_s, timeout_s
            )
        )
    )
