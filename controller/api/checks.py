"""The REST edge's input checks, shared by every blueprint: a body or query against its wire request
(:mod:`controller.api.wire_requests`), and the names a path or query carries (topic, route, group).

Every path parameter, query argument and body field is checked here, before it reaches the controller
(and so ZooKeeper or Kafka); a mistake raises :class:`BadRequest` (a 400 naming what is wrong).
A leaf of the REST edge: the blueprints (:mod:`controller.api.blueprints`) import it; it imports none
of them.
"""

from __future__ import annotations

from typing import Any

from flask import request

from ferry.common.vocabulary import GROUP_NAME, ROUTE_NAME, topic_name_problem
from ferry.controller.api import wire
from ferry.controller.api.wire import RequestT
from ferry.controller.errors import BadRequest


def body(shape: type[RequestT], example: str, optional: bool = False) -> RequestT:
    """The request's JSON body checked by ``shape``; ``optional``: no body at all is an empty object.
    ``example`` is shown when the body is not a JSON object."""
    given = {} if optional and not request.get_data() else request.get_json(silent=True)
    return valid(shape, given, example)


def valid(shape: type[RequestT], values: Any, example: str) -> RequestT:
    """``values`` (a parsed body, or a query's arguments) checked by ``shape``."""
    try:
        return wire.parsed(shape, values, example)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None


def topic_name(value: str) -> str:
    """A topic name from the path: Kafka's rule for a name."""
    problem = topic_name_problem(value)
    if problem:
        raise BadRequest(problem)
    return value


def route_name(value: str, where: str) -> str:
    """A route name (``source.destination``) from ``where`` (e.g. "the path's")."""
    if not ROUTE_NAME.fullmatch(value):
        raise BadRequest(f"{where} route must be a route name like source.destination, not {value!r}"[:300])
    return value


def route_arg() -> str | None:
    """The ``route`` query argument, when there is one."""
    given = request.args.get("route")
    return None if given is None else route_name(given, "the query's")


def group_name(value: str) -> str:
    """A consumer group id from the path."""
    if not GROUP_NAME.fullmatch(value):
        raise BadRequest(f"{value!r} is not a consumer group id Ferry accepts"[:300])
    return value


def no_arguments(what: str) -> dict[str, Any]:
    """Refuses any query argument; ``what`` names the request (e.g. "GET /schemas")."""
    if request.args:
        raise BadRequest(f"{what} takes no query arguments, not {sorted(request.args)}"[:300])
    return {}
