"""The REST API's OpenAPI 3 document, served at ``GET /openapi.json`` by every controller.

Built once per app (no I/O). Every schema under ``components/schemas`` is a wire shape's own
(:mod:`controller.api.wire_requests`, :mod:`controller.api.wire_answers`), and so are the
``GET /translate`` query's parameters; this module writes the paths, which refer to the shapes by
class name. The security requirements follow the controller's configuration: without ``controller.auth``
no operation needs a token; with it, writes need a ``write`` token and reads need a token unless
``open_reads``. The health probes (``/health``, ``/health/ready``, ``/health/live``) and ``/openapi.json``
never need one.
"""

from __future__ import annotations

import copy
from typing import Any

from ferry.common.vocabulary import (
    DISTRIBUTOR_PATTERN,
    GROUP_PATTERN,
    MAX_PARTITIONS,
    ROUTE_PATTERN,
    TOPIC_PATTERN,
    anchored,
)
from ferry.controller.api.wire import component_schemas
from ferry.controller.api.wire_answers import RESPONSES
from ferry.controller.api.wire_requests import REQUESTS, TranslateRequest

_REQUEST_ID = {
    "description": "This request's id: the caller's own X-Request-Id when it is sane "
    "(1-128 of letters, digits and ._:-), else a new one. Errors carry it as requestId.",
    "schema": {"type": "string"},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": description,
        "headers": {"X-Request-Id": _REQUEST_ID},
        "content": {"application/json": {"schema": schema}},
    }


def _error(description: str) -> dict[str, Any]:
    return _json(description, _ref("Error"))


_ERRORS = {
    "400": _error("Bad input: an invalid topic name, route, partition or body"),
    "404": _error("Unknown URL, or a topic/partition Ferry does not mirror"),
    "503": _error("No leader, or ZooKeeper/Kafka cannot be reached; worth retrying"),
    "default": _error("Any other error (405 wrong method, 500 a bug: quote requestId)"),
}
_AUTH_ERRORS = {
    "401": {
        **_error("No bearer token, or an unknown one"),
        "headers": {
            "X-Request-Id": _REQUEST_ID,
            "WWW-Authenticate": {"description": 'Bearer realm="ferry"', "schema": {"type": "string"}},
        },
    },
    "403": _error("The token may only read; this request writes"),
}

_SCHEMAS: dict[str, Any] = component_schemas(REQUESTS, RESPONSES)


def _query_parameters(shape: type[TranslateRequest]) -> list[dict[str, Any]]:
    """A query's wire shape's fields as OpenAPI query parameters (their schemas are the shape's)."""
    schema = shape.model_json_schema(ref_template="#/components/schemas/{model}")
    required = set(schema.get("required", ()))
    parameters = []
    for name, field in schema["properties"].items():
        field = {key: value for key, value in field.items() if key not in ("title", "description")}
        if field.get("default", ...) is None:
            del field["default"]
        if "anyOf" in field:  # optional: the non-null choice
            field = {**next(choice for choice in field.pop("anyOf") if choice.get("type") != "null"), **field}
        parameter = {"name": name, "in": "query", "required": name in required, "schema": field}
        description = schema["properties"][name].get("description")
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters


_TOPIC_PARAM = {
    "name": "topic",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": anchored(TOPIC_PATTERN)},
}
_ROUTE_QUERY = {
    "name": "route",
    "in": "query",
    "required": False,
    "schema": {"type": "string", "pattern": anchored(ROUTE_PATTERN)},
    "description": "only this route, <source>.<destination>",
}
_PARTITION_PARAM = {
    "name": "partition",
    "in": "path",
    "required": True,
    "schema": {"type": "integer", "minimum": 0, "maximum": MAX_PARTITIONS - 1},
}


def _op(
    summary: str,
    ok: dict[str, Any],
    write: bool = False,
    parameters: list[dict[str, Any]] | None = None,
    body: str | list[str] | None = None,
    ok_status: str = "200",
    body_required: bool = True,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {ok_status: ok, **_ERRORS, **(extra or {})},
        "x-ferry-write": write,
    }
    if parameters:
        operation["parameters"] = parameters
    if body:
        schema = _ref(body) if isinstance(body, str) else {"oneOf": [_ref(name) for name in body]}
        operation["requestBody"] = {"required": body_required, "content": {"application/json": {"schema": schema}}}
    return operation


_REGISTRY_ERRORS = {"502": _error("A schema registry refused a request")}


def _probe(summary: str, failing: str) -> dict[str, Any]:
    """A health probe: 200 when it passes, 503 with the same shape (and the reasons) when not."""
    return {
        "get": _op(
            f"{summary} (never needs a token)",
            _json("passes", _ref("Health")),
            extra={"503": _json(f"fails: {failing}; reasons says why", _ref("Health"))},
        )
    }


