"""The documentation names only REST requests, ``ferry`` commands and metrics that exist.

Where: README.md, docs/*.md, the deploy kit's Markdown (deploy/**/*.md), and the comments of its YAML
files (deploy/**/*.yaml and *.yml: the text after a ``#`` that starts a line or follows a space; the
rest of each line is not read). What counts as a mention:

- **A REST request**: an HTTP method in capitals, one space, and a path starting with ``/``, anywhere in
  the text (prose, code spans, tables, fenced blocks): ``GET /instances``, ``POST /topics/<topic>/pause``.
  The path ends at a space, a backtick, a bracket that closes, a comma, a semicolon or a quote; a query
  (``?route=...``) and a trailing ``.`` or ``:`` are dropped, and an optional part in square brackets
  (``GET /offset/<topic>[/<partition>]``) stands for the path with and without it. HTML entities are
  read as their characters (the generated configuration page writes ``&lt;topic&gt;``). The path must
  be in the OpenAPI document with that method (``HEAD`` needs a ``GET``), matched segment by segment: a
  placeholder (``<topic>``, ``{topic}``, ``...``, or a word in capitals such as ``TOPIC``) matches only
  a parameter of the document, and a literal matches the same literal or a parameter (``/topics/orders``
  is ``/topics/{topic}``). The schema registries' own API, which the docs name where they say how
  schema distribution talks to them (paths starting ``/apis/``, ``/subjects``, ``/mode``,
  ``/schemas/ids/``), is not Ferry's and is skipped.
- **A command**: a code span (on one line or several) whose text starts with ``ferry ``, and a line of a
  fenced block that starts with ``ferry `` or ``$ ferry `` (after an optional ``.venv/bin/``; a line
  ending in ``\\`` goes on on the next). Not a command: a mention whose first word ends in a colon (a
  message Ferry printed, ``ferry import-mm2: not converted: ...``) or is a placeholder in capitals
  (``ferry COMMAND --help``).
  Its words are walked down the root parser: the first word is a subcommand of ``ferry``, and where
  a command has subcommands, the first word that is neither an option nor an option's value is one
  of them; where a command's first positional argument has choices, its first such word is one of
  them. ``a|b`` stands for alternatives (each must exist), square brackets are dropped, and ``...``
  is skipped. A lone ``|`` followed by a subcommand of the same command starts an alternative
  (``tree [PATH] | get PATH``); followed by anything else it is a shell pipe, and the mention ends,
  as it does at `` #``, ``>``, ``&&`` and ``;``. Every ``--flag`` must be an option of a parser on
  the way (the root, the command, its subcommand). In a YAML comment, a comment that starts with
  ``ferry `` is a command too, as a line of a fenced block is.
- **A metric**: a word ``ferry_controller_...`` or ``ferry_worker_...`` (not one with a ``*``, which
  names a family of them): with a scrape's suffix (``_total``, ``_bucket``, ``_count``, ``_sum``)
  or without, it is a metric the process registers; after a ``^`` (a pattern, ``grep ^ferry_controller_schema``)
  it starts the name of one.

A method and its path on two lines would escape the first rule, so no line may end in a method
name with the next one starting with a path. Two lists are checked whole: docs/operations.md's table
of commands is ``ferry --help``'s, and docs/security.md's table of what a write token allows (between
``<!-- write-requests -->`` markers) names exactly the operations of the OpenAPI document that refuse
a read token.
"""

from __future__ import annotations

import argparse
import html
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from ferry.cli import build_parser
from ferry.controller.api.openapi import openapi_document

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "deploy").rglob("*.md"))]
DEPLOY_YAML = sorted([*(REPO / "deploy").rglob("*.yaml"), *(REPO / "deploy").rglob("*.yml")])
METHODS = "GET|POST|PUT|DELETE|HEAD|PATCH"

