"""The failover endpoints: ``GET /routes``, ``GET /routes/<route>``, ``POST /routes/<route>/failover``.

The POST's body is :class:`controller.api.wire_requests.FailoverRequest` (every field optional, the body
too). The answer is the route's failover state with its report; a route already failed over answers 409
with its state. The state is the workflow's own document (:mod:`controller.failover.document`), written
through :class:`controller.api.wire_answers.RouteStateAnswer` (fields it has not written yet stay absent).
With ``"dryRun": true`` the answer is the failover's plan (``dryRun``, ``phases``, ``plan``) and nothing
changes. The POST does not ask for a confirmation, as ``ferry failover`` does on a terminal before an
unplanned failover: a request without ``"planned": true`` is the caller's confirmation.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify
from flask.typing import ResponseReturnValue

from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only

failover_api = Blueprint("failover", __name__)


def _failover_request(route: str) -> dict[str, Any]:
    body = checks.body(
        wire_requests.FailoverRequest, '{"planned": true, "quietS": 5} (or no body at all)', optional=True
    )
    return {
        "route": checks.route_name(route, "the path's"),
        "planned": body.planned,
        "groups": body.groups,
        "topics": body.topics,
        "quiet_s": body.quiet_s,
        "timeout_s": body.timeout_s,
        "dry_run": body.dry_run,
    }


@failover_api.get("/routes")
def routes() -> ResponseReturnValue:
    return jsonify(rest_json.routes_json(row.to_json() for row in current_controller().failover.routes()))


@failover_api.get("/routes/<route>")
def route(route: str) -> ResponseReturnValue:
    state = current_controller().failover.route(checks.route_name(route, "the path's"))
    return jsonify(rest_json.route_state_json(state.to_json()))


@failover_api.post("/routes/<route>/failover")
@leader_only(_failover_request)
def failover(
    route: str,
    planned: bool,
    groups: str | None,
    topics: str | None,
    quiet_s: float,
    timeout_s: float,
    dry_run: bool,
) -> ResponseReturnValue:
    part = current_controller().failover
    if dry_run:
        return jsonify(rest_json.route_state_json(part.plan(route, planned, groups, topics).to_json()))
    state = part.fail_over(route, planned, groups, topics, quiet_s, timeout_s)
    return jsonify(rest_json.route_state_json(state.to_json()))
