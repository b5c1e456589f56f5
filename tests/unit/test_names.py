"""One name per thing: no class name is defined twice across Ferry's runtime packages.

A name used for two things (a REST answer and the domain value it shows, two kinds of translation) makes
the reader guess which one a module means; the wire shapes say their role (``TopicViewAnswer``,
``ThrottleRequest``) and the domain keeps the plain name. The scan reads the source (nested classes too),
so it needs nothing imported.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

# The packages whose class names must be unique among them all; add a package here to hold it to the same.
RUNTIME_PACKAGES = ("common", "controller", "worker", "pipeline", "bench", "fleet", "devstack")


def class_definitions(packages: tuple[str, ...] = RUNTIME_PACKAGES) -> dict[str, list[str]]:
    """Every class name defined in the packages' source -> where (``path:line``), in path order."""
    where: dict[str, list[str]] = defaultdict(list)
    for package in packages:
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.ClassDef):
                    where[node.name].append(f"{path.relative_to(REPO)}:{node.lineno}")
    return where


def test_the_runtime_packages_are_there_to_scan() -> None:
    for package in RUNTIME_PACKAGES:
        assert (REPO / package / "__init__.py").is_file(), package
    assert len(class_definitions()) > 100


def test_no_class_name_is_defined_twice_across_the_runtime_packages() -> None:
    twice = {name: places for name, places in class_definitions().items() if len(places) > 1}
    assert twice == {}, "rename one of each so the name says what it is: " + "; ".join(
        f"{name} in {', '.join(places)}" for name, places in sorted(twice.items())
    )
