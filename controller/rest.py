"""The controller's REST API (Flask), shaped like uReplicator's: JSON everywhere.

Thin: :func:`create_app` wires blueprints over a controller object; no thread starts here.
Any controller answers reads; a standby forwards writes to the leader named in ZooKeeper.
User mistakes get a 4xx with a message (``{"error": ..., "status": ...}``), never a 500.
"""

from __future__ import annotations

from typing import Any, Protocol

import requests
from flask import Blueprint, Flask, Response, current_app, jsonify, request
from werkzeug.exceptions import HTTPException

from controller.errors import BadRequest, ControllerError, Unavailable

FORWARDED_HEADER = "X-Ferry-Forwarded-By"


class ControllerApi(Protocol):
    """What the REST layer needs from a controller (:class:`controller.service.Controller`)."""

    controller_id: str

    def is_leader(self) -> bool: ...
    def leader(self) -> dict[str, str] | None: ...
    def health(self) -> dict[str, Any]: ...
    def list_topics(self) -> list[dict[str, Any]]: ...
    def topic_view(self, topic: str, route: str | None = None) -> dict[str, Any]: ...
    def add_topic(self, topic: Any, num_partitions: Any = None, route: str | None = None) -> dict[str, Any]: ...
    def add_topics(self, topics: Any, route: str | None = None) -> dict[str, Any]: ...
    def expand_topic(self, topic: Any, num_partitions: Any, route: str | None = None) -> dict[str, Any]: ...
    def delete_topic(self, topic: str, route: str | None = None) -> dict[str, Any]: ...
    def instances(self) -> dict[str, Any]: ...
    def rebalance_now(self) -> dict[str, Any]: ...
    def validation(self) -> dict[str, Any]: ...
    def source_validation(self) -> dict[str, Any]: ...
    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[Any, Any]: ...
    def noprogress(self) -> dict[str, Any]: ...
    def metrics_text(self) -> bytes: ...


def _controller() -> ControllerApi:
    controller: ControllerApi = current_app.extensions["ferry.controller"]
    return controller


def _body() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object, e.g. {"topic": "orders", "numPartitions": 8}')
    return body


def _route_arg(body: dict[str, Any] | None = None) -> str | None:
    route = (body or {}).get("route") or request.args.get("route")
    if route is not None and not isinstance(route, str):
        raise BadRequest("route must be a string like source.destination")
    return route


def _forward_if_standby() -> Response | None:
    """A standby sends the write to the leader and relays its answer; None when we lead."""
    controller = _controller()
    if controller.is_leader():
        return None
    if request.headers.get(FORWARDED_HEADER):
        raise Unavailable("this controller no longer leads; retry")
    leader = controller.leader()
    if not leader or not leader.get("rest_url"):
        raise Unavailable("no controller leads right now; retry in a few seconds")
    timeout = current_app.config.get("FERRY_FORWARD_TIMEOUT_S", 10.0)
    try:
        answer = requests.request(
            request.method, leader["rest_url"].rstrip("/") + request.full_path.rstrip("?"),
            data=request.get_data(), headers={"Content-Type": request.content_type or "application/json",
                                              FORWARDED_HEADER: controller.controller_id},
            timeout=timeout,
        )
    except requests.RequestException as exc:
        raise Unavailable(f"the leader {leader.get('id')} at {leader['rest_url']} did not answer: {exc}") from None
    return Response(answer.content, status=answer.status_code,
                    content_type=answer.headers.get("Content-Type", "application/json"))


health_api = Blueprint("health", __name__)
topics_api = Blueprint("topics", __name__)
instances_api = Blueprint("instances", __name__)
offsets_api = Blueprint("offsets", __name__)


@health_api.get("/health")
def health() -> Any:
    return jsonify(_controller().health())


@topics_api.get("/topics")
def list_topics() -> Any:
    return jsonify({"topics": _controller().list_topics()})


