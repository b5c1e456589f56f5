"""Writes ``docs/configuration.md`` from the pydantic schema of ``common/config/``.

The prose (intro, example, notes) lives in ``docs/templates/configuration.md``; every key's type,
default, limits and description come from the models (a field's docstring is its description),
and the Kafka client defaults from ``common/kafka/clients.py``. So the document cannot copy a
default wrongly.

``python scripts/config_docs.py`` rewrites the file; ``--check`` (part of ``make lint``) exits 1,
naming the file, when the committed one differs from what it would write.
"""

from __future__ import annotations

import argparse
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ferry.common.config import ClientValue, FerryConfig  # noqa: E402
from ferry.common.kafka import clients as kafka_clients  # noqa: E402 - after the path: the script runs from a checkout

TEMPLATE = REPO / "docs" / "templates" / "configuration.md"
TARGET = REPO / "docs" / "configuration.md"


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model(arg)
        if found is not None:
            return found
    return None


def _type(annotation: Any) -> str:
    """How a YAML author reads the field's type."""
    if annotation == ClientValue:
        return "string, number or boolean"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        kept = [a for a in args if a is not type(None)]
        return " or ".join(_type(a) for a in kept)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"map of {_type(args[0])} to {_type(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", SecretStr: "string (secret)"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _yaml(value: Any, nested: bool = False) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        plain = value and all(c.isalnum() or c in "_./-:" for c in value)
        return value if plain or (value and not nested) else f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v, nested=True) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v, nested=True)}" for k, v in value.items()) + "}"
    return str(value)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if value is PydanticUndefined:
        return "required"
    if value is None:
        return "absent"
    if isinstance(value, BaseModel):
        return ""
    return f"`{_yaml(value)}`"


def _limits(field: FieldInfo) -> str:
    bounds = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    limits = []
    for item in field.metadata:
        for attribute, symbol in bounds.items():
            if isinstance(
                item, (annotated_types.Ge, annotated_types.Gt, annotated_types.Le, annotated_types.Lt)
            ) and hasattr(item, attribute):
                limits.append(f"{symbol} {_yaml(getattr(item, attribute))}")
        if isinstance(item, annotated_types.MinLen) and item.min_length:
            unit = "character" if field.annotation is str else "item"
            limits.append(f"at least {item.min_length} {unit}" + ("" if item.min_length == 1 else "s"))
        pattern = getattr(item, "pattern", None)
        if pattern:
            limits.append(f"matches `{pattern}`")
    return ", ".join(limits)


def rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, str, str, str, str]]:
    """(key, type, default, limits, description) of every field, depth first."""
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        annotation = field.annotation
        # Markdown would take <cluster> for an HTML tag, and | for a cell's end.
        description = (
            (field.description or "").replace("<", "&lt;").replace("[", "\\[").replace("|", "\\|").replace("\n", " ")
        )
        yield key, _type(annotation), _default(field), _limits(field), description
        sub = _model(annotation)
        if sub is None:
            continue
        origin = typing.get_origin(annotation)
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(inner[0]) if origin in (typing.Union, types.UnionType) and inner else origin
        if origin is list:
            yield from rows(sub, f"{key}[].")
        elif origin is dict:
            yield from rows(sub, f"{key}.<name>.")
        else:
            yield from rows(sub, f"{key}.")


def reference() -> str:
    lines = ["| key | type | default | limits | what |", "| --- | --- | --- | --- | --- |"]
    for key, kind, default, limits, description in rows(FerryConfig):
        lines.append(f"| `{key}` | {kind} | {default} | {limits} | {description} |")
    return "\n".join(lines)


def _client_defaults(defaults: dict[str, Any]) -> str:
    return ", ".join(f"`{k}={_yaml(v)}`" for k, v in defaults.items())


def render() -> str:
    text = TEMPLATE.read_text()
    for marker, value in (
        ("{{reference}}", reference()),
        ("{{producer_defaults}}", _client_defaults(kafka_clients.PRODUCER_DEFAULTS)),
        ("{{consumer_defaults}}", _client_defaults(kafka_clients.CONSUMER_DEFAULTS)),
    ):
        if marker not in text:
            raise SystemExit(f"config_docs: {TEMPLATE} lost its {marker} marker")
        text = text.replace(marker, value)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when docs/configuration.md is stale; write nothing"
    )
    args = parser.parse_args(argv)
    wanted = render()
    if args.check:
        if TARGET.read_text() != wanted:
            print(
                f"{TARGET.relative_to(REPO)} is stale: run `.venv/bin/python scripts/config_docs.py` and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(wanted)
    return 0


if __name__ == "__main__":
    sys.exit(main())
