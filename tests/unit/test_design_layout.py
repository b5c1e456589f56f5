"""docs/design.md's layout names every module of every package, so the layout stays true."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "controller", "worker", "pipeline", "bench", "fleet", "devstack")


def _modules() -> list[str]:
    return ["ferry/cli.py"] + [
        f.relative_to(REPO).as_posix()
        for p in PACKAGES
        for f in sorted((REPO / p).rglob("*.py"))
        if f.name != "__init__.py"
    ]


def _layout() -> str:
    text = (REPO / "docs" / "design.md").read_text()
    return text[text.index("## Packages and layers") : text.index("## Units of work")]


@pytest.mark.parametrize("module", _modules())
def test_every_module_has_its_row_in_the_layout(module: str) -> None:
    assert f"| `{module}` |" in _layout(), f"docs/design.md's 'Packages and layers' has no row for {module}"


def test_the_layout_names_no_module_that_is_gone() -> None:
    rows = [line.split("`")[1] for line in _layout().splitlines() if line.startswith("| `")]
    assert sorted(set(rows) - set(_modules())) == []
