"""Reading and validating a configuration: YAML in, placeholders resolved, :class:`ConfigError` with one
line per offending key out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ferry.common.config.model import FerryConfig
from ferry.common.errors import ConfigError
from ferry.common.placeholders import resolve


def validate_config(
    data: Any,
    origin: str = "config",
    env: Mapping[str, str] | None = None,
    read_file: Callable[[str], str] | None = None,
) -> tuple[FerryConfig | None, list[str]]:
    """Resolve the placeholders of already-parsed YAML/JSON data and validate it; every problem
    at once, each as ``key: message``. The config is None when there is any problem.
    ``env`` and ``read_file``: where placeholders read (default: the environment, the files)."""
    if not isinstance(data, dict):
        return None, ["(top level): the top level must be a mapping with zookeeper, clusters and routes"]
    data, unresolved = resolve(data, env, read_file) if read_file else resolve(data, env)
    return validate_resolved(data, unresolved)


def validate_resolved(data: dict[str, Any], unresolved: list[tuple[str, str]]) -> tuple[FerryConfig | None, list[str]]:
    """Validate data whose placeholders :func:`common.placeholders.resolve` resolved, with the
    placeholders it could not; every problem at once, as :func:`validate_config`."""
    problems = [f"{key}: {message}" for key, message in unresolved]
    try:
        config = FerryConfig.model_validate(data)
    except ValidationError as exc:
        reported = {key for key, _ in unresolved}
        for error in exc.errors():
            key = ".".join(str(part) for part in error["loc"]) or "(top level)"
            if key not in reported:  # an unresolved placeholder's value fails its own checks too
                problems.append(f"{key}: {error['msg']}")
        return None, problems
    return (None if problems else config), problems


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's problem and where, on one line (its own text spans several, with a caret)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem:
        mark = error.problem_mark
        return error.problem + (f" (line {mark.line + 1}, column {mark.column + 1})" if mark else "")
    return " ".join(str(error).split())


def parse_config(data: Any, origin: str = "config") -> FerryConfig:
    """Resolve and validate already-parsed YAML/JSON data; any problem raises :class:`ConfigError`
    naming every offending key."""
    config, problems = validate_config(data, origin)
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


def load_config(path: str | Path) -> FerryConfig:
    """Read a YAML config file, resolve its placeholders and validate it; any problem raises
    :class:`ConfigError`."""
    return parse_config(read_config_file(path), origin=str(path))