_PATHS: dict[str, Any] = {
    "/health": _probe(
        "This controller's state and the leader; the readiness probe", "ZooKeeper unreachable, or not live"
    ),
    "/health/ready": _probe(
        "Readiness: connected to ZooKeeper (a standby is ready too), and live", "ZooKeeper unreachable, or not live"
    ),
    "/health/live": _probe(
        "Liveness: the controller answers and its scheduler runs; ZooKeeper being unreachable does not count",
        "the scheduler stopped",
    ),
    "/openapi.json": {"get": _op("This document (never needs a token)", _json("ok", {"type": "object"}))},
    "/metrics": {
        "get": _op(
            "Prometheus metrics",
            {
                "description": "Prometheus text format",
                "headers": {"X-Request-Id": _REQUEST_ID},
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
        )
    },
    "/topics": {
        "get": _op("Mirrored topics", _json("ok", _ref("TopicList"))),
        "post": _op(
            'Mirror a topic, or many ({"topics": [...]}); a standby forwards it to the leader',
            _json(
                "created: the topic's view, or (bulk) the created topics",
                {"oneOf": [_ref("TopicView"), _ref("TopicList")]},
            ),
            write=True,
            body=["TopicRequest", "TopicsRequest"],
            ok_status="201",
        ),
        "put": _op(
            "Mirror more partitions of a topic (numPartitions required; never fewer)",
            _json("the topic's view", _ref("TopicView")),
            write=True,
            body="TopicRequest",
        ),
    },
    "/topics/{topic}": {
        "get": _op(
            "A topic's ideal state and external view",
            _json("ok", _ref("TopicView")),
            parameters=[_TOPIC_PARAM, _ROUTE_QUERY],
        ),
        "delete": _op(
            "Stop mirroring a topic (the destination topic stays)",
            _json("ok", _ref("Deleted")),
            write=True,
            parameters=[_TOPIC_PARAM, _ROUTE_QUERY],
        ),
    },
    "/instances": {
        "get": _op("Live workers and what they hold", _json("ok", _ref("Instances"))),
        "post": _op("Rebalance now", _json("ok", _ref("Rebalanced")), write=True),
    },
    "/validation": {"get": _op("Ideal state vs what workers report", _json("ok", _ref("Validation")))},
    "/validation/srcKafka": {
        "get": _op("Partition counts at the source vs the ideal state", _json("ok", _ref("SourceValidation")))
    },
    "/offset": {"get": _op("Committed and log-end offsets of every mirrored partition", _json("ok", _ref("Offsets")))},
    "/offset/{topic}": {"get": _op("Offsets of one topic", _json("ok", _ref("Offsets")), parameters=[_TOPIC_PARAM])},
    "/offset/{topic}/{partition}": {
        "get": _op(
            "Offsets of one partition", _json("ok", _ref("Offsets")), parameters=[_TOPIC_PARAM, _PARTITION_PARAM]
        )
    },
    "/groups": {
        "get": _op(
            "Consumer groups' source offsets translated to the destination (asks the leader)",
            _json("ok", _ref("Groups")),
        )
    },
    "/groups/{group}": {
        "get": _op(
            "One consumer group's translated offsets (asks the leader)",
            _json("ok", _ref("Groups")),
            parameters=[
                {
                    "name": "group",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": anchored(GROUP_PATTERN)},
                }
            ],
        )
    },
    "/translate": {
        "get": _op(
            "One consumer position translated with the route's offset map (or by timestamp, marked so), "
            "source -> destination or, with direction=reverse, back",
            _json("ok", _ref("Translation")),
            parameters=_query_parameters(TranslateRequest),
        )
    },
    "/noprogress": {
        "get": _op("Lagging partitions whose offset has not moved (asks the leader)", _json("ok", _ref("NoProgress")))
    },
    "/schemas": {
        "get": _op(
            "Schema distribution: per primary subject, its latest version and ID and each "
            "target's state (asks the leader; 404 when `schemas` is not configured)",
            _json("the last pass's report", _ref("SchemaStatus")),
            extra=_REGISTRY_ERRORS,
        )
    },
    "/schemas/sync": {
        "post": _op(
            "Run a schema distribution pass now (the leader); its report",
            _json("the pass's report", _ref("SchemaReport")),
            write=True,
            body="SyncRequest",
            body_required=False,
            extra=_REGISTRY_ERRORS,
        )
    },
}

_PATHS["/tree"] = {
    "get": _op(
        "The distribution tree's distributors: level, mask, subtree, target, state (format=text: a table)",
        _json("ok", _ref("TreeView")),
        parameters=[
            {"name": "format", "in": "query", "required": False, "schema": {"type": "string", "enum": ["json", "text"]}}
        ],
    )
}
_PATHS["/tree/{distributor}/target"] = {
    "post": _op(
        "Switch a distributor to another leaf of its subtree; a standby forwards it to the leader",
        _json("the switched targets", _ref("TargetSwitched")),
        write=True,
        body="TargetRequest",
        parameters=[
            {
                "name": "distributor",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": anchored(DISTRIBUTOR_PATTERN)},
            }
        ],
    )
}
_PATHS["/heartbeats"] = {
    "get": _op(
        "Heartbeat latency and time since the last heartbeat, per route and end to end (asks the leader)",
        _json("ok", _ref("Heartbeats")),
    )
}

_WORKER_PARAM = {
    "name": "worker",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"},
}
_PATHS["/topics/{topic}/pause"] = {
    "post": _op(
        "Pause a topic, or some of its partitions: they keep their worker, which commits what was acknowledged "
        "and stops consuming them",
        _json("the topic's paused partitions per route", _ref("PausedPartitions")),
        write=True,
        parameters=[_TOPIC_PARAM, _ROUTE_QUERY],
        body="PauseRequest",
        body_required=False,
    )
}
_PATHS["/topics/{topic}/resume"] = {
    "post": _op(
        "Resume a paused topic or some of its partitions; copying continues where it stopped",
        _json("the topic's paused partitions per route", _ref("PausedPartitions")),
        write=True,
        parameters=[_TOPIC_PARAM, _ROUTE_QUERY],
        body="PauseRequest",
        body_required=False,
    )
}
_PATHS["/workers/{worker}"] = {
    "get": _op(
        "A worker's cordon and how many partitions it holds",
        _json("ok", _ref("WorkerControl")),
        parameters=[_WORKER_PARAM],
    )
}
for _action, _summary in (
    ("cordon", "Cordon a worker: it receives nothing new and keeps what it holds"),
    (
        "drain",
        "Drain a worker: its partitions move to the others (flushed and committed "
        "first) and it receives nothing new until uncordoned",
    ),
    ("uncordon", "Uncordon a worker: it may receive partitions again"),
):
    _PATHS[f"/workers/{{worker}}/{_action}"] = {
        "post": _op(_summary, _json("ok", _ref("WorkerControl")), write=True, parameters=[_WORKER_PARAM])
    }
_PATHS["/controls"] = {
    "get": _op(
        "Paused partitions, cordoned workers, autobalancing and every route's throttle", _json("ok", _ref("Controls"))
    )
}
_PATHS["/autobalancing"] = {
    "get": _op("Whether workers joining trigger a rebalance", _json("ok", _ref("Autobalancing"))),
    "put": _op(
        "Turn the rebalance after workers join on or off",
        _json("ok", _ref("Autobalancing")),
        write=True,
        body="Autobalancing",
    ),
}
_PATHS["/routes/{route}/throttle"] = {
    "put": _op(
        "Set a route's throttle across the fleet at run time (null: no limit; both null: back to the config's)",
        _json("the route's throttle", _ref("ThrottleAnswer")),
        write=True,
        body="Throttle",
        parameters=[
            {"name": "route", "in": "path", "required": True, "schema": {"type": "string", "pattern": ROUTE_PATTERN}}
        ],
    )
}

_OPEN_PATHS = ("/health", "/health/ready", "/health/live", "/openapi.json")


_ROUTE_PARAM = {"name": "route", "in": "path", "required": True, "schema": {"type": "string", "pattern": ROUTE_PATTERN}}
_PATHS["/routes"] = {"get": _op("Every configured route and its failover state", _json("ok", _ref("Routes")))}
_PATHS["/routes/{route}"] = {
    "get": _op("One route's failover state and report", _json("ok", _ref("RouteState")), parameters=[_ROUTE_PARAM])
}
_PATHS["/routes/{route}/failover"] = {
    "post": _op(
        "Fail the route over to its destination: planned (waits until the source is quiet and everything is copied) or "
        "not (the source is gone: last checkpoints, RPO per partition); a standby forwards it to the leader; "
        "a retry goes on from the phase reached; with dryRun, what it would do, changing nothing. It does not ask "
        "for a confirmation (ferry failover does, on a terminal): the request is the caller's confirmation",
        _json("the route's state and report", _ref("RouteState")),
        write=True,
        body="FailoverRequest",
        body_required=False,
        parameters=[_ROUTE_PARAM],
        extra={"409": _error("The route is already failed over (or failing back)")},
    )
}


def openapi_document(auth_enabled: bool, open_reads: bool) -> dict[str, Any]:
    """The OpenAPI 3.0 document for a controller configured so."""
    paths = copy.deepcopy(_PATHS)
    for path, operations in paths.items():
        for operation in operations.values():
            write = operation.pop("x-ferry-write")
            needs_token = auth_enabled and path not in _OPEN_PATHS and (write or not open_reads)
            operation["security"] = [{"bearerAuth": []}] if needs_token else []
            if needs_token:
                operation["responses"].update(copy.deepcopy(_AUTH_ERRORS))
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "Ferry controller",
            "version": "1",
            "description": (
                "Any controller answers reads; a standby forwards writes (and /noprogress, /schemas, /groups) "
                "to the leader, with the caller's token. Every response carries X-Request-Id. "
                + (
                    "Authentication: bearer tokens; writes need a write token; reads "
                    + ("are open." if open_reads else "need a read or write token.")
                    + " 401: no or unknown token; 403: a read token on a write."
                    if auth_enabled
                    else "Authentication is off on this controller (controller.auth)."
                )
            ),
        },
        "paths": paths,
        "components": {
            "schemas": copy.deepcopy(_SCHEMAS),
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "description": "a token from controller.auth.tokens"}
            },
        },
    }
