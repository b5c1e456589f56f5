"""Ferry's configuration: one YAML file, validated at start with pydantic.

Every key is documented in ``docs/configuration.md``, generated from these models by
``scripts/config_docs.py`` (a field's docstring is its description). A bad file raises :class:`ConfigError`
whose message names each offending key and the problem, e.g.
``controller.rest_port: Input should be less than 65536``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ferry.common import endpoints
from ferry.common.core import heartbeat, topology
from ferry.common.core import naming as topic_naming
from ferry.common.core import tree as distribution_tree
from ferry.common.core.schemas import SubjectFormat
from ferry.common.errors import ConfigError
from ferry.common.placeholders import Secret, resolve
from ferry.common.vocabulary import CLUSTER_NAME

# A librdkafka property value as YAML can spell it; a Secret (masked repr) when it came from a
# placeholder or its name says it is a secret.
ClientValue = Secret | str | int | float | bool


def _valid_regexes(patterns: list[str]) -> list[str]:
    """``patterns`` as they are, or a ValueError naming the first that is not a regular expression."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    return patterns


class _Strict(BaseModel):
    # A field's docstring is its description: docs/configuration.md is generated from them
    # (scripts/config_docs.py; `make lint` fails when the committed file is stale).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ZookeeperAuthConfig(_Strict):
    """Digest authentication, and the ACL on every node Ferry creates (see docs/security.md).

    Ferry's identity may do everything on its nodes; ``others`` may ``read`` them or do ``none``.
    Keep the secret out of the file with a placeholder: ``digest: ${env:FERRY_ZK_DIGEST}`` or
    ``digest: ${file:/etc/ferry/zk-digest}``.
    """

    digest: SecretStr
    """user:password; e.g. ${env:FERRY_ZK_DIGEST} or ${file:/etc/ferry/zk-digest}"""
    others: Literal["read", "none"] = "read"
    """what clients without Ferry's identity may do on Ferry's nodes: read | none"""

    @field_validator("digest")
    @classmethod
    def _user_and_password(cls, value: SecretStr) -> SecretStr:
        _split_digest(value.get_secret_value())
        return value

    def credentials(self) -> tuple[str, str]:
        """``(user, password)``."""
        return _split_digest(self.digest.get_secret_value())


def _split_digest(value: str) -> tuple[str, str]:
    # The message never repeats the value: it is a secret.
    user, sep, password = value.strip().partition(":")
    if not sep or not user or not password:
        raise ValueError("must be user:password, with a non-empty user and password")
    return user, password


class ZookeeperConfig(_Strict):
    connect: str = Field(min_length=1, description="host:port[,host:port...] of the ensemble")
    root: str = Field("/ferry", description="the path under which Ferry keeps all its nodes")
    session_timeout_s: float = Field(10.0, ge=2.0, le=120.0)
    """ZooKeeper session timeout"""
    retry_deadline_s: float = Field(30.0, gt=0)
    """how long an operation retries a lost connection"""
    auth: ZookeeperAuthConfig | None = None
    """digest authentication and ACLs on Ferry's nodes, see docs/security.md; absent: no authentication, open ACLs"""

    @field_validator("root")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or (value != "/" and value.endswith("/")) or "//" in value:
            raise ValueError("must be an absolute ZooKeeper path like /ferry/prod, without a trailing /")
        return value


# The producer's compression.type values (librdkafka's names).
Compression = Literal["none", "gzip", "snappy", "lz4", "zstd"]


