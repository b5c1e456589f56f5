"""``ferry check``'s offline part: everything wrong with a config file at once, without a server.

Three kinds of problem, all reported together, each as ``key: message``:

- placeholders that cannot be resolved (:mod:`common.placeholders`);
- the schema's own checks and the cross-field ones (:func:`common.config.validate_resolved`);
  in a file that declares a newer ``config_version`` than this release knows, the unknown keys are
  no problem but warnings (left out, as every process of this release leaves them out);
- what librdkafka refuses in each cluster's properties, for each role the cluster plays, merged
  as Ferry merges them (:func:`common.kafka.properties.property_problems`): a misspelled property
  name or a bad value, named as written.

A cluster at either end of a route (or a leaf of the tree) is checked as a producer, a consumer
and an admin client: Ferry reads and writes both ends (the workers read a destination back, the
heartbeats write to a source). Any other cluster (e.g. one with only a schema registry) is
checked as an admin client.

What reaches the servers is ``ferry check --connect`` (``controller/commands/check.py``); its results
are :class:`EndpointResult` lines.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.common.config import FerryConfig, read_config_file, validate_resolved
from ferry.common.core import tree as distribution_tree
from ferry.common.kafka import properties as kafka_properties
from ferry.common.placeholders import resolve

# Properties naming local files: librdkafka opens them when it builds a client.
LOCAL_FILE_PROPERTY = re.compile(r"\.location$|^sasl\.kerberos\.keytab$")


@dataclass(frozen=True, kw_only=True)
class EndpointResult:
    """One line of ``ferry check --connect``: an endpoint, whether it answered as configured (or
    could not be checked), and what it said (or why not)."""

    endpoint: str
    ok: bool | None  # None: could not be checked (said why), which is no failure
    detail: str
    warning: bool = False  # it answered, but what it showed deserves a look (no failure)

    def line(self) -> str:
        mark = "WARN" if self.warning else "----" if self.ok is None else "ok  " if self.ok else "FAIL"
        return f"{mark}  {self.endpoint}: {self.detail}"


def _cluster_roles(data: Mapping[str, Any]) -> dict[str, tuple[kafka_properties.Role, ...]]:
    clusters = data.get("clusters")
    if not isinstance(clusters, dict):
        return {}
    ends: set[str] = set()
    routes = data.get("routes")
    for route in routes if isinstance(routes, list) else []:
        if isinstance(route, dict):
            ends.update(str(route.get(end)) for end in ("source", "destination"))
    tree = data.get("tree")
    if isinstance(tree, dict) and isinstance(tree.get("layout"), str):
        with contextlib.suppress(distribution_tree.TreeError):  # reported by tree.layout's own check
            ends.update(distribution_tree.parse(tree["layout"]).leaves())
    return {str(name): kafka_properties.ROLES if name in ends else ("admin",) for name in clusters}


def _properties(section: Any, skip: Collection[str], where: str, local_files: bool) -> dict[str, Any]:
    if not isinstance(section, dict):
        return {}
    return {
        str(key): value
        for key, value in section.items()
        if f"{where}.{key}" not in skip
        and isinstance(value, str | int | float | bool)
        and (local_files or not LOCAL_FILE_PROPERTY.search(str(key)))
    }


def client_problems(data: Mapping[str, Any], skip: Collection[str] = (), local_files: bool = True) -> list[str]:
    """librdkafka's refusals of each cluster's (resolved) properties for its roles, with the
    workers' overrides (``worker.producer``, ``worker.consumer``) on top as the workers merge
    them, as ``clusters.<name>.<property>: ...`` (``worker.producer.<property>: ...``) or
    ``clusters.<name>: as a producer: ...``. ``skip``: keys not to try (their placeholders did
    not resolve); ``local_files`` false: leave out the properties naming local files (for
    configs written for another host)."""
    problems: list[str] = []
    clusters = data.get("clusters")
    worker = data.get("worker")
    worker = worker if isinstance(worker, dict) else {}
    for name, roles in _cluster_roles(data).items():
        where = f"clusters.{name}"
        props = _properties(clusters.get(name) if isinstance(clusters, dict) else None, skip, where, local_files)
        for role in roles:
            overrides = _properties(worker.get(role), skip, f"worker.{role}", local_files) if role != "admin" else {}
            for problem in kafka_properties.property_problems({**props, **overrides}, role):
                key, _, message = problem.partition(": ")
                if key.startswith("as a"):
                    line = f"{where}: {problem}"
                else:
                    line = f"{f'worker.{role}' if key in overrides else where}.{key}: {message}"
                if line not in problems:
                    problems.append(line)
    return problems


def check_data(
    data: Any,
    env: Mapping[str, str] | None = None,
    read_file: Callable[[str], str] | None = None,
    local_files: bool = True,
    warnings: list[str] | None = None,
) -> tuple[FerryConfig | None, list[str]]:
    """Every problem of already-parsed config data, and the config when there is none.
    ``env``, ``read_file``: where placeholders read (default: the environment, the files).
    ``warnings`` (when given) gets one line per key left out of a file written for a newer
    config format (:func:`common.config.validate_resolved`'s ``ignored``): no problem."""
    if not isinstance(data, dict):
        return None, ["(top level): the top level must be a mapping with zookeeper, clusters and routes"]
    resolved, unresolved = resolve(data, env, read_file) if read_file else resolve(data, env)
    config, problems = validate_resolved(resolved, unresolved, warnings)
    problems += client_problems(resolved, {key for key, _ in unresolved}, local_files)
    return (config if not problems else None), problems


def check_file(path: str | Path, warnings: list[str] | None = None) -> tuple[FerryConfig | None, list[str]]:
    """:func:`check_data` of a config file; :class:`common.errors.ConfigError` when it cannot be
    read or is not YAML."""
    return check_data(read_config_file(path), warnings=warnings)
