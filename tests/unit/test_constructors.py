"""Every part built with more than three parameters takes them by keyword.

Neighbours of one type (a source and a destination cluster, two callables, a clock and a sleep) can be
swapped in a positional call without mypy noticing; by keyword they cannot. Dataclasses (plain data)
and exceptions are not parts, and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "controller", "worker", "pipeline", "bench", "fleet", "devstack")
MOST_POSITIONAL = 3


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name == "dataclass":
            return True
    return False


def _positional_constructors() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.ClassDef) or _is_dataclass(node):
                    continue
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                        args = item.args
                        positional = [a.arg for a in [*args.posonlyargs, *args.args][1:]]
                        if len(positional) + len(args.kwonlyargs) > MOST_POSITIONAL and positional:
                            where = path.relative_to(ROOT)
                            found.append(f"{where}:{item.lineno} {node.name}({', '.join(positional)}, ...)")
    return found


def test_parts_with_more_than_three_parameters_take_them_by_keyword() -> None:
    positional = _positional_constructors()
    if positional:
        pytest.fail("constructors to make keyword-only (`def __init__(self, *, ...)`):\n" + "\n".join(positional))
