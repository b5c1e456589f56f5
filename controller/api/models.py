"""The REST API's request and response models: the edge's checks, their JSON and their OpenAPI schemas.

Each model is declared once, with the camelCase names of the wire as aliases: the REST layer
(:mod:`controller.api.rest`) validates request bodies with them (a mistake is a 400 naming the
field), answers with them, and the OpenAPI document (:mod:`controller.api.openapi`) takes their
JSON schemas (:func:`component_schemas`). Name rules come from :mod:`common.vocabulary`, the one
definition the config and the domain use too. Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema

from ferry.common.vocabulary import (
    CLUSTER_NAME,
    CLUSTER_PATTERN,
    MAX_PARTITIONS,
    ROUTE_NAME,
    ROUTE_PATTERN,
    TOPIC_PATTERN,
    ControllerState,
    anchored,
    topic_name_problem,
)

MAX_BULK_TOPICS = 1000


def _topic(value: str) -> str:
    problem = topic_name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _named(rule: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not rule.fullmatch(value):
            raise ValueError(f"must be {what}, not {value[:80]!r}")
        return value

    return AfterValidator(check)


TopicName = Annotated[str, AfterValidator(_topic), Field(json_schema_extra={"pattern": anchored(TOPIC_PATTERN)})]
RouteName = Annotated[str, _named(ROUTE_NAME, "a route name like source.destination"),
                      Field(json_schema_extra={"pattern": anchored(ROUTE_PATTERN)})]
ClusterName = Annotated[str, _named(CLUSTER_NAME, "a cluster name (letters, digits, '_' and '-')"),
                        Field(json_schema_extra={"pattern": anchored(CLUSTER_PATTERN)})]
PartitionCount = Annotated[int, Field(ge=1, le=MAX_PARTITIONS)]


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True,
                              json_schema_serialization_defaults_required=True)

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict, keys as on the wire, in declaration order."""
        out: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return out


# -- requests -----------------------------------------------------------------------------------


class RequestModel(WireModel):
    """A request body: unknown fields and loose types (``true`` for a count, ``"8"``) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TopicRequest(RequestModel):
    """``POST /topics`` (mirror one topic) and ``PUT /topics`` (mirror more of its partitions)."""

    topic: TopicName
    num_partitions: PartitionCount | None = Field(
        None, description="POST: how many partitions to mirror (default: all at the source); PUT: required")
    route: RouteName | None = Field(None, description="only this route (default: every configured route)")


class TopicEntry(RequestModel):
    """One topic of a bulk ``POST /topics``."""

    topic: TopicName
    num_partitions: PartitionCount | None = None


class TopicsRequest(RequestModel):
    """Many topics in one write and one reconcile; all or nothing."""

    topics: list[TopicEntry] = Field(min_length=1, max_length=MAX_BULK_TOPICS)
    route: RouteName | None = Field(None, description="only this route (default: every configured route)")


class TargetRequest(RequestModel):
    """``POST /tree/{distributor}/target``: the leaf to switch to."""

    target: ClusterName


class SyncRequest(RequestModel):
    """``POST /schemas/sync``: no fields; the body may be left out."""


Request = TypeVar("Request", bound=RequestModel)


def parsed(model: type[Request], body: Any, example: str) -> Request:
    """``body`` (parsed JSON, or None) checked by ``model``; a ``ValueError`` says what is wrong, in one line."""
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object, e.g. {example}")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise ValueError(problem_text(exc)) from None


def problem_text(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field: what is wrong`` for the first few problems."""
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error["loc"]) or "body"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "missing":
            message = "is required"
        problems.append(f"{where}: {message}")
    return "; ".join(problems)[:300]


# -- responses ----------------------------------------------------------------------------------


class Error(WireModel):
    """Every error answer; ``requestId`` is also in the ``X-Request-Id`` header."""

    error: str
    status: int
    request_id: str


class Health(WireModel):
    """``GET /health``: this controller and who leads."""

    status: str = Field(description="ok, or why not")
    id: str
    state: ControllerState
    leader: bool
    leader_id: str | None
    leader_url: str | None


class TopicSummary(WireModel):
    topic: str
    route: str
    partitions: int


class TopicList(WireModel):
    """``GET /topics``, and a bulk ``POST /topics`` (the topics it created)."""

    topics: list[TopicSummary]


class Deleted(WireModel):
    topic: str
    deleted: bool = True


class Rebalanced(WireModel):
    rebalanced: bool = True
    moved: int = Field(description="partitions that changed worker")


REQUESTS: tuple[type[RequestModel], ...] = (TopicRequest, TopicsRequest, TargetRequest, SyncRequest)
RESPONSES: tuple[type[WireModel], ...] = (Error, Health, TopicList, Deleted, Rebalanced)


class _OpenApi30(GenerateJsonSchema):
    """JSON schemas as OpenAPI 3.0 spells them: ``nullable`` instead of a ``null`` type."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        if "$ref" in inner:
            return {"allOf": [inner], "nullable": True}
        return {**inner, "nullable": True}


def component_schemas() -> dict[str, Any]:
    """The models' schemas for ``components/schemas``, each under its class name, referring to each other there."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(model, "validation") for model in REQUESTS]
    pairs += [(model, "serialization") for model in RESPONSES]
    _, document = models_json_schema(pairs, ref_template="#/components/schemas/{model}", schema_generator=_OpenApi30)
    schemas: dict[str, Any] = document.get("$defs", {})
    return schemas