class MirrorMaker2Config(_Strict):
    """Take over a MirrorMaker 2 mirror: a partition this route has neither committed nor copied
    starts where MirrorMaker 2 stopped (its source offset in Connect's offsets topic, else its
    latest offset sync), and consumer groups the route's own offset map cannot translate yet are
    translated by MirrorMaker 2's last checkpoints (see docs/migration-from-mirrormaker2.md).
    Names default to MirrorMaker 2's own (dedicated mode, default policy separator)."""

    source_alias: str | None = None
    """MirrorMaker 2's alias of the source cluster; absent: the route's source"""
    target_alias: str | None = None
    """MirrorMaker 2's alias of the destination cluster; absent: the route's destination"""
    connector: str = "MirrorSourceConnector"
    """the MirrorSourceConnector's name (in Connect's offsets topic keys)"""
    offsets_topic: str | None = None
    """Connect's offsets topic on the destination; absent: mm2-offsets.<source_alias>.internal"""
    offset_syncs_topic: str | None = None
    """MirrorMaker 2's offset syncs; absent: mm2-offset-syncs.<target_alias>.internal"""
    offset_syncs_on: Literal["source", "destination"] = "source"
    """the cluster holding the offset syncs (MirrorMaker 2's offset-syncs.topic.location)"""
    checkpoints_topic: str | None = None
    """MirrorMaker 2's checkpoints on the destination; absent: <source_alias>.checkpoints.internal"""

    def names(self, source: str, destination: str) -> MirrorMaker2Config:
        """Every name resolved for the route ``source -> destination``."""
        src = self.source_alias or source
        dst = self.target_alias or destination
        return self.model_copy(update={
            "source_alias": src, "target_alias": dst,
            "offsets_topic": self.offsets_topic or f"mm2-offsets.{src}.internal",
            "offset_syncs_topic": self.offset_syncs_topic or f"mm2-offset-syncs.{dst}.internal",
            "checkpoints_topic": self.checkpoints_topic or f"{src}.checkpoints.internal"})


class RouteConfig(_Strict):
    source: str
    """the cluster records are read from (a name under clusters)"""
    destination: str
    """the cluster records are written to (a name under clusters)"""
    include: list[str] = Field(default_factory=list)
    """auto-whitelisting by the leader's topic observer: a source topic whose full name matches one of these regular expressions (and none of exclude) is mirrored without a POST; empty: POST /topics only"""
    exclude: list[str] = Field(default_factory=list)
    """... and none of these"""
    config_exclude: list[str] = Field(default_factory=list)
    """destination topic configs that do not follow the source (e.g. retention.ms on a DR copy)"""
    groups: list[str] = Field(default_factory=list)
    """consumer groups whose id fully matches one of these regular expressions (and none of groups_exclude) get their committed offsets checkpointed to the destination"""
    groups_exclude: list[str] = Field(default_factory=list)
    """... except these (Ferry's own ferry.* groups never are)"""
    naming: str = topic_naming.IDENTITY
    """destination topic name: identity, prefix (<source>.<topic>, MirrorMaker 2), or a template with {topic} once and optionally {source}/{destination}, e.g. \"prod-{topic}\""""
    compression: Compression = "lz4"
    """the destination producer's compression.type for this route: mirrored traffic usually crosses datacenters, and lz4 saves most of the bytes of compressible records for little CPU (BENCHMARKS.md); a compression.type in worker.producer overrides it for every route"""
    loop_prevention: bool = False
    """skip records whose provenance path holds the destination (they came from it or through it) or that are not this route's to forward: what makes identity-named active-active and meshes loop-free (docs/topologies.md); needed on identity-named cycles (refused without)"""
    # Set on the routes derived from ``tree`` (common/core/tree.py): the distributor's level (its copy
    # flags decide what it copies) and its name, ``<cluster>.L<level>``, which names the route
    # and its consumer group so that switching its target leaf keeps its committed offsets.
    copy_level: int | None = Field(None, ge=1, le=distribution_tree.MAX_LEVEL)
    """set by tree: the tree level of this route's distributor"""
    distributor: str | None = None
    """set by tree: the distributor this route belongs to (<cluster>.L<level>)"""
    mirrormaker2: MirrorMaker2Config | None = None
    """take over the MirrorMaker 2 mirror of this route: start where it stopped instead of at auto_offset_reset (docs/migration-from-mirrormaker2.md)"""
    max_bytes_per_s: float | None = Field(None, gt=0)
    """throttle: the route copies at most this many bytes a second across the fleet (each worker gets its share by its part of the route's partitions); PUT /routes/<route>/throttle overrides it at run time; absent: no limit"""
    max_records_per_s: float | None = Field(None, gt=0)
    """throttle: at most this many records a second across the fleet, as max_bytes_per_s"""
    start: Literal["earliest", "latest"] | int | None = None
    """where a partition starts when nothing of the route is on the destination yet and nothing is committed: earliest, latest, or a time (ISO 8601, e.g. 2026-01-31T12:00:00Z, or epoch milliseconds): the first record at or after it; unset: worker.auto_offset_reset. Resuming from the destination always wins"""

    @field_validator("start", mode="before")
    @classmethod
    def _start(cls, value: Any) -> Any:
        return start_position(value)

    @field_validator("include", "exclude", "groups", "groups_exclude")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _valid_regexes(value)

    @field_validator("naming")
    @classmethod
    def _naming(cls, value: str) -> str:
        problem = topic_naming.naming_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    def wants(self, topic: str) -> bool:
        """Whether the observer mirrors ``topic`` by itself (full-name match)."""
        return (any(re.fullmatch(p, topic) for p in self.include) and not any(re.fullmatch(p, topic) for p in self.exclude)
                and topic_naming.refusal(self, topic) is None)

    def destination_topic(self, topic: str) -> str:
        """The name of source topic ``topic`` on the destination (:mod:`common.core.naming`)."""
        return topic_naming.destination_topic(self, topic)

    @property
    def protected(self) -> bool:
        """Whether records that would come back are filtered (by path or by copy flags)."""
        return self.loop_prevention or self.copy_level is not None

    def wants_group(self, group: str) -> bool:
        """Whether the checkpoint job translates ``group``'s offsets (full-name match; never Ferry's own groups)."""
        if group.startswith("ferry."):
            return False
        return any(re.fullmatch(p, group) for p in self.groups) and not any(re.fullmatch(p, group) for p in self.groups_exclude)

    @property
    def name(self) -> str:
        """``<source>.<destination>`` (a tree's distributor: ``<cluster>.L<level>``): a ZooKeeper node name, unique per route."""
        return self.distributor or f"{self.source}.{self.destination}"

    @property
    def group_id(self) -> str:
        """The consumer group, on the source cluster, that holds this route's committed offsets."""
        return f"ferry.{self.name}"


