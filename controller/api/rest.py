"""The controller's REST API (Flask), shaped like uReplicator's: JSON everywhere.

Thin: :func:`create_app` registers every blueprint (:mod:`controller.api.blueprints`) over a controller
object and turns errors into JSON answers; no thread starts here. The parts answer with typed data;
every JSON shape is :mod:`controller.api.rest_json`'s.
Any controller answers reads; a standby forwards writes to the leader named in ZooKeeper (:mod:`controller.api.edge`),
with the caller's token and request id.

Every path parameter, query argument and body field is checked at the edge (:mod:`controller.api.checks`),
before it reaches the controller (and so ZooKeeper or Kafka). User mistakes get a 4xx with a message
(``{"error": ..., "status": ..., "requestId": ...}``), never a 500; a 500 is a bug, logged under
the request id that the response carries too (header ``X-Request-Id`` on every response).
Authentication (optional): :mod:`controller.api.auth`. The OpenAPI document: :mod:`controller.api.openapi`.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify, request
from flask.json.provider import DefaultJSONProvider
from kazoo.exceptions import KazooException
from werkzeug.exceptions import HTTPException

from ferry.controller.api import wire_answers
from ferry.controller.api.auth import TokenChecker
from ferry.controller.api.blueprints.failover import failover_api
from ferry.controller.api.blueprints.health import health_api
from ferry.controller.api.blueprints.instances import instances_api
from ferry.controller.api.blueprints.offsets import offsets_api
from ferry.controller.api.blueprints.operate import operate_api
from ferry.controller.api.blueprints.schemas import schemas_api
from ferry.controller.api.blueprints.topics import topics_api
from ferry.controller.api.edge import FORWARDED_HEADER as FORWARDED_HEADER
from ferry.controller.api.edge import REQUEST_ID_HEADER as REQUEST_ID_HEADER
from ferry.controller.api.edge import after_request, before_request, request_id
from ferry.controller.api.openapi import openapi_document
from ferry.controller.api.ports import ControllerApi
from ferry.controller.errors import ControllerError, Unauthorized

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024  # a topic request is a few dozen bytes

BLUEPRINTS = (health_api, topics_api, instances_api, offsets_api, schemas_api, operate_api, failover_api)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> tuple[Response, int]:
    response = jsonify(wire_answers.ErrorAnswer(error=message, status=status, request_id=request_id()).to_json())
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response, status


class _InOrder(DefaultJSONProvider):
    """JSON answers keep their keys in the order the wire shapes declare them."""

    sort_keys = False


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
    app.json = _InOrder(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    app.before_request(before_request)
    app.after_request(after_request)

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
        log.error("request %s: %s %s failed", request_id(), request.method, request.path, exc_info=exc)
        return _error(500, f"internal error; the controller's log has the details under request id {request_id()}")

    return app