_REQUEST = re.compile(rf"\b({METHODS}) (/[^\s`),;'\"]*)")
_SPLIT_REQUEST = re.compile(rf"\b(?:{METHODS})\n\s*`?/")
_OPTIONAL_PART = re.compile(r"\[([^\[\]]*)\]")
_PLACEHOLDER = re.compile(r"^(<[^<>]+>|\{[^{}]+\}|\.\.\.|[A-Z][A-Z0-9_]*)$")
REGISTRY_PATHS = ("/apis/", "/subjects", "/mode", "/schemas/ids/")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`([^`]+)`")
_COMMAND_LINE = re.compile(r"^\s*(?:\$\s+)?(?:\S*/)?ferry (.*)$")
_SHELL_END = re.compile(r"\s(#|>|&&|;|2>).*$")
_COMMENT = re.compile(r"(?:^|\s)#(.*)$")
_METRIC = re.compile(r"(\^?)\b(ferry_(?:controller|worker)_[a-z0-9_]*[a-z0-9])(?![a-z0-9_]*\*)")
_SCRAPE_SUFFIXES = ("_total", "_bucket", "_count", "_sum")


def _where(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def comments(text: str) -> str:
    """A YAML file's comments, each on its own line, every other line blank (line numbers stay)."""
    lines = []
    for line in text.splitlines():
        match = _COMMENT.search(line)
        lines.append(match.group(1) if match else "")
    return "\n".join(lines)


def _texts() -> list[tuple[Path, str]]:
    """Every document read, with the text read in it: a Markdown page whole, a YAML file's comments."""
    return [(doc, doc.read_text()) for doc in DOCS] + [(path, comments(path.read_text())) for path in DEPLOY_YAML]


# -- REST requests ---------------------------------------------------------------------------------


def _variants(path: str) -> list[str]:
    """The path with each optional ``[...]`` part and without it."""
    match = _OPTIONAL_PART.search(path)
    if match is None:
        return [path]
    with_part = path[: match.start()] + match.group(1) + path[match.end() :]
    without = path[: match.start()] + path[match.end() :]
    return _variants(with_part) + _variants(without)


def _clean(path: str) -> str:
    path = path.split("?", 1)[0]
    if path.endswith((".", ":")) and not path.endswith("..."):
        path = path[:-1]
    # A closing bracket that does not close an optional part ends the mention (a Markdown link's text).
    depth = 0
    for i, char in enumerate(path):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0:
            return path[:i]
    return path


def _requests_mentioned() -> list[tuple[str, str, str]]:
    """(where, method, path) of every REST request the docs mention."""
    found = []
    for doc, text in _texts():
        for number, line in enumerate(html.unescape(text).splitlines(), 1):
            for method, raw in _REQUEST.findall(line):
                if raw.startswith(REGISTRY_PATHS):
                    continue
                for path in _variants(_clean(raw)):
                    found.append((f"{_where(doc)}:{number}", method, path.rstrip("/") or "/"))
    return found


def _document_paths() -> dict[tuple[str, ...], set[str]]:
    document = openapi_document(auth_enabled=False, open_reads=True)
    return {
        tuple(path.strip("/").split("/")): {method.upper() for method in operations}
        for path, operations in document["paths"].items()
    }


def _segment_matches(mentioned: str, documented: str) -> bool:
    parameter = documented.startswith("{") and documented.endswith("}")
    if _PLACEHOLDER.match(mentioned):
        return parameter
    return parameter or mentioned == documented


def _methods_of(path: str) -> set[str] | None:
    """The methods the document has for the mentioned path (None: no such path)."""
    segments = tuple(path.strip("/").split("/"))
    methods: set[str] | None = None
    for documented, documented_methods in _document_paths().items():
        if len(documented) == len(segments) and all(map(_segment_matches, segments, documented)):
            methods = (methods or set()) | documented_methods
    return methods


def test_no_request_is_split_over_two_lines() -> None:
    for doc, text in _texts():
        for match in _SPLIT_REQUEST.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            pytest.fail(f"{_where(doc)}:{line}: a method and its path on two lines: keep them on one")


def test_the_docs_mention_rest_requests() -> None:
    """The mention rule finds what it should: a test of the finder itself, over the docs as they are."""
    mentioned = {(method, path) for _, method, path in _requests_mentioned()}
    assert ("GET", "/instances") in mentioned
    assert ("POST", "/topics/<topic>/pause") in mentioned
    assert ("GET", "/offset/<topic>/<partition>") in mentioned and ("GET", "/offset/<topic>") in mentioned


@pytest.mark.parametrize(
    ("where", "method", "path"), sorted(set(_requests_mentioned())), ids=lambda value: str(value).replace(" ", "")
)
def test_every_rest_request_the_docs_mention_exists(where: str, method: str, path: str) -> None:
    methods = _methods_of(path)
    assert methods is not None, f"{where}: {method} {path} is not a path of the OpenAPI document"
    wanted = "GET" if method == "HEAD" else method
    assert wanted in methods, f"{where}: {path} has {sorted(methods)}, not {method}"


# -- ferry commands --------------------------------------------------------------------------------


def _commands_in_text(text: str) -> list[tuple[int, str]]:
    """(line number, the words after ``ferry``) of every command mention in one document."""
    found: list[tuple[int, str]] = []
    inside = False
    pending: tuple[int, str] | None = None
    prose: list[str] = []  # the text outside fenced blocks, their lines blanked (line numbers stay)
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            inside = not inside
            prose.append("")
            continue
        prose.append("" if inside else line)
        if inside:
            if pending is not None:
                line = pending[1] + " " + line.strip()
                start = pending[0]
                pending = None
            else:
                match = _COMMAND_LINE.match(line)
                if match is None:
                    continue
                line, start = match.group(1), number
            if line.rstrip().endswith("\\"):
                pending = (start, line.rstrip()[:-1])
                continue
            found.append((start, line))
    outside = "\n".join(prose)
    for match in _CODE_SPAN.finditer(outside):
        span = " ".join(match.group(1).split())  # a code span may run over lines
        if span.startswith("ferry ") and "\n\n" not in match.group(1):
            found.append((outside.count("\n", 0, match.start()) + 1, span[len("ferry ") :]))
    return [(number, words) for number, words in found if not words.split(" ", 1)[0].endswith(":")]


def _commands_in_comments(text: str) -> list[tuple[int, str]]:
    """:func:`_commands_in_text` of a YAML file's comments, plus each comment that starts with ``ferry ``."""
    found = _commands_in_text(text)
    for number, line in enumerate(text.splitlines(), 1):
        match = _COMMAND_LINE.match(line)
        if match is not None and not match.group(1).split(" ", 1)[0].endswith(":"):
            found.append((number, match.group(1)))
    return sorted(found)


def _commands_mentioned() -> list[tuple[str, str]]:
    return [
        (f"{_where(doc)}:{number}", words)
        for doc, text in _texts()
        for number, words in (_commands_in_comments(text) if doc in DEPLOY_YAML else _commands_in_text(text))
    ]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _first_positional(parser: argparse.ArgumentParser) -> argparse.Action | None:
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _takes_value(parsers: list[argparse.ArgumentParser], flag: str) -> bool:
    for parser in reversed(parsers):
        action = parser._option_string_actions.get(flag)
        if action is not None:
            return action.nargs != 0
    return False


def _words(text: str) -> list[str]:
    text = _SHELL_END.sub("", " " + text).strip()
    try:
        words = shlex.split(text, posix=True)
    except ValueError:  # an unbalanced quote in prose
        words = text.split()
    words = [word.replace("[", "").replace("]", "") for word in words]
    return [word for word in words if word and word != "..." and not word.startswith("<")]


@dataclass
class _Walk:
    """One mention walked down the parsers: the problems found."""

    root: argparse.ArgumentParser

    def problems(self, text: str) -> list[str]:
        words = _words(text)
        if not words:
            return []
        problems: list[str] = []
        command = words[0]
        if _PLACEHOLDER.match(command):
            return []
        if command.startswith("--"):
            return [f"ferry has no option {command}"] if command not in self.root._option_string_actions else []
        commands = _subparsers(self.root)
        if command not in commands:
            return [f"ferry has no command {command!r}"]
        level = [self.root, commands[command]]
        choices_checked = False
        skip_value = False
        after_pipe = False
        for word in words[1:]:
            if skip_value:
                skip_value = False
                continue
            if word == "|":
                choices_checked = False
                after_pipe = True
                del level[2:]
                continue
            if word.startswith("--"):
                flag = word.split("=", 1)[0]
                if not any(flag in parser._option_string_actions for parser in level):
                    problems.append(f"ferry {' '.join(p.prog.split()[-1] for p in level[1:])} has no option {flag}")
                skip_value = "=" not in word and _takes_value(level, flag)
                continue
            if choices_checked:
                continue
            alternatives = [alternative for alternative in word.split("|") if alternative]
            current = level[-1]
            sub = _subparsers(current)
            positional = _first_positional(current)
            if sub:
                missing = [alternative for alternative in alternatives if alternative not in sub]
                if missing and after_pipe:
                    break  # a shell pipe
                if missing:
                    problems.append(f"{current.prog} has no subcommand {', '.join(missing)}")
                    break
                level.append(sub[alternatives[0]])
                after_pipe = False
                continue
            if after_pipe:
                break  # a shell pipe
            if positional is not None and positional.choices is not None:
                missing = [alternative for alternative in alternatives if alternative not in positional.choices]
                if missing:
                    problems.append(f"{current.prog}'s {positional.dest} is one of {sorted(positional.choices)}")
            choices_checked = True
        return problems


def test_the_docs_mention_commands() -> None:
    """The mention rule finds what it should: a test of the finder itself, over the docs as they are."""
    mentioned = {words.split()[0] for _, words in _commands_mentioned() if words.split()}
    assert {"controller", "worker", "check", "acls", "failover", "failback", "offsets"} <= mentioned


def test_the_deploy_kit_is_read() -> None:
    """The deploy kit's pages and its YAML files' comments are read, and only the comments of the YAML."""
    assert comments("a: 1  # see `ferry acls`\n# GET /instances\nb: 'x#y'\n") == " see `ferry acls`\n GET /instances\n"
    mentioned = {where.split(":")[0] for where, _ in _commands_mentioned()}
    assert {
        "deploy/kubernetes/README.md",
        "deploy/monitoring/prometheus.yml",
        "deploy/helm/ferry/values.yaml",
    } <= mentioned
    requests = {where.split(":")[0] for where, _, _ in _requests_mentioned()}
    assert "deploy/helm/ferry/templates/worker.yaml" in requests
    metrics = {where.split(":")[0] for where, _ in _metrics_mentioned()}
    assert "deploy/monitoring/alerts.yml" in metrics


def test_the_walk_finds_wrong_mentions() -> None:
    walk = _Walk(build_parser())
    assert walk.problems("zk --config F --json tree PATH | get PATH | ideal TOPIC | diff") == []
    assert walk.problems("workers cordon|drain|uncordon|show w1 --wait 120") == []
    assert walk.problems("zk --config F tree | grep orders") == []
    assert walk.problems("nope --config F") == ["ferry has no command 'nope'"]
    assert walk.problems("zk ideals orders") == ["ferry zk has no subcommand ideals"]
    assert walk.problems("workers cordon|evict w1") == [
        "ferry workers's action is one of ['cordon', 'drain', 'show', 'uncordon']"
    ]
    assert walk.problems("worker --config F --identity w1") == ["ferry worker has no option --identity"]


@pytest.mark.parametrize(("where", "words"), _commands_mentioned(), ids=lambda value: str(value).replace(" ", "_"))
def test_every_command_the_docs_mention_exists(where: str, words: str) -> None:
    assert _Walk(build_parser()).problems(words) == [], f"{where}: ferry {words}"


def test_the_operations_page_names_every_command() -> None:
    """docs/operations.md's list of commands is the whole of ``ferry --help``'s."""
    text = (REPO / "docs" / "operations.md").read_text()
    listed = set(re.findall(r"^\| `ferry ([a-z0-9-]+)", text, re.MULTILINE))
    assert listed == set(_subparsers(build_parser()))