class RestTokenConfig(_Strict):
    """One bearer token of the REST API. Keep the secret out of the file with a placeholder:
    ``value: ${env:FERRY_OPS_TOKEN}`` or ``value: ${file:/etc/ferry/ops.token}``."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="who holds it; logged instead of the token")
    role: Literal["read", "write"] = "write"
    """write: every request; read: GET/HEAD only"""
    value: SecretStr  # SecretStr: never shown by repr() or in a validation error
    """the token; e.g. ${env:FERRY_OPS_TOKEN} or ${file:/etc/ferry/ops.token}"""


class RestAuthConfig(_Strict):
    open_reads: bool = False
    """true: GET/HEAD need no token; false: they need a read or write token (/health and /openapi.json never do; /metrics does when reads are closed)"""
    tokens: list[RestTokenConfig] = Field(min_length=1)
    """at least one"""

    @field_validator("tokens")
    @classmethod
    def _unique_names(cls, value: list[RestTokenConfig]) -> list[RestTokenConfig]:
        names = [token.name for token in value]
        if len(set(names)) != len(names):
            raise ValueError(f"token names must be unique: {sorted(names)}")
        return value


class RestTlsConfig(_Strict):
    cert_file: str = Field(min_length=1, description="PEM certificate (chain) the REST port presents")
    key_file: str = Field(min_length=1, description="PEM private key of cert_file")
    ca_file: str | None = None
    """what a standby trusts when it forwards a write to the leader; absent: cert_file (every controller presents the same certificate)"""


def _advertised_url(value: str | None) -> str | None:
    """``value`` when it is an advertised URL (or absent), else a ValueError saying why not."""
    problem = endpoints.url_problem(value) if value is not None else None
    if problem:
        raise ValueError(problem)
    return value


class ControllerConfig(_Strict):
    rest_host: str = "127.0.0.1"
    """REST API bind address; 0.0.0.0 or :: for every interface (`--rest-host` and $FERRY_REST_HOST override)"""
    rest_port: int = Field(9000, ge=1, lt=65536)
    """REST API port (`--rest-port` overrides)"""
    advertised_url: str | None = None
    """the URL the other controllers reach this one at (standbys forward writes there; `--advertised-url` and $FERRY_ADVERTISED_URL override); absent: http(s)://rest_host:port, for a wildcard rest_host this host's name"""
    rebalance_delay_s: float = Field(120.0, ge=0)
    """debounce: rebalance this long after the last membership change"""
    autobalancing: bool = True
    """rebalance after workers join (false: assignments stay where they are; new partitions and a departed worker's are still placed); PUT /autobalancing overrides it at run time"""
    failover_delay_s: float = Field(10.0, ge=0)
    """a departed worker keeps its partitions this long"""
    forward_timeout_s: float = Field(10.0, gt=0)
    """a standby's write forwarded to the leader may take this long"""
    observer_interval_s: float = Field(30.0, gt=0)
    """the leader's topic observer looks for new matching topics, added partitions and destination config changes this often"""
    lag_interval_s: float = Field(10.0, gt=0)
    """the leader samples committed and log-end offsets this often (lag, /noprogress)"""
    noprogress_after_s: float = Field(60.0, gt=0)
    """a lagging partition whose commit has not moved this long is in /noprogress"""
    validation_interval_s: float = Field(0.0, ge=0)
    """the leader runs the Spark validation (`ferry validate --store`) this often; 0: never"""
    validation_timeout_s: float = Field(300.0, gt=0)
    """a validation run still going after this long is stopped (a JVM start alone can take a minute on a busy host)"""
    rest_threads: int = Field(8, ge=1, le=256)
    """REST worker threads of the WSGI server (cheroot)"""
    checkpoint_interval_s: float = Field(10.0, ge=0)
    """the leader translates the groups of every route's groups patterns this often; 0: never"""
    checkpoint_margin_s: float = Field(60.0, ge=0)
    """Axual's timestamp method, for offsets no exact map covers: look up the committed record's timestamp minus this on the destination"""
    sync_group_offsets: bool = True
    """commit translated offsets on the destination, only while the group has no active member there, only forward"""
    auth: RestAuthConfig | None = None
    """bearer tokens for the REST API; absent (the default): no authentication"""
    tls: RestTlsConfig | None = None
    """https on the REST port; absent (the default): plain http"""
    check_source_topics: bool = True
    """false: POST /topics trusts numPartitions (then required) instead of asking the source cluster; for benchmarks whose topics exist only in ZooKeeper (`ferry bench controller`)"""
    balance: Literal["load", "count"] = "load"
    """how the leader balances: load (new partitions to the least-loaded worker by measured bytes/s, a rebalance by load every load_rebalance_interval_s when needed, stuck partitions moved) | count (partition counts only); both rebalance counts rebalance_delay_s after workers join or leave"""
    imbalance_ratio: float = Field(1.2, ge=1.0)
    """balance: load: rebalance when the most loaded worker copies more than this times the mean bytes/s"""
    load_rebalance_interval_s: float = Field(300.0, gt=0)
    """balance: load: the leader checks the measured load (and moves what it must) this often, never more often"""
    load_balance_min_bytes_per_s: int = Field(102_400, ge=0)
    """balance: load: no rebalance by load while the mean worker copies less than this many bytes/s (noise at idle)"""
    stuck_after_s: float = Field(120.0, gt=0)
    """balance: load: a partition whose lag grew at every load report for this long while its worker was saturated moves to the least-loaded worker"""
    saturated_busy_ratio: float = Field(0.9, gt=0, le=1.0)
    """balance: load: a worker is saturated when its copy loop spent at least this share of its last load window copying (it never waited for records)"""

    _check_advertised_url = field_validator("advertised_url")(_advertised_url)


