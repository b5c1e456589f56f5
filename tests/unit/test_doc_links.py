"""Every relative link in README.md, docs/*.md and the deploy kit's Markdown (deploy/**/*.md) leads
somewhere: to a file of the checkout and, with an anchor, to a heading of that file.

A link is Markdown's ``[text](target)`` outside fenced blocks and code spans (a code span may run over
lines), and not after a backslash (``\\[level](left,right)`` is text). Targets with a scheme
(``https:``, ``mailto:``) are not checked. A target is read relative to the linking file; ``#anchor``
alone is the linking file itself. Anchors are checked in Markdown files only, against GitHub's slugs
of their headings (outside fenced blocks): lowercase, every character that is not a letter, a digit,
a space, ``-`` or ``_`` dropped (backticks and punctuation included), spaces turned into ``-``; a
heading's second occurrence gets ``-1``, its third ``-2``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "deploy").rglob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`[^`]*`")
_LINK = re.compile(r"(?<!\\)\[[^\]]*\]\(([^()\s]+)\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _outside_fences(text: str) -> str:
    """The text with every fenced block's lines blanked (line numbers stay)."""
    lines, inside = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            lines.append("")
        else:
            lines.append("" if inside else line)
    return "\n".join(lines)


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in _outside_fences(path.read_text()).splitlines():
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def _links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link in one file."""
    text = _outside_fences(path.read_text())
    # Blank code spans, keeping their newlines so line numbers stay right.
    text = _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)) if "\n\n" not in m.group(0) else m.group(0), text)
    found = []
    for match in _LINK.finditer(text):
        target = match.group(1)
        if not _SCHEME.match(target):
            found.append((text.count("\n", 0, match.start()) + 1, target))
    return found


def _all_links() -> list[tuple[str, str]]:
    return [(f"{doc.relative_to(REPO).as_posix()}:{line}", target) for doc in DOCS for line, target in _links(doc)]


def test_slugs_follow_github() -> None:
    assert slug("The local stack: `ferry dev up | down | status`") == "the-local-stack-ferry-dev-up--down--status"
    assert slug("Monitoring (`deploy/monitoring/`)") == "monitoring-deploymonitoring"
    assert slug("Secrets") == "secrets"


def test_the_docs_have_links() -> None:
    """The link rule finds what it should: a test of the finder itself."""
    assert ("README.md", "docs/configuration.md") in {(where.split(":")[0], target) for where, target in _all_links()}


def test_the_deploy_kits_pages_are_read() -> None:
    read = {doc.relative_to(REPO).as_posix() for doc in DOCS}
    assert {"deploy/kubernetes/README.md", "deploy/helm/ferry/README.md"} <= read


@pytest.mark.parametrize(("where", "target"), _all_links())
def test_every_relative_link_leads_somewhere(where: str, target: str) -> None:
    source = REPO / where.split(":")[0]
    file_part, _, anchor = target.partition("#")
    destination = (source.parent / file_part).resolve() if file_part else source
    assert destination.exists(), f"{where}: {target} names no file"
    if anchor and destination.suffix == ".md":
        assert anchor in anchors(destination), f"{where}: {destination.name} has no heading for #{anchor}"
