"""The REST API's wire shapes: their base, the edge's check of a request, and their OpenAPI schemas.

Each request and answer is declared once, as a :class:`WireShape` (pydantic) with the camelCase names of
the wire as aliases: requests in :mod:`controller.api.wire_requests`, answers in
:mod:`controller.api.wire_answers`. The edge (:mod:`controller.api.checks`) checks request bodies with
them (:func:`parsed`: a mistake is a 400 naming the field), :mod:`controller.api.rest_json` builds every
answer from them, and the OpenAPI document (:mod:`controller.api.openapi`) takes their JSON schemas
(:func:`component_schemas`). A class's name says its role (``TopicViewAnswer``, ``ThrottleRequest``); the name
the OpenAPI document publishes it under is pinned apart from it, as the schema's title
(``class TopicViewAnswer(WireShape, title="TopicView")``), so renaming a class never changes the API.
Pure: no I/O.
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


_COMPONENTS = "#/components/schemas/"


def component_schemas(requests: Iterable[type[BaseModel]], responses: Iterable[type[BaseModel]]) -> dict[str, Any]:
    """The shapes' schemas for ``components/schemas``, each under its published name (its title), referring to
    each other there: ``requests`` as they are validated, ``responses`` as they are written."""
    pairs: list[tuple[type[BaseModel], JsonSchemaMode]] = [(shape, "validation") for shape in requests]
    pairs += [(shape, "serialization") for shape in responses]
    _, document = models_json_schema(pairs, ref_template=_COMPONENTS + "{model}", schema_generator=_OpenApi30)
    schemas: dict[str, Any] = _openapi30(_published(document.get("$defs", {})))
    return schemas


def _published(defs: dict[str, Any]) -> dict[str, Any]:
    """pydantic's definitions (keyed by class name) keyed by their titles, and the references to them too;
    sorted by name, as pydantic sorts them."""
    names = {key: schema.get("title", key) for key, schema in defs.items()}
    if len(set(names.values())) < len(names):
        twice = sorted(name for name in set(names.values()) if list(names.values()).count(name) > 1)
        raise ValueError(f"two wire shapes are published under the same name: {', '.join(twice)}")
    return dict(sorted((names[key], _references_renamed(schema, names)) for key, schema in defs.items()))


def _references_renamed(schema: Any, names: dict[str, str]) -> Any:
    if isinstance(schema, list):
        return [_references_renamed(item, names) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _references_renamed(value, names) for key, value in schema.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(_COMPONENTS):
        out["$ref"] = _COMPONENTS + names.get(ref.removeprefix(_COMPONENTS), ref.removeprefix(_COMPONENTS))
    return out


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