class WorkerConfig(_Strict):
    metrics_host: str = "127.0.0.1"
    """metrics and /health bind address; 0.0.0.0 or :: for every interface (`--metrics-host` and $FERRY_METRICS_HOST override)"""
    metrics_port: int = Field(9100, ge=0, lt=65536, description="metrics and /health port; 0 disables them (`--metrics-port` overrides)")
    advertised_metrics_url: str | None = None
    """the metrics URL the worker registers in ZooKeeper (`GET /workers` shows it; `--advertised-metrics-url` and $FERRY_ADVERTISED_METRICS_URL override); absent: http://metrics_host:port, for a wildcard metrics_host this host's name"""
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    """where a partition with no committed offset starts: earliest | latest"""
    commit_interval_s: float = Field(1.0, gt=0)
    """how often acknowledged source offsets are committed"""
    consume_batch: int = Field(1000, ge=1, le=100_000)
    """records taken from the consumer per call"""
    load_report_interval_s: float = Field(30.0, gt=0)
    """how often the worker measures what it copies per partition (bytes/s, records/s, lag) and how busy its copy loop is, for the leader's balance by load; written in its status at most this often"""
    resume_lookback_records: int = Field(200_000, ge=0)
    """taking a partition: at most this many destination records are read back to find the route's own records at or after its committed offset"""
    producer: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka overrides for the destination producers, on top of the cluster's own properties"""
    consumer: dict[str, ClientValue] = Field(default_factory=dict)
    """librdkafka overrides for the source consumers"""

    _check_advertised_metrics_url = field_validator("advertised_metrics_url")(_advertised_url)


