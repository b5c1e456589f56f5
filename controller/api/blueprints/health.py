"""``GET /health``, ``/health/ready``, ``/health/live``, ``GET /openapi.json`` and ``GET /metrics``: what
probes, clients and scrapers ask.

``/health`` is the readiness probe (it answers 503 while ZooKeeper is unreachable); ``/health/live`` fails
only when the controller itself is stuck (:mod:`common.core.probes`).
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from flask.typing import ResponseReturnValue

from ferry.common.core.probes import Probe
from ferry.controller.api import rest_json
from ferry.controller.api.edge import current_controller
from ferry.controller.topics.reads import Health

health_api = Blueprint("health", __name__)


@health_api.get("/health")
@health_api.get("/health/ready")
def readiness() -> ResponseReturnValue:
    health = current_controller().reads.health()
    return _probe_answer(health, health.readiness())


@health_api.get("/health/live")
def liveness() -> ResponseReturnValue:
    health = current_controller().reads.health()
    return _probe_answer(health, health.liveness())


def _probe_answer(health: Health, probe: Probe) -> ResponseReturnValue:
    return jsonify(rest_json.health_json(health, probe)), 200 if probe.ok else 503


@health_api.get("/openapi.json")
def openapi() -> ResponseReturnValue:
    return jsonify(current_app.extensions["ferry.openapi"])


@health_api.get("/metrics")
def metrics() -> ResponseReturnValue:
    return Response(current_controller().reads.metrics_text(), content_type="text/plain; version=0.0.4; charset=utf-8")
