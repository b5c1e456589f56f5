"""Secrets in the config: ``${env:NAME}`` and ``${file:PATH}`` placeholders, Kafka's convention.

Any string value of the config file (cluster properties such as ``sasl.password`` included) may
hold placeholders, resolved once when the config is loaded (:func:`resolve`):

- ``${env:NAME}``: the value of environment variable ``NAME`` (set, possibly empty);
- ``${file:PATH}``: the content of file ``PATH`` (relative paths from the working directory),
  without its trailing line break(s);
- ``$${``: a literal ``${`` (the one escape; ``$`` elsewhere is just ``$``).

A placeholder may be the whole value or part of it (``"${env:ZK_USER}:${env:ZK_PASSWORD}"``).
A resolved value is taken as it is: placeholders inside it are not resolved again. Any other
``${`` (an unknown provider, no closing ``}``) is an error, so a typo never passes as text.

A string that held a placeholder becomes a :class:`Secret`: its ``repr`` is masked, so a config
printed, a validation error or a log line that formats it with ``%r`` never shows it, while
``str()`` and the clients get the value. Error messages name the key and the placeholder, never
a resolved value.

The resolver reads only through the ``env`` mapping and the ``read_file`` function it is given
(the process's environment and the file system by default).

A command that uses no secret (``ferry acls``) resolves with ``keep_unavailable``: a well-formed
placeholder whose variable is not set or whose file cannot be read leaves its value as written, an
:class:`Unresolved` that says why; a malformed one is still an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

# `$${` (an escaped `${`), a placeholder, or a `${` that opens nothing valid.
_TOKEN = re.compile(r"\$\$\{|\$\{(?P<body>[^}]*)\}|\$\{")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROVIDERS = ("env", "file")
MASK = "'**********'"


class Secret(str):
    """A string whose ``repr`` is masked (``'**********'``); otherwise an ordinary ``str``.

    pydantic keeps it as it is where a config field allows it (``ClientValue``), so a cluster's
    properties print masked.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return MASK

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.is_instance_schema(cls)


class PlaceholderError(ValueError):
    """A placeholder that cannot be resolved; the message names it, never a secret."""


class UnavailableError(PlaceholderError):
    """A well-formed placeholder whose value is not available here: its variable is not set, its
    file cannot be read (or is not text)."""


class Unresolved(Secret):
    """A value kept as written because a placeholder in it is not available here (:func:`resolve`
    with ``keep_unavailable``): ``str()`` is the value as written, ``reason`` why it was not
    resolved (the :class:`UnavailableError`'s message). Masked like any :class:`Secret`."""

    reason: str

    def __new__(cls, written: str, reason: str = "") -> Unresolved:
        value = super().__new__(cls, written)
        value.reason = reason
        return value


class _EveryVariable(Mapping[str, str]):
    """An environment in which every variable is set (empty): resolving against it finds only
    the malformed placeholders."""

    def __getitem__(self, name: str) -> str:
        return ""

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _read_file(path: str) -> str:
    return Path(path).read_text()


def resolve_text(text: str, env: Mapping[str, str] | None = None, read_file: Callable[[str], str] = _read_file) -> str:
    """``text`` with its placeholders replaced and ``$${`` unescaped; a :class:`Secret` when it
    held a placeholder. Raises :class:`PlaceholderError` for the first one it cannot resolve."""
    environment = os.environ if env is None else env
    resolved = False

    def replace(match: re.Match[str]) -> str:
        nonlocal resolved
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group("body")
        if body is None:
            raise PlaceholderError("'${' without a closing '}' (write $${ for a literal ${)")
        provider, sep, argument = body.partition(":")
        if not sep or provider not in PROVIDERS:
            raise PlaceholderError(
                f"unknown placeholder {token!r}: use ${{env:NAME}} or ${{file:PATH}} (write $${{ for a literal ${{)"
            )
        resolved = True
        if provider == "env":
            if not _ENV_NAME.match(argument):
                raise PlaceholderError(f"{token}: {argument!r} is not an environment variable name")
            value = environment.get(argument)
            if value is None:
                raise UnavailableError(f"{token}: the environment variable {argument} is not set")
            return value
        if not argument:
            raise PlaceholderError(f"{token}: no file named")
        try:
            content = read_file(argument)
        except OSError as exc:
            raise UnavailableError(f"{token}: cannot read {argument}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise UnavailableError(f"{token}: {argument} is not UTF-8 text") from None
        return content.rstrip("\r\n")

    result = _TOKEN.sub(replace, text)
    return Secret(result) if resolved else result


def escape(text: str) -> str:
    """``text`` written so that :func:`resolve_text` gives it back unchanged."""
    return text.replace("${", "$${")


def resolve(
    data: Any,
    env: Mapping[str, str] | None = None,
    read_file: Callable[[str], str] = _read_file,
    keep_unavailable: bool = False,
) -> tuple[Any, list[tuple[str, str]]]:
    """``data`` (parsed YAML) with every string value resolved (:func:`resolve_text`), and the
    problems found, each as ``(key, message)`` with the key a dotted path such as
    ``clusters.src.sasl.password`` (list items by index). Keys are never resolved.

    ``keep_unavailable``: a value with a placeholder that is not available here (an unset variable,
    a file that cannot be read) but no malformed one stays as written, an :class:`Unresolved`, and
    is no problem."""
    problems: list[tuple[str, str]] = []

    def walk(value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, str):
            key = ".".join(path) or "(top level)"
            try:
                return resolve_text(value, env, read_file)
            except UnavailableError as exc:
                if not keep_unavailable:
                    problems.append((key, str(exc)))
                    return value
                unavailable = str(exc)
            except PlaceholderError as exc:
                problems.append((key, str(exc)))
                return value
            try:  # a malformed placeholder after the unavailable one is still an error
                resolve_text(value, _EveryVariable(), lambda path: "")
            except PlaceholderError as exc:
                problems.append((key, str(exc)))
                return value
            return Unresolved(value, unavailable)
        if isinstance(value, dict):
            return {key: walk(item, (*path, str(key))) for key, item in value.items()}
        if isinstance(value, list):
            return [walk(item, (*path, str(index))) for index, item in enumerate(value)]
        return value

    return walk(data, ()), problems
