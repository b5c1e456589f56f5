"""Reading and validating a configuration: YAML in, placeholders resolved, :class:`ConfigError` with one
line per offending key out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ferry.common.config.ferry_config import FerryConfig
from ferry.common.errors import ConfigError
from ferry.common.placeholders import Unresolved, resolve


def validate_config(
    data: Any,
    origin: str = "config",
    env: Mapping[str, str] | None = None,
    read_file: Callable[[str], str] | None = None,
    keep_unavailable: bool = False,
) -> tuple[FerryConfig | None, list[str]]:
    """Resolve the placeholders of already-parsed YAML/JSON data and validate it; every problem
    at once, each as ``key: message``. The config is None when there is any problem.
    ``env`` and ``read_file``: where placeholders read (default: the environment, the files).
    ``keep_unavailable``: values whose placeholders are not available here stay as written
    (:func:`common.placeholders.resolve`), for a command that uses none of them."""
    if not isinstance(data, dict):
        return None, ["(top level): the top level must be a mapping with zookeeper, clusters and routes"]
    if read_file:
        data, unresolved = resolve(data, env, read_file, keep_unavailable=keep_unavailable)
    else:
        data, unresolved = resolve(data, env, keep_unavailable=keep_unavailable)
    return validate_resolved(data, unresolved)


def _kept_under(data: Any, loc: tuple[int | str, ...]) -> list[tuple[str, str]]:
    """The values kept as written (:class:`Unresolved`) at or under ``loc`` of ``data``, as
    ``(key, why)``: a check that failed there may have failed on the placeholder's text."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):  # a loc of pydantic's own (a union's member, a model)
            return []
    found: list[tuple[str, str]] = []

    def walk(value: Any, path: tuple[str, ...]) -> None:
        if isinstance(value, Unresolved):
            found.append((".".join(path), value.reason))
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, str(key)))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, str(index)))

    walk(data, tuple(str(part) for part in loc))
    return found


def validate_resolved(data: dict[str, Any], unresolved: list[tuple[str, str]]) -> tuple[FerryConfig | None, list[str]]:
    """Validate data whose placeholders :func:`common.placeholders.resolve` resolved, with the
    placeholders it could not; every problem at once, as :func:`validate_config`. A check that
    fails where a value was kept as written (:class:`common.placeholders.Unresolved`) is reported
    with why each such value was not resolved."""
    problems = [f"{key}: {message}" for key, message in unresolved]
    try:
        config = FerryConfig.model_validate(data)
    except ValidationError as exc:
        reported = {key for key, _ in unresolved}
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            kept = _kept_under(data, tuple(error["loc"]))
            if key not in reported and key not in dict(kept):  # a placeholder's text fails its checks too
                problems.append(f"{key}: {error['msg']}")
            for kept_key, why in kept:
                if kept_key not in reported:
                    reported.add(kept_key)
                    problems.append(f"{kept_key}: {why}")
        return None, problems
    return (None if problems else config), problems


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's problem and where, on one line (its own text spans several, with a caret)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        return error.problem + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return " ".join(str(error).split())


def parse_config(data: Any, origin: str = "config", keep_unavailable: bool = False) -> FerryConfig:
    """Resolve and validate already-parsed YAML/JSON data; any problem raises :class:`ConfigError`
    naming every offending key. ``keep_unavailable``: as for :func:`validate_config`."""
    config, problems = validate_config(data, origin, keep_unavailable=keep_unavailable)
    if config is None:
        raise ConfigError(f"{origin} is invalid:\n" + "\n".join(f"  {problem}" for problem in problems))
    return config


def read_config_file(path: str | Path) -> Any:
    """The parsed YAML of a config file (not validated); :class:`ConfigError` when unreadable."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {_yaml_problem(exc)}") from None


def load_config(path: str | Path, keep_unavailable: bool = False) -> FerryConfig:
    """Read a YAML config file, resolve its placeholders and validate it; any problem raises
    :class:`ConfigError`. ``keep_unavailable``: a value whose placeholder is not available here (an
    unset variable, an unreadable file) stays as written, a :class:`common.placeholders.Unresolved`,
    for a command that uses no secret (``ferry acls``)."""
    return parse_config(read_config_file(path), origin=str(path), keep_unavailable=keep_unavailable)
