"""The REST edge's request handling around every view: the current controller, request ids, the token
check, the audit line of each write, and the leader check (:func:`leader_only`: a standby forwards to the
leader).

A leaf of the REST edge: every blueprint (:mod:`controller.api.blueprints`) and the app
(:mod:`controller.api.rest`) import it; it imports none of them.
"""

from __future__ import annotations

import functools
import logging
import re
import uuid
from collections.abc import Callable
from typing import Any

import requests
from flask import Response, current_app, g, request
from flask.typing import ResponseReturnValue

from ferry.controller.api.auth import TokenChecker
from ferry.controller.api.ports import ControllerApi
from ferry.controller.errors import Unavailable

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Ferry-Forwarded-By"
REQUEST_ID_HEADER = "X-Request-Id"
# A caller's request id is kept when it is this tame (it goes into logs and headers as is).
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # fullmatch
# Probes and the API description answer without a token, even when reads are closed.
_ALWAYS_OPEN = frozenset({"/health", "/health/ready", "/health/live", "/openapi.json"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def current_controller() -> ControllerApi:
    """The controller this request's app was created over."""
    controller: ControllerApi = current_app.extensions["ferry.controller"]
    return controller


# -- request ids, authentication, forwarding --------------------------------------------------


def request_id() -> str:
    """This request's id (``-`` outside a request)."""
    given: str = g.get("request_id") or "-"
    return given


def before_request() -> None:
    offered = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = offered if _SANE_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex
    g.token_name = None
    checker: TokenChecker | None = current_app.extensions.get("ferry.auth")
    if checker is None or request.path in _ALWAYS_OPEN:
        return
    token = checker.check(request.headers.get("Authorization"), write=request.method not in _READ_METHODS)
    g.token_name = token.name if token else None


def after_request(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = request_id()
    if request.method not in _READ_METHODS:
        # An audit line per write: who (the token's name, never the token) did what.
        log.info(
            "%s %s -> %d (token %s, request %s)",
            request.method,
            request.path,
            response.status_code,
            g.get("token_name") or "-",
            request_id(),
        )
    return response


def forward_if_standby() -> Response | None:
    """A standby sends the write to the leader and relays its answer; None when we lead.

    The caller's token and request id go along, so the leader checks the same token and
    logs the same id.
    """
    leadership = current_controller().leadership
    if leadership.is_leader():
        return None
    if request.headers.get(FORWARDED_HEADER):
        raise Unavailable("this controller no longer leads; retry")
    leader = leadership.leader()
    if not leader or not leader.get("rest_url"):
        raise Unavailable("no controller leads right now; retry in a few seconds")
    timeout = current_app.config.get("FERRY_FORWARD_TIMEOUT_S", 10.0)
    headers = {
        "Content-Type": request.content_type or "application/json",
        FORWARDED_HEADER: leadership.controller_id,
        REQUEST_ID_HEADER: request_id(),
    }
    if request.headers.get("Authorization"):
        headers["Authorization"] = request.headers["Authorization"]
    try:
        answer = requests.request(
            request.method,
            leader["rest_url"].rstrip("/") + request.full_path.rstrip("?"),
            data=request.get_data(),
            headers=headers,
            timeout=timeout,
            verify=current_app.config.get("FERRY_FORWARD_VERIFY", True),
        )
    except requests.RequestException as exc:
        # The exception's text names the URL and the cause; it carries no header of ours.
        raise Unavailable(
            f"the leader {leader.get('id')} at {leader['rest_url']} did not answer: {type(exc).__name__}"
        ) from None
    response = Response(
        answer.content, status=answer.status_code, content_type=answer.headers.get("Content-Type", "application/json")
    )
    if "WWW-Authenticate" in answer.headers:
        response.headers["WWW-Authenticate"] = answer.headers["WWW-Authenticate"]
    return response


View = Callable[..., ResponseReturnValue]


def leader_only(check: Callable[..., dict[str, Any]] | None = None) -> Callable[[View], View]:
    """The leader check, registered once for every view that only the leader answers.

    ``check`` (given the view's path parameters) validates the request first, so a standby
    answers a bad request with a 400 itself, without asking the leader; then a standby forwards
    the request to the leader (:func:`forward_if_standby`) and relays its answer; on the leader
    the view runs with what ``check`` returned as keyword arguments (the path parameters when
    there is no ``check``).
    """

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def guarded(**kwargs: Any) -> ResponseReturnValue:
            checked = check(**kwargs) if check is not None else kwargs
            forwarded = forward_if_standby()
            if forwarded is not None:
                return forwarded
            return view(**checked)

        return guarded

    return decorate