class SparkConfig(_Strict):
    master: str | None = None
    """where `ferry validate` and `ferry audit` run: a Spark master URL (spark://..., yarn, k8s://...); `--master` wins over it; absent: $FERRY_SPARK_MASTER, then local[*]"""


class TreeConfig(_Strict):
    """Axual's distribution tree (:mod:`common.core.tree`): its routes are derived, one per distributor."""

    layout: str = Field(min_length=3)
    """clusters as leaves of a binary tree, e.g. 3(1(a,b),1(c,d)) or ((a,(b,c)),(d,e)); [level](left,right); levels default to heights"""
    include: list[str] = Field(min_length=1)
    """what every distributor mirrors (full-name regular expressions)"""
    exclude: list[str] = Field(default_factory=list)
    """... and not"""
    config_exclude: list[str] = Field(default_factory=list)
    """destination configs that do not follow"""
    compression: Compression = "lz4"
    """every distributor's producer compression.type (as a route's compression)"""
    targets: dict[str, str] = Field(default_factory=dict)
    """distributor (<cluster>.L<level>) -> its target leaf; a distributor not named here: its subtree's first leaf"""
    switch_after_s: float = Field(60.0, ge=0)
    """the leader switches a distributor to another leaf of its subtree when its target has been unreachable this long; 0: never by itself (`ferry tree switch` still can)"""
    probe_interval_s: float = Field(5.0, gt=0)
    """how often the leader probes every leaf"""

    @field_validator("layout")
    @classmethod
    def _layout(cls, value: str) -> str:
        distribution_tree.parse(value)  # TreeError is a ValueError: pydantic reports it under tree.layout
        return value

    def derive_routes(self) -> list[RouteConfig]:
        """One identity-named route per distributor, flags-filtered at its level."""
        derived = distribution_tree.distributors(distribution_tree.parse(self.layout))
        targets = distribution_tree.choose_targets(derived, self.targets)
        return [
            RouteConfig(source=d.cluster, destination=targets[d.name], include=self.include, exclude=self.exclude,
                        config_exclude=self.config_exclude, compression=self.compression, copy_level=d.level,
                        distributor=d.name)
            for d in derived
        ]


