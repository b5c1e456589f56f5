"""The REST edge's request handling around every view: request ids, the token check, the audit line
of each write, and a standby's forwarding of writes to the leader.
"""

from __future__ import annotations

import logging
import re
import uuid

import requests
from flask import Response, current_app, g, request

from ferry.controller.api.auth import TokenChecker
from ferry.controller.api.ports import ControllerApi
from ferry.controller.errors import Unavailable

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-Ferry-Forwarded-By"
REQUEST_ID_HEADER = "X-Request-Id"
# A caller's request id is kept when it is this tame (it goes into logs and headers as is).
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")  # fullmatch
# Probes and the API description answer without a token, even when reads are closed.
_ALWAYS_OPEN = frozenset({"/health", "/openapi.json"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _controller() -> ControllerApi:
    controller: ControllerApi = current_app.extensions["ferry.controller"]
    return controller


# -- request ids, authentication, forwarding --------------------------------------------------


def _request_id() -> str:
    request_id: str = g.get("request_id") or "-"
    return request_id


def _before() -> None:
    offered = request.headers.get(REQUEST_ID_HEADER, "")
    g.request_id = offered if _SANE_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex
    g.token_name = None
    checker: TokenChecker | None = current_app.extensions.get("ferry.auth")
    if checker is None or request.path in _ALWAYS_OPEN:
        return
    token = checker.check(request.headers.get("Authorization"), write=request.method not in _READ_METHODS)
    g.token_name = token.name if token else None


def _after(response: Response) -> Response:
    response.headers[REQUEST_ID_HEADER] = _request_id()
    if request.method not in _READ_METHODS:
        # An audit line per write: who (the token's name, never the token) did what.
        log.info(
            "%s %s -> %d (token %s, request %s)",
            request.method,
            request.path,
            response.status_code,
            g.get("token_name") or "-",
            _request_id(),
        )
    return response


def _forward_if_standby() -> Response | None:
    """A standby sends the write to the leader and relays its answer; None when we lead.

    The caller's token and request id go along, so the leader checks the same token and
    logs the same id.
    """
    controller = _controller().leadership
    if controller.is_leader():
        return None
    if request.headers.get(FORWARDED_HEADER):
        raise Unavailable("this controller no longer leads; retry")
    leader = controller.leader()
    if not leader or not leader.get("rest_url"):
        raise Unavailable("no controller leads right now; retry in a few seconds")
    timeout = current_app.config.get("FERRY_FORWARD_TIMEOUT_S", 10.0)
    headers = {
        "Content-Type": request.content_type or "application/json",
        FORWARDED_HEADER: controller.controller_id,
        REQUEST_ID_HEADER: _request_id(),
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