# -- metrics ---------------------------------------------------------------------------------------


def _metrics_mentioned() -> list[tuple[str, str]]:
    """(where, name) of every metric name the docs mention; a pattern's prefix ends in ``*``."""
    return [
        (f"{_where(doc)}:{number}", name + ("*" if anchored else ""))
        for doc, text in _texts()
        for number, line in enumerate(text.splitlines(), 1)
        for anchored, name in _METRIC.findall(line)
    ]


def _registered_metrics() -> set[str]:
    from tests.unit.test_metric_names import _every_controller_metric, _worker_registry

    return {
        family.name for registry in (_every_controller_metric(), _worker_registry()) for family in registry.collect()
    }


def test_the_metric_rule_finds_names_and_leaves_families_out() -> None:
    found = _METRIC.findall("`ferry_worker_records_total{route}` and ferry_controller_job_*_total, ferry_worker_*")
    assert found == [("", "ferry_worker_records_total")]
    assert _METRIC.findall("grep ^ferry_controller_schema | grep -v _created") == [("^", "ferry_controller_schema")]


def test_every_metric_the_docs_mention_is_registered() -> None:
    registered = _registered_metrics()
    unknown = []
    for where, name in _metrics_mentioned():
        if name.endswith("*"):
            if not any(metric.startswith(name[:-1]) for metric in registered):
                unknown.append(f"{where}: {name}")
            continue
        bare = next((name.removesuffix(suffix) for suffix in _SCRAPE_SUFFIXES if name.endswith(suffix)), name)
        if name not in registered and bare not in registered:
            unknown.append(f"{where}: {name}")
    assert unknown == [], "metrics no process registers"


# -- what a write token allows ---------------------------------------------------------------------


def test_security_lists_exactly_the_requests_a_write_token_allows() -> None:
    """docs/security.md's table of writes names every operation the API refuses to a read token
    (the OpenAPI document's 403), and nothing else."""
    document = openapi_document(auth_enabled=True, open_reads=True)
    writes = {
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "403" in operation["responses"]
    }
    text = (REPO / "docs" / "security.md").read_text()
    section = text[text.index("<!-- write-requests -->") : text.index("<!-- /write-requests -->")]
    listed = set()
    for method, raw in _REQUEST.findall(section):
        path = re.sub(r"<([^<>]+)>", r"{\1}", _clean(raw))
        listed.add((method, path))
    assert listed == writes
