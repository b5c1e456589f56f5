"""The REST API's wire shapes: their base, the edge's check of a request, and their OpenAPI schemas.

Each request and answer is declared once, as a :class:`WireShape` (pydantic) with the camelCase names of
the wire as aliases: requests in :mod:`controller.api.wire_requests`, answers in
:mod:`controller.api.wire_answers`. The edge (:mod:`controller.api.checks`) checks request bodies with
them (:func:`parsed`: a mistake is a 400 naming the field), :mod:`controller.api.rest_json` builds every
answer from them, and the OpenAPI document (:mod:`controller.api.openapi`) takes their JSON schemas
(:func:`component_schemas`). Their class names are the OpenAPI document's component names; some equal a
domain class's name (``TopicView``, ``Health``), so other modules import these modules, not their classes,
and write ``wire_answers.TopicView``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue, models_json_schema
from pydantic_core import core_schema


class WireShape(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, json_schema_serialization_defaults_required=True
    )

    def to_json(self) -> dict[str, Any]:
        """The JSON-ready dict, keys as on the wire, in declaration order."""
        out: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return out


def _is_none(value: Any) -> bool:
    return value is None


def absent_when_none(description: str | None = None) -> Any:
    """A field left out of the JSON (and not required by its schema) when it is None."""
    return Field(None, exclude_if=_is_none, description=description)


class WireRequest(WireShape):
    """A request body: unknown fields, the Python names of fields and loose types (``true`` for a count,
    ``"8"``) are refused."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=False, validate_by_name=False)


RequestT = TypeVar("RequestT", bound=WireRequest)


def parsed(shape: type[RequestT], body: Any, example: str) -> RequestT:
    """``body`` (parsed JSON, or None) checked by ``shape``; a ``ValueError`` says what is wrong, in one line."""
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object, e.g. {example}")
    try:
        return shape.model_validate(body)
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


class _OpenApi30(GenerateJsonSchema):
    """JSON schemas as OpenAPI 3.0 spells them: ``nullable`` instead of a ``null`` type."""

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        inner = self.generate_inner(schema["schema"])
        if "$ref" in inner:
            return {"allOf": [inner], "nullable": True}
        return {**inner, "nullable": True}


def component_schemas(requests: Iterable[type[BaseModel]], responses: Iterable[type[BaseModel]]) -> dict[str, Any]:
    """The shapes' schemas for ``components/schemas``, each under its class name, referring to each other there:
    ``requests`` as they are validated, ``responses`` as they are written."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(shape, "validation") for shape in requests]
    pairs += [(shape, "serialization") for shape in responses]
    _, document = models_json_schema(pairs, ref_template="#/components/schemas/{model}", schema_generator=_OpenApi30)
    schemas: dict[str, Any] = _openapi30(document.get("$defs", {}))
    return schemas


def _openapi30(schema: Any) -> Any:
    """JSON Schema's numeric ``exclusiveMinimum``/``exclusiveMaximum`` and ``const`` as OpenAPI 3.0 spells them."""
    if isinstance(schema, list):
        return [_openapi30(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _openapi30(value) for key, value in schema.items()}
    for exclusive, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = out.get(exclusive)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[bound], out[exclusive] = value, True
    if "const" in out:
        out["enum"] = [out.pop("const")]
    return out
