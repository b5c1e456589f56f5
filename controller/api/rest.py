"""The controller's REST API (Flask), shaped like uReplicator's: JSON everywhere.

Thin: :func:`create_app` wires blueprints over a controller object; no thread starts here. The
parts answer with typed data; every JSON shape is :mod:`controller.api.rest_json`'s.
Any controller answers reads; a standby forwards writes to the leader named in ZooKeeper (:mod:`controller.api.edge`),
with the caller's token and request id.

Every path parameter, query argument and body field is checked here, before it reaches the
controller (and so ZooKeeper or Kafka). User mistakes get a 4xx with a message
(``{"error": ..., "status": ..., "requestId": ...}``), never a 500; a 500 is a bug, logged under
the request id that the response carries too (header ``X-Request-Id`` on every response).
Authentication (optional): :mod:`controller.api.auth`. The OpenAPI document: :mod:`controller.api.openapi`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, request
from kazoo.exceptions import KazooException
from werkzeug.exceptions import HTTPException

from ferry.common.model import PartitionKey
from ferry.common.vocabulary import DISTRIBUTOR_NAME, GROUP_NAME, MAX_PARTITIONS, ROUTE_NAME, topic_name_problem
from ferry.controller.api import models, request_models, rest_json
from ferry.controller.api.auth import TokenChecker
from ferry.controller.api.edge import FORWARDED_HEADER as FORWARDED_HEADER
from ferry.controller.api.edge import REQUEST_ID_HEADER as REQUEST_ID_HEADER
from ferry.controller.api.edge import _after, _before, _controller, _forward_if_standby, _request_id
from ferry.controller.api.openapi import openapi_document
from ferry.controller.api.ports import ControllerApi
from ferry.controller.api.response_models import Error
from ferry.controller.errors import BadRequest, ControllerError, Unauthorized
from ferry.controller.topics.progress import OffsetSample

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024  # a topic request is a few dozen bytes


# -- validation at the edge: nothing unchecked reaches ZooKeeper or Kafka ----------------------


def _topic(topic: Any) -> str:
    problem = topic_name_problem(topic)
    if problem:
        raise BadRequest(problem)
    name: str = topic
    return name


def _route(route: Any, where: str) -> str | None:
    if route is None:
        return None
    if not isinstance(route, str) or not ROUTE_NAME.fullmatch(route):
        raise BadRequest(f"{where} route must be a route name like source.destination, not {route!r}"[:300])
    return route


def _route_arg() -> str | None:
    return _route(request.args.get("route"), "the query's")


def _checked(model: type[models.Request], example: str, optional: bool = False) -> models.Request:
    """The request's JSON body checked by ``model`` (:mod:`controller.api.request_models`); ``optional``: no body
    at all is an empty object."""
    body = {} if optional and not request.get_data() else request.get_json(silent=True)
    return _valid(model, body, example)


def _valid(model: type[models.Request], values: Any, example: str) -> models.Request:
    try:
        return models.parsed(model, values, example)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


_TOPIC_EXAMPLE = '{"topic": "orders", "numPartitions": 8}'


View = Callable[..., Any]


def leader_only(check: Callable[..., dict[str, Any]] | None = None) -> Callable[[View], View]:
    """The leader check, registered once for every view that only the leader answers.

    ``check`` (given the view's path parameters) validates the request first, so a standby
    answers a bad request with a 400 itself, without asking the leader; then a standby forwards
    the request to the leader (:func:`_forward_if_standby`) and relays its answer; on the leader
    the view runs with what ``check`` returned as keyword arguments (the path parameters when
    there is no ``check``).
    """

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def guarded(**kwargs: Any) -> Any:
            checked = check(**kwargs) if check is not None else kwargs
            forwarded = _forward_if_standby()
            if forwarded is not None:
                return forwarded
            return view(**checked)

        return guarded

    return decorate


health_api = Blueprint("health", __name__)
topics_api = Blueprint("topics", __name__)
instances_api = Blueprint("instances", __name__)
offsets_api = Blueprint("offsets", __name__)
schemas_api = Blueprint("schemas", __name__)


@health_api.get("/health")
def health() -> Any:
    return jsonify(rest_json.health_json(_controller().reads.health()))


@health_api.get("/openapi.json")
def openapi() -> Any:
    return jsonify(current_app.extensions["ferry.openapi"])


@health_api.get("/metrics")
def metrics() -> Any:
    return Response(_controller().reads.metrics_text(), content_type="text/plain; version=0.0.4; charset=utf-8")


@topics_api.get("/topics")
def list_topics() -> Any:
    return jsonify(rest_json.topics_json(_controller().reads.list_topics()))


@topics_api.get("/topics/<topic>")
def get_topic(topic: str) -> Any:
    return jsonify(rest_json.topic_json(_controller().reads.topic_view(_topic(topic), _route_arg())))


def _add_request() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if isinstance(body, dict) and "topics" in body:  # bulk: one write and one reconcile for them all
        many = _checked(request_models.TopicsRequest, '{"topics": [' + _TOPIC_EXAMPLE + "]}")
        topics = [
            {"topic": entry.topic, "numPartitions": entry.num_partitions, "start": entry.start} for entry in many.topics
        ]
        return {"topics": topics, "topic": None, "count": None, "route": many.route or _route_arg(), "start": None}
    one = _checked(request_models.TopicRequest, _TOPIC_EXAMPLE)
    return {
        "topics": None,
        "topic": one.topic,
        "count": one.num_partitions,
        "route": one.route or _route_arg(),
        "start": one.start,
    }


@topics_api.post("/topics")
@leader_only(_add_request)
def add_topic(
    topics: list[dict[str, Any]] | None,
    topic: str | None,
    count: int | None,
    route: str | None,
    start: str | int | None,
) -> Any:
    commands = _controller().topics
    if topics is not None:
        return jsonify(rest_json.topics_json(commands.add_topics(topics, route))), 201
    return jsonify(rest_json.topic_json(commands.add_topic(topic, count, route, start))), 201


def _expand_request() -> dict[str, Any]:
    one = _checked(request_models.TopicRequest, _TOPIC_EXAMPLE)
    if one.num_partitions is None:
        raise BadRequest("numPartitions is required")
    if one.start is not None:
        raise BadRequest("start: only when a topic is added (POST /topics); PUT only adds partitions")
    return {"topic": one.topic, "count": one.num_partitions, "route": one.route or _route_arg()}


@topics_api.put("/topics")
@leader_only(_expand_request)
def expand_topic(topic: str, count: int, route: str | None) -> Any:
    return jsonify(rest_json.topic_json(_controller().topics.expand_topic(topic, count, route)))


@topics_api.delete("/topics/<topic>")
@leader_only(lambda topic: {"topic": _topic(topic), "route": _route_arg()})
def delete_topic(topic: str, route: str | None) -> Any:
    return jsonify(rest_json.deleted_json(_controller().topics.delete_topic(topic, route)))


@instances_api.get("/instances")
def instances() -> Any:
    return jsonify(rest_json.instances_json(_controller().reads.instances()))


@instances_api.post("/instances")
@leader_only()
def rebalance() -> Any:
    return jsonify(rest_json.rebalanced_json(_controller().topics.rebalance_now()))


@instances_api.get("/tree")
def tree_view() -> Any:
    form = request.args.get("format", "json")
    if form not in ("json", "text"):
        raise BadRequest(f"format must be json or text, not {form[:20]!r}")
    view = _controller().tree.tree_view()
    if form == "text":
        return Response(view.table + "\n", content_type="text/plain; charset=utf-8")
    return jsonify(rest_json.tree_json(view))


def _switch_request(distributor: str) -> dict[str, Any]:
    if not DISTRIBUTOR_NAME.fullmatch(distributor):
        raise BadRequest(f"a distributor is named <cluster>.L<level>, not {distributor[:80]!r}")
    return {
        "distributor": distributor,
        "target": _checked(request_models.TargetRequest, '{"target": "<cluster>"}').target,
    }


@instances_api.post("/tree/<distributor>/target")
@leader_only(_switch_request)
def switch_target(distributor: str, target: str) -> Any:
    return jsonify(
        rest_json.target_switched_json(_controller().tree.switch_target(distributor, target, "operator's request"))
    )


@instances_api.get("/validation")
def validation() -> Any:
    return jsonify(rest_json.validation_json(_controller().reads.validation()))


@instances_api.get("/validation/srcKafka")
def source_validation() -> Any:
    return jsonify(rest_json.source_validation_json(_controller().reads.source_validation()))


# -- offsets ----------------------------------------------------------------------------------


def _offsets_json(samples: Mapping[PartitionKey, OffsetSample]) -> dict[str, Any]:
    return rest_json.offsets_json(samples, _controller().reads.destination_topic)


@offsets_api.get("/offset")
def offsets() -> Any:
    return jsonify(_offsets_json(_controller().reads.offsets()))


@offsets_api.get("/offset/<topic>")
def topic_offsets(topic: str) -> Any:
    return jsonify(_offsets_json(_controller().reads.offsets(_topic(topic))))


@offsets_api.get(f"/offset/<topic>/<int(max={MAX_PARTITIONS - 1}):partition>")
def partition_offsets(topic: str, partition: int) -> Any:
    return jsonify(_offsets_json(_controller().reads.offsets(_topic(topic), partition)))


@offsets_api.get("/noprogress")
@leader_only()  # only the leader samples offsets over time
def noprogress() -> Any:
    controller = _controller()
    return jsonify(rest_json.noprogress_json(controller.jobs.noprogress(), controller.reads.destination_topic))


@offsets_api.get("/heartbeats")
@leader_only()  # only the leader reads heartbeats
def heartbeats() -> Any:
    return jsonify(rest_json.heartbeats_json(_controller().jobs.heartbeats()))


@offsets_api.get("/groups")
@leader_only()  # only the leader runs the checkpoint job
def groups() -> Any:
    return jsonify(rest_json.groups_json(_controller().jobs.groups()))


@offsets_api.get("/translate")
def translate() -> Any:
    """Any controller answers: it reads the offset map on the destination, nothing of ZooKeeper."""
    query = _valid(request_models.TranslateQuery, request.args.to_dict(), "?topic=orders&partition=0&offset=42")
    result = _controller().jobs.translate_offset(
        query.route, query.topic, query.partition, query.offset, query.direction == "reverse"
    )
    return jsonify(rest_json.offset_translation_json(result))


def _group(group: Any) -> str:
    if not isinstance(group, str) or not GROUP_NAME.fullmatch(group):
        raise BadRequest(f"{group!r} is not a consumer group id Ferry accepts"[:300])
    return group


@offsets_api.get("/groups/<group>")
@leader_only(lambda group: {"group": _group(group)})
def group(group: str) -> Any:
    return jsonify(rest_json.groups_json(_controller().jobs.groups(group)))


def _no_arguments(what: str) -> dict[str, Any]:
    if request.args:
        raise BadRequest(f"{what} takes no query arguments, not {sorted(request.args)}"[:300])
    return {}


def _sync_request() -> dict[str, Any]:
    _no_arguments("POST /schemas/sync")
    if request.get_data():
        _checked(request_models.SyncRequest, "{} (or no body at all)")
    return {}


@schemas_api.get("/schemas")
@leader_only(lambda: _no_arguments("GET /schemas"))  # the leader runs the distributor and holds its report
def schema_status() -> Any:
    return jsonify(rest_json.schema_status_json(_controller().jobs.schema_status()))


@schemas_api.post("/schemas/sync")
@leader_only(_sync_request)
def schema_sync() -> Any:
    return jsonify(rest_json.schema_report_json(_controller().jobs.schema_sync()))


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> tuple[Response, int]:
    response = jsonify(Error(error=message, status=status, request_id=_request_id()).to_json())
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response, status


def create_app(
    controller: ControllerApi,
    forward_timeout_s: float = 10.0,
    auth: TokenChecker | None = None,
    forward_verify: bool | str = True,
) -> Flask:
    """The WSGI app over ``controller``.

    ``auth``: bearer-token checks (None: every request is allowed). ``forward_verify``: what a
    standby trusts when it forwards a write to an https leader (requests' ``verify``: a CA file,
    or True for the system's CAs).
    """
    app = Flask("ferry.controller")
    app.extensions["ferry.controller"] = controller
    app.extensions["ferry.auth"] = auth
    app.extensions["ferry.openapi"] = openapi_document(
        auth_enabled=auth is not None, open_reads=auth is None or auth.open_reads
    )
    app.config["FERRY_FORWARD_TIMEOUT_S"] = forward_timeout_s
    app.config["FERRY_FORWARD_VERIFY"] = forward_verify
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES  # larger bodies: a JSON 413
    app.json.sort_keys = False  # type: ignore[attr-defined]
    from ferry.controller.api.failover_rest import failover_api  # they build on this module's helpers
    from ferry.controller.api.operate_rest import operate_api

    for blueprint in (health_api, topics_api, instances_api, offsets_api, schemas_api, operate_api, failover_api):
        app.register_blueprint(blueprint)
    app.before_request(_before)
    app.after_request(_after)

    @app.errorhandler(ControllerError)
    def on_controller_error(exc: ControllerError) -> tuple[Response, int]:
        headers = {}
        if isinstance(exc, Unauthorized):
            headers["WWW-Authenticate"] = 'Bearer realm="ferry"' + (
                ', error="invalid_token"' if exc.invalid_token else ""
            )
        return _error(exc.status, str(exc), headers)

    @app.errorhandler(KazooException)
    def on_zookeeper_error(exc: KazooException) -> tuple[Response, int]:
        # The one place a ZooKeeper failure becomes an answer: worth retrying, never a 500.
        return _error(503, f"ZooKeeper cannot be reached: {type(exc).__name__}")

    @app.errorhandler(HTTPException)
    def on_http_error(exc: HTTPException) -> tuple[Response, int]:
        headers = {name: value for name, value in exc.get_headers() if name == "Allow"}
        return _error(exc.code or 500, exc.description or exc.name, headers)

    @app.errorhandler(Exception)
    def on_bug(exc: Exception) -> tuple[Response, int]:
        # A bug, not the caller's mistake: the details go to the log under the request id,
        # the caller gets the id to quote.
        log.error("request %s: %s %s failed", _request_id(), request.method, request.path, exc_info=exc)
        return _error(500, f"internal error; the controller's log has the details under request id {_request_id()}")

    return app
