"""``GET /health``, ``GET /openapi.json`` and ``GET /metrics``: what probes, clients and scrapers ask."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from flask.typing import ResponseReturnValue

from ferry.controller.api import rest_json
from ferry.controller.api.edge import current_controller

health_api = Blueprint("health", __name__)


@health_api.get("/health")
def health() -> ResponseReturnValue:
    return jsonify(rest_json.health_json(current_controller().reads.health()))


@health_api.get("/openapi.json")
def openapi() -> ResponseReturnValue:
    return jsonify(current_app.extensions["ferry.openapi"])


@health_api.get("/metrics")
def metrics() -> ResponseReturnValue:
    return Response(current_controller().reads.metrics_text(), content_type="text/plain; version=0.0.4; charset=utf-8")