def loop_problem(routes: list[RouteConfig]) -> str | None:
    """The first cycle of identity-named routes holding a route without loop prevention, named; None if none.

    Such a cycle copies a record around forever (or at least back to where it came from).
    Routes that rename topics do not count: a renamed copy is another topic.
    """
    edges: dict[str, list[RouteConfig]] = {}
    for route in routes:
        if topic_naming.is_identity(route):
            edges.setdefault(route.source, []).append(route)
    for start in routes:
        if start.protected or not topic_naming.is_identity(start):
            continue
        # Breadth-first from the route's destination back to its source: the shortest cycle through it.
        previous: dict[str, RouteConfig] = {}
        frontier = [start.destination]
        seen = {start.destination}
        while frontier and start.source not in seen:
            following = []
            for cluster in frontier:
                for route in edges.get(cluster, []):
                    if route.destination not in seen:
                        seen.add(route.destination)
                        previous[route.destination] = route
                        following.append(route.destination)
            frontier = following
        if start.source not in seen:
            continue
        cycle = [start]
        cluster = start.source
        while cluster != start.destination:
            cycle.insert(1, previous[cluster])
            cluster = previous[cluster].source
        clusters = " -> ".join([r.source for r in cycle] + [start.source])
        unprotected = [r.name for r in cycle if not r.protected]
        return (f"routes {', '.join(r.name for r in cycle)} form a cycle ({clusters}) with identity naming; "
                f"{', '.join(unprotected)} {'has' if len(unprotected) == 1 else 'have'} no loop prevention, so records "
                f"would be copied around it again and again. Set loop_prevention: true on every route of the cycle, "
                f"or naming: prefix")
    return None


class HeartbeatsConfig(_Strict):
    interval_s: float = Field(0.0, ge=0)
    """>0: the leader writes ferry.heartbeats on every route's source this often and every route mirrors it (GET /heartbeats, ferry_controller_heartbeat_* metrics); 0: off"""


class RegistryAuthConfig(_Strict):
    """HTTP basic auth for a schema registry."""

    username: str = Field(min_length=1)
    """the user name"""
    password: SecretStr
    """the password; e.g. ${env:DST_REGISTRY_PASSWORD} or ${file:/etc/ferry/registry.password}"""


class RegistryConfig(_Strict):
    """A cluster's schema registry (Confluent-compatible API; Apicurio Registry 2.x for IDs)."""

    url: str = Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", description="base URL, e.g. http://registry:8080")
    # How subjects are named on this cluster: {topic} exactly once, plus names from subject_vars.
    subject_format: str = "{topic}-value"
    """how subjects are named on this cluster"""
    subject_vars: dict[str, str] = Field(default_factory=dict)
    """the other {names} of subject_format"""
    auth: RegistryAuthConfig | None = None
    """HTTP basic auth; absent: none"""
    timeout_s: float = Field(10.0, gt=0, le=300)
    """per request; temporary failures retry up to 2x this"""

    @model_validator(mode="after")
    def _format(self) -> RegistryConfig:
        SubjectFormat(self.subject_format, self.subject_vars)  # its checks: {topic} once, every field defined
        if "topic" in self.subject_vars:
            raise ValueError("subject_vars may not define 'topic' (it comes from the subject)")
        return self

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")


class SchemasConfig(_Strict):
    """Schema distribution: the leader copies subject versions from the primary cluster's
    registry to the other clusters' registries, keeping schema IDs."""

    primary: str = Field(description="the cluster whose registry is the source of truth")
    registries: dict[str, RegistryConfig]
    """cluster name -> its schema registry (Apicurio Registry 2.x, Confluent-compatible API)"""
    # The clusters to distribute to (default: every other cluster with a registry).
    targets: list[str] | None = None
    """where to distribute; absent: every other cluster in registries"""
    # Only primary subjects whose full name matches one of these (default: all that fit the format).
    include: list[str] = Field(default_factory=lambda: [".*"])
    """only primary subjects whose full name matches one of these"""
    interval_s: float = Field(10.0, gt=0)
    """how often the leader runs a distribution pass"""
    # Subject versions per import request to a target (bounds a request's size; a pass
    # interrupted between requests leaves the rest for the next pass).
    import_batch: int = Field(50, ge=1, le=10_000)
    """subject versions per import request to a target, in order"""

    @field_validator("include")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _valid_regexes(value)

    @model_validator(mode="after")
    def _known(self) -> SchemasConfig:
        if self.primary not in self.registries:
            raise ValueError(f"primary {self.primary!r} has no entry in registries (known: {sorted(self.registries)})")
        for target in self.targets or []:
            if target not in self.registries:
                raise ValueError(f"target {target!r} has no entry in registries")
            if target == self.primary:
                raise ValueError(f"target {target!r} is the primary")
        return self

    @property
    def target_names(self) -> list[str]:
        if self.targets is not None:
            return list(self.targets)
        return sorted(name for name in self.registries if name != self.primary)

    def wants(self, subject: str) -> bool:
        return any(re.fullmatch(pattern, subject) for pattern in self.include)


