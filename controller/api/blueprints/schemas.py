"""``GET /schemas`` (the schema distributor's report) and ``POST /schemas/sync`` (a sync now)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from ferry.controller.api import checks, rest_json, wire_requests
from ferry.controller.api.edge import current_controller, leader_only

schemas_api = Blueprint("schemas", __name__)


def _sync_request() -> dict[str, Any]:
    checks.no_arguments("POST /schemas/sync")
    if request.get_data():
        checks.body(wire_requests.SyncRequest, "{} (or no body at all)")
    return {}


@schemas_api.get("/schemas")
@leader_only(lambda: checks.no_arguments("GET /schemas"))  # the leader runs the distributor and holds its report
def schema_status() -> ResponseReturnValue:
    return jsonify(rest_json.schema_status_json(current_controller().jobs.schema_status()))


@schemas_api.post("/schemas/sync")
@leader_only(_sync_request)
def schema_sync() -> ResponseReturnValue:
    return jsonify(rest_json.schema_report_json(current_controller().jobs.schema_sync()))