@topics_api.get("/topics/<topic>")
def get_topic(topic: str) -> Any:
    return jsonify(_controller().topic_view(topic, _route_arg()))


@topics_api.post("/topics")
def add_topic() -> Any:
    body = _body()
    forwarded = _forward_if_standby()
    if forwarded is not None:
        return forwarded
    if "topics" in body:  # bulk: [{"topic", "numPartitions"?}, ...] in one write and one reconcile
        return jsonify(_controller().add_topics(body.get("topics"), _route_arg(body))), 201
    return jsonify(_controller().add_topic(body.get("topic"), body.get("numPartitions"), _route_arg(body))), 201


@topics_api.put("/topics")
def expand_topic() -> Any:
    body = _body()
    forwarded = _forward_if_standby()
    if forwarded is not None:
        return forwarded
    return jsonify(_controller().expand_topic(body.get("topic"), body.get("numPartitions"), _route_arg(body)))


@topics_api.delete("/topics/<topic>")
def delete_topic(topic: str) -> Any:
    forwarded = _forward_if_standby()
    if forwarded is not None:
        return forwarded
    return jsonify(_controller().delete_topic(topic, _route_arg()))


@instances_api.get("/instances")
def instances() -> Any:
    return jsonify(_controller().instances())


@instances_api.post("/instances")
def rebalance() -> Any:
    forwarded = _forward_if_standby()
    if forwarded is not None:
        return forwarded
    return jsonify(_controller().rebalance_now())


@instances_api.get("/validation")
def validation() -> Any:
    return jsonify(_controller().validation())


@instances_api.get("/validation/srcKafka")
def source_validation() -> Any:
    return jsonify(_controller().source_validation())


def _offsets_json(samples: dict[Any, Any]) -> list[dict[str, Any]]:
    return [
        {"partition": str(key), "route": key.route, "topic": key.topic, "partitionId": key.partition,
         "committed": sample.committed, "logEnd": sample.end, "lag": sample.lag}
        for key, sample in sorted(samples.items())
    ]


@offsets_api.get("/offset")
def offsets() -> Any:
    return jsonify({"offsets": _offsets_json(_controller().offsets())})


@offsets_api.get("/offset/<topic>")
def topic_offsets(topic: str) -> Any:
    return jsonify({"offsets": _offsets_json(_controller().offsets(topic))})


@offsets_api.get("/offset/<topic>/<int:partition>")
def partition_offsets(topic: str, partition: int) -> Any:
    return jsonify({"offsets": _offsets_json(_controller().offsets(topic, partition))})


@offsets_api.get("/noprogress")
def noprogress() -> Any:
    forwarded = _forward_if_standby()  # only the leader samples offsets over time
    if forwarded is not None:
        return forwarded
    return jsonify(_controller().noprogress())


@health_api.get("/metrics")
def metrics() -> Any:
    return Response(_controller().metrics_text(), content_type="text/plain; version=0.0.4; charset=utf-8")


def _error(status: int, message: str) -> tuple[Response, int]:
    return jsonify({"error": message, "status": status}), status


def create_app(controller: ControllerApi, forward_timeout_s: float = 10.0) -> Flask:
    app = Flask("ferry.controller")
    app.extensions["ferry.controller"] = controller
    app.config["FERRY_FORWARD_TIMEOUT_S"] = forward_timeout_s
    app.json.sort_keys = False  # type: ignore[attr-defined]
    for blueprint in (health_api, topics_api, instances_api, offsets_api):
        app.register_blueprint(blueprint)

    @app.errorhandler(ControllerError)
    def on_controller_error(exc: ControllerError) -> tuple[Response, int]:
        return _error(exc.status, str(exc))

    @app.errorhandler(HTTPException)
    def on_http_error(exc: HTTPException) -> tuple[Response, int]:
        return _error(exc.code or 500, exc.description or exc.name)

    @app.errorhandler(Exception)
    def on_bug(exc: Exception) -> tuple[Response, int]:
        app.logger.exception("internal error")
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    return app