class LoggingConfig(_Strict):
    format: Literal["text", "json"] = "text"
    """text: time, level, logger and message on a line; json: one JSON object per line (time, level, logger, message, exception, and the worker, route, topic, partition a line is about); `--log-format` overrides"""


# A problem for pydantic to report: where (loc), its error type, and the message.
Problem = tuple[tuple[str | int, ...], str, str]

# Cluster properties that hold secrets: they print masked even when written in the file.
SECRET_PROPERTY = re.compile(r"password|secret|key\.pem|jaas")


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _unknown_clusters(config: Any) -> list[Problem]:
    """Routes, tree leaves and registries naming clusters that ``clusters`` does not have.

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
        problems += [(("tree", "layout"), "ferry", f"unknown cluster {leaf!r} (known: {known})")
                     for leaf in leaves if leaf not in clusters]
    registries = _field(_field(config, "schemas"), "registries")
    if isinstance(registries, dict):
        unknown = sorted(str(name) for name in registries if name not in clusters)
        if unknown:
            problems.append((("schemas", "registries"), "ferry", f"unknown clusters {unknown} (known: {known})"))
    return problems


def _validation_error(title: str, problems: list[Problem]) -> ValidationError:
    """One :class:`ValidationError` holding every problem (pydantic keeps location and message)."""
    return ValidationError.from_exception_data(title, [
        InitErrorDetails(type=PydanticCustomError(kind, "{message}", {"message": message}), loc=loc, input=None)
        for loc, kind, message in problems])


class FerryConfig(_Strict):
    zookeeper: ZookeeperConfig
    """the ZooKeeper ensemble and the root of Ferry's nodes"""
    clusters: dict[str, dict[str, ClientValue]]
    """name -> librdkafka properties (security settings included), passed through as they are"""
    # The routes as written, plus (after validation) one per distributor of ``tree``.
    routes: list[RouteConfig] = Field(default_factory=list)
    """what is mirrored where: at least one route, or a tree"""
    tree: TreeConfig | None = None
    """Axual's distribution tree; its routes (one per distributor) are derived"""
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
        return {name: {key: Secret(item) if isinstance(item, str) and SECRET_PROPERTY.search(str(key)) else item
                       for key, item in props.items()} if isinstance(props, dict) else props
                for name, props in value.items()}

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
            object.__setattr__(self, "routes", [
                r if beat in r.include else r.model_copy(update={"include": [*r.include, beat]}) for r in self.routes])
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
        protected = [r for r in self.routes if r.loop_prevention and r.copy_level is None and topic_naming.is_identity(r)]
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


def start_position(value: Any) -> Literal["earliest", "latest"] | int | None:
    """A route's ``start``: earliest, latest, or a time as epoch milliseconds (from ISO 8601 or epoch ms)."""
    if value is None or value in ("earliest", "latest"):
        return value
    if isinstance(value, bool):
        raise ValueError(f"start must be earliest, latest, an ISO 8601 time or epoch milliseconds, not {value!r}")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        return int(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return int(moment.timestamp() * 1000)
    raise ValueError(f"start must be earliest, latest, an ISO 8601 time or epoch milliseconds, not {value!r}")


def validate_config(
    data: Any, origin: str = "config", env: Mapping[str, str] | None = None, read_file: Callable[[str], str] | None = None,
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
