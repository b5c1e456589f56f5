"""Reading and validating a configuration: YAML in, placeholders resolved, :class:`ConfigError` with one
line per offending key out.

An unknown key is an error, unless the file declares a ``config_version`` newer than this release's
(:data:`CONFIG_VERSION`): the file was then written for a newer release, and the keys this one does
not know (at any depth) are left out and logged, one warning per key (:func:`parse_config`), so that
a rollback can share the file with the newer release.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ferry.common.config.ferry_config import CONFIG_VERSION, FerryConfig
from ferry.common.errors import ConfigError
from ferry.common.placeholders import Unresolved, resolve

log = logging.getLogger(__name__)

# The keys already warned about in this process, with their file: a config read again (a reload,
# another command of the same process) warns about each once.
_warned: set[tuple[str, str]] = set()


def validate_config(
    data: Any,
    origin: str = "config",
    env: Mapping[str, str] | None = None,
    read_file: Callable[[str], str] | None = None,
    keep_unavailable: bool = False,
    ignored: list[str] | None = None,
) -> tuple[FerryConfig | None, list[str]]:
    """Resolve the placeholders of already-parsed YAML/JSON data and validate it; every problem
    at once, each as ``key: message``. The config is None when there is any problem.
    ``env`` and ``read_file``: where placeholders read (default: the environment, the files).
    ``keep_unavailable``: values whose placeholders are not available here stay as written
    (:func:`common.placeholders.resolve`), for a command that uses none of them. ``ignored``: as
    for :func:`validate_resolved`."""
    if not isinstance(data, dict):
        return None, ["(top level): the top level must be a mapping with zookeeper, clusters and routes"]
    if read_file:
        data, unresolved = resolve(data, env, read_file, keep_unavailable=keep_unavailable)
    else:
        data, unresolved = resolve(data, env, keep_unavailable=keep_unavailable)
    return validate_resolved(data, unresolved, ignored)


def declared_version(data: Any) -> int | None:
    """The ``config_version`` the data declares, when it is a whole number (else its own check reports it)."""
    value = data.get("config_version") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unknown_keys(data: dict[str, Any]) -> list[tuple[int | str, ...]]:
    """Where ``data`` holds keys the schema does not know (pydantic's ``extra_forbidden``), as locations."""
    try:
        FerryConfig.model_validate(data)
    except ValidationError as exc:
        return [tuple(error["loc"]) for error in exc.errors() if error["type"] == "extra_forbidden"]
    return []


def _without(data: dict[str, Any], loc: tuple[int | str, ...]) -> bool:
    """Removes the key at ``loc`` from ``data``; whether it was there."""
    parent: Any = data
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(parent, dict) and loc and loc[-1] in parent:
        del parent[loc[-1]]
        return True
    return False


def newer_keys_left_out(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` without the keys this release does not know, and those keys (dotted, e.g.
    ``routes.0.new_key``), when it declares a ``config_version`` newer than :data:`CONFIG_VERSION`;
    otherwise ``data`` as it is and no key (an unknown key is then the schema's error)."""
    version = declared_version(data)
    if version is None or version <= CONFIG_VERSION:
        return data, []
    data = copy.deepcopy(data)
    left_out: list[str] = []
    for _ in range(8):  # a key left out may uncover none, but a model behind a union could: look again
        found = [loc for loc in _unknown_keys(data) if _without(data, loc)]
        if not found:
            break
        left_out += [".".join(str(part) for part in loc) for loc in found]
    return data, left_out


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


def validate_resolved(
    data: dict[str, Any], unresolved: list[tuple[str, str]], ignored: list[str] | None = None
) -> tuple[FerryConfig | None, list[str]]:
    """Validate data whose placeholders :func:`common.placeholders.resolve` resolved, with the
    placeholders it could not; every problem at once, as :func:`validate_config`. A check that
    fails where a value was kept as written (:class:`common.placeholders.Unresolved`) is reported
    with why each such value was not resolved. A file declaring a newer ``config_version`` has the
    keys this release does not know left out (:func:`newer_keys_left_out`): each is appended to
    ``ignored`` (when given) as one line naming the key and the versions."""
    data, left_out = newer_keys_left_out(data)
    if ignored is not None:
        ignored += [ignored_line(key, data) for key in left_out]
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


def ignored_line(key: str, data: Any) -> str:
    """What is said of a key left out of a file written for a newer config format."""
    return (
        f"{key}: unknown to this Ferry (config_version {CONFIG_VERSION}); ignored, since the file declares "
        f"config_version {declared_version(data)}"
    )


def parse_config(data: Any, origin: str = "config", keep_unavailable: bool = False) -> FerryConfig:
    """Resolve and validate already-parsed YAML/JSON data; any problem raises :class:`ConfigError`
    naming every offending key. ``keep_unavailable``: as for :func:`validate_config`. A key left out
    of a file declaring a newer ``config_version`` is logged, one warning per key (once a process)."""
    ignored: list[str] = []
    config, problems = validate_config(data, origin, keep_unavailable=keep_unavailable, ignored=ignored)
    if config is None:
        raise ConfigError(f"{origin} is invalid:\n" + "\n".join(f"  {problem}" for problem in problems))
    for line in ignored:
        if (origin, line) not in _warned:
            _warned.add((origin, line))
            log.warning("%s: %s", origin, line)
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
