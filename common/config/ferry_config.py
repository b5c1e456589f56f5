"""The whole configuration (:class:`FerryConfig`): its sections and the checks across them (unknown
clusters, secrets in client properties).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ferry.common.config.base import ClientValue, _Strict
from ferry.common.config.internal_topics import InternalTopicsConfig
from ferry.common.config.routes import RouteConfig
from ferry.common.config.schemas import HeartbeatsConfig, LoggingConfig, SchemasConfig
from ferry.common.config.sections import ControllerConfig, SparkConfig, WorkerConfig
from ferry.common.config.tree import TreeConfig, loop_problem
from ferry.common.config.zookeeper import ZookeeperConfig
from ferry.common.core import heartbeat, topology
from ferry.common.core import naming as topic_naming
from ferry.common.core import tree as distribution_tree
from ferry.common.errors import ConfigError
from ferry.common.placeholders import Secret
from ferry.common.vocabulary import CLUSTER_NAME

Problem = tuple[tuple[str | int, ...], str, str]

# The version of the config format this release knows: it rises when a release adds a key (or a
# section). A file that declares a newer ``config_version`` was written for a newer release: this
# one ignores the keys it does not know (one warning each) instead of refusing the file, so that a
# rollback can share the file (docs/upgrading.md, "Rolling back with a shared config").
CONFIG_VERSION = 1

# Cluster properties that hold secrets: they print masked even when written in the file.
SECRET_PROPERTY = re.compile(r"password|secret|key\.pem|jaas")


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _unknown_clusters(config: Any) -> list[Problem]:
    """Routes, tree leaves, registries and internal_topics naming clusters that ``clusters`` does not have.

    ``config`` is a :class:`FerryConfig` or the raw data of one that failed validation: what
    cannot be read is skipped (its own error is reported)."""
    clusters = _field(config, "clusters")
    if not isinstance(clusters, dict) or not clusters:
        return []
    known = sorted(str(name) for name in clusters)
    problems: list[Problem] = []
    routes = _field(config, "routes")
    for i, route in enumerate(routes if isinstance(routes, list) else []):
        for end in ("source", "destination"):
            cluster = _field(route, end)
            if isinstance(cluster, str) and cluster not in clusters:
                problems.append((("routes", i, end), "ferry", f"unknown cluster {cluster!r} (known: {known})"))
    layout = _field(_field(config, "tree"), "layout")
    if isinstance(layout, str):
        try:
            leaves = distribution_tree.parse(layout).leaves()
        except distribution_tree.TreeError:
            leaves = ()  # reported by tree.layout's own check
        problems += [
            (("tree", "layout"), "ferry", f"unknown cluster {leaf!r} (known: {known})")
            for leaf in leaves
            if leaf not in clusters
        ]
    internal = _field(_field(config, "internal_topics"), "clusters")
    if isinstance(internal, dict):
        unknown = sorted(str(name) for name in internal if name not in clusters)
        if unknown:
            problems.append((("internal_topics", "clusters"), "ferry", f"unknown clusters {unknown} (known: {known})"))
    registries = _field(_field(config, "schemas"), "registries")
    if isinstance(registries, dict):
        unknown = sorted(str(name) for name in registries if name not in clusters)
        if unknown:
            problems.append((("schemas", "registries"), "ferry", f"unknown clusters {unknown} (known: {known})"))
    return problems


def _validation_error(title: str, problems: list[Problem]) -> ValidationError:
    """One :class:`ValidationError` holding every problem (pydantic keeps location and message)."""
    return ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(type=PydanticCustomError(kind, "{message}", {"message": message}), loc=loc, input=None)
            for loc, kind, message in problems
        ],
    )


class FerryConfig(_Strict):
    config_version: int = Field(CONFIG_VERSION, ge=1, strict=True)
    """the version of the config format the file is written for; a Ferry that knows an older version ignores the keys
    it does not know, with one warning each, instead of refusing the file (a rollback sharing the file with a newer
    release, docs/upgrading.md); absent or not newer: an unknown key is an error"""
    zookeeper: ZookeeperConfig
    """the ZooKeeper ensemble and the root of Ferry's nodes"""
    clusters: dict[str, dict[str, ClientValue]]
    """name -> librdkafka properties (security settings included), passed through as they are"""
    # The routes as written, plus (after validation) one per distributor of ``tree``.
    routes: list[RouteConfig] = Field(default_factory=list)
    """what is mirrored where: at least one route, or a tree"""
    tree: TreeConfig | None = None
    """Axual's distribution tree; its routes (one per distributor) are derived"""
    internal_topics: InternalTopicsConfig = InternalTopicsConfig()
    """Ferry's own topics (offset map, checkpoints, heartbeats): their replication factor per cluster"""
    heartbeats: HeartbeatsConfig = HeartbeatsConfig()
    """end-to-end heartbeats over every route"""
    controller: ControllerConfig = ControllerConfig()
    """the controller's REST API, its delays and its periodic jobs"""
    worker: WorkerConfig = WorkerConfig()
    """the workers' copy loop, commits and metrics endpoint"""
    spark: SparkConfig = SparkConfig()
    """the Spark jobs (`ferry validate`, `ferry audit`)"""
    # Schema distribution (a leader job); None: off.
    schemas: SchemasConfig | None = None
    """schema distribution (a leader job); absent: off"""
    logging: LoggingConfig = LoggingConfig()
    """the format of the log lines on stderr"""

    @field_validator("clusters", mode="before")
    @classmethod
    def _mask_secret_properties(cls, value: Any) -> Any:
        # Passwords written in the file print masked too, like those from placeholders.
        if not isinstance(value, dict):
            return value
        return {
            name: {
                # A Secret already (a placeholder's value, or one kept as written) stays what it is.
                key: Secret(item)
                if isinstance(item, str) and not isinstance(item, Secret) and SECRET_PROPERTY.search(str(key))
                else item
                for key, item in props.items()
            }
            if isinstance(props, dict)
            else props
            for name, props in value.items()
        }

    @field_validator("clusters")
    @classmethod
    def _clusters(cls, value: dict[str, dict[str, ClientValue]]) -> dict[str, dict[str, ClientValue]]:
        if not value:
            raise ValueError("at least one cluster is needed")
        problems = []
        for name, props in value.items():
            if not CLUSTER_NAME.fullmatch(name):
                problems.append(f"cluster name {name!r} may use only letters, digits, '_' and '-'")
            elif not str(props.get("bootstrap.servers", "")).strip():
                problems.append(f"cluster {name!r} needs bootstrap.servers")
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _cross_checks(cls, data: Any, handler: Callable[[Any], FerryConfig]) -> FerryConfig:
        """Every cross-field problem at once, next to the fields' own: a route naming an unknown
        cluster is reported even when another route has a bad regular expression."""
        try:
            config = handler(data)
        except ValidationError as exc:
            found = [(tuple(e["loc"]), e["type"], e["msg"]) for e in exc.errors()]
            extra = _unknown_clusters(data) if isinstance(data, dict) else []
            reported = {loc for loc, _, _ in found}
            raise _validation_error(cls.__name__, found + [p for p in extra if p[0] not in reported]) from None
        problems = config._derive_routes()
        if problems:
            raise _validation_error(cls.__name__, problems)
        return config

    def _derive_routes(self) -> list[Problem]:
        """Adds the tree's and the heartbeats' routes, and lists every cross-field problem."""
        problems: list[Problem] = _unknown_clusters(self)
        if problems:
            return problems
        if self.tree is not None:
            if any(route.distributor for route in self.routes):
                problems.append((("routes",), "ferry", "distributor is set by tree, not by hand"))
            try:
                derived = self.tree.derive_routes()
            except distribution_tree.TreeError as exc:
                problems.append((("tree", "targets"), "ferry", str(exc)))
            else:
                object.__setattr__(self, "routes", [*self.routes, *derived])  # frozen model: set once, here
        if not self.routes:
            problems.append((("routes",), "ferry", "at least one route (or a tree) is needed"))
        if self.heartbeats.interval_s:
            beat = re.escape(heartbeat.TOPIC)
            object.__setattr__(
                self,
                "routes",
                [r if beat in r.include else r.model_copy(update={"include": [*r.include, beat]}) for r in self.routes],
            )
        seen: set[str] = set()
        for i, route in enumerate(self.routes):
            if route.source == route.destination:
                problems.append((("routes", i), "ferry", "source and destination are the same cluster"))
            if route.name in seen:
                problems.append((("routes", i), "ferry", f"route {route.name} is listed twice"))
            seen.add(route.name)
        if not problems:
            problem = loop_problem(self.routes)
            if problem:
                problems.append((("routes",), "ferry", problem))
        return problems

    def with_targets(self, switched: dict[str, str]) -> list[RouteConfig]:
        """The routes with tree distributors pointed at ``switched`` targets (ZooKeeper's ``tree/targets``).

        A switched target outside the distributor's subtree (a stale node after a config change)
        is ignored: the config's target stays.
        """
        if self.tree is None or not switched:
            return list(self.routes)
        derived = {d.name: d for d in distribution_tree.distributors(distribution_tree.parse(self.tree.layout))}
        result = []
        for route in self.routes:
            target = switched.get(route.distributor or "")
            if route.distributor in derived and target in derived[route.distributor].subtree:
                route = route.model_copy(update={"destination": target})
            result.append(route)
        return result

    def copied_origins(self, route: RouteConfig) -> frozenset[str] | None:
        """For a route with loop prevention, the origins whose records it copies (:mod:`common.core.topology`);
        None for a route without (it copies everything)."""
        if not route.loop_prevention or route.copy_level is not None:
            return None
        protected = [
            r for r in self.routes if r.loop_prevention and r.copy_level is None and topic_naming.is_identity(r)
        ]
        return topology.copied_origins(protected, route.source, route.destination)

    def route(self, name: str | None = None) -> RouteConfig:
        """The route named ``name``; without a name, the only configured route.

        Raises :class:`ConfigError` for an unknown name, or no name with several routes. The one
        route lookup by name: the CLIs, the REST API and ``ferry validate|audit`` use it.
        """
        if name is None:
            if len(self.routes) == 1:
                return self.routes[0]
            raise ConfigError(f"several routes are configured ({', '.join(r.name for r in self.routes)}): pass --route")
        for route in self.routes:
            if route.name == name:
                return route
        raise ConfigError(f"unknown route {name!r} (known: {[r.name for r in self.routes]})")

    def routes_named(self, name: str | None) -> list[RouteConfig]:
        """Every route when ``name`` is None, else the one named (:meth:`route`)."""
        return list(self.routes) if name is None else [self.route(name)]
