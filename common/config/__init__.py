"""Ferry's configuration: one YAML file, validated at start with pydantic.

Every key is documented in ``docs/configuration.md``, generated from these models by
``scripts/config_docs.py`` (a field's docstring is its description). A bad file raises :class:`ConfigError`
whose message names each offending key and the problem, e.g.
``controller.rest_port: Input should be less than 65536``.


A file may declare ``config_version`` (:data:`CONFIG_VERSION` is this release's): one that declares a
newer version than this release knows has the keys this release does not know ignored, one warning
each, instead of refused (``loading``), so that a rollback can share the file with a newer release.

The models live in one module per section (``base``, ``zookeeper``, ``routes``, ``sections``, ``tree``,
``schemas``, ``internal_topics``), the whole file's model in ``model`` and reading and validating it in
``loading``; every public name is importable from here.
"""

from __future__ import annotations

from ferry.common.config.base import ClientValue
from ferry.common.config.ferry_config import CONFIG_VERSION, SECRET_PROPERTY, FerryConfig, Problem
from ferry.common.config.internal_topics import InternalTopicsConfig
from ferry.common.config.loading import load_config, parse_config, read_config_file, validate_config, validate_resolved
from ferry.common.config.routes import Compression, MirrorMaker2Config, RouteConfig, start_position
from ferry.common.config.schemas import (
    HeartbeatsConfig,
    LoggingConfig,
    RegistryAuthConfig,
    RegistryConfig,
    SchemasConfig,
)
from ferry.common.config.sections import (
    ControllerConfig,
    RestAuthConfig,
    RestTlsConfig,
    RestTokenConfig,
    SparkConfig,
    WorkerConfig,
)
from ferry.common.config.tree import TreeConfig, loop_problem
from ferry.common.config.zookeeper import ZookeeperAuthConfig, ZookeeperConfig, ZookeeperTlsConfig

__all__ = [
    "CONFIG_VERSION",
    "SECRET_PROPERTY",
    "ClientValue",
    "Compression",
    "ControllerConfig",
    "FerryConfig",
    "HeartbeatsConfig",
    "InternalTopicsConfig",
    "LoggingConfig",
    "MirrorMaker2Config",
    "Problem",
    "RegistryAuthConfig",
    "RegistryConfig",
    "RestAuthConfig",
    "RestTlsConfig",
    "RestTokenConfig",
    "RouteConfig",
    "SchemasConfig",
    "SparkConfig",
    "TreeConfig",
    "WorkerConfig",
    "ZookeeperAuthConfig",
    "ZookeeperConfig",
    "ZookeeperTlsConfig",
    "load_config",
    "loop_problem",
    "parse_config",
    "read_config_file",
    "start_position",
    "validate_config",
    "validate_resolved",
]
