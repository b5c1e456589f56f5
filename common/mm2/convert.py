"""MirrorMaker 2's properties mapped to Ferry's config (``ferry import-mm2``).

Pure: a dict of properties in, a config dict, the list of what was not converted and notes out; no
I/O, no clock. Every key of the input either lands somewhere in the output or is listed in
:attr:`Conversion.not_converted` with the reason, so nothing is dropped silently; what converts but
works differently in Ferry is said in :attr:`Conversion.notes` (a flow MirrorMaker 2 copies at least
once becomes a route Ferry copies exactly once, its default from 2.0.0).

MirrorMaker 2's rules followed here (``MirrorMakerConfig``, ``MirrorSourceConfig``,
``DefaultTopicFilter``, ``DefaultGroupFilter``): a flow ``A->B`` runs only with ``A->B.enabled =
true``; a setting ``A->B.<key>`` overrides the top-level ``<key>`` for that flow; ``<cluster>.<key>``
holds a cluster's client settings, and a top-level security setting applies to every cluster that
does not set its own; topic and group filters are comma-separated lists of Java regular
expressions matched against the whole name, as Ferry's ``include``/``exclude`` are.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ferry.common.mm2 import clients

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
# MirrorMaker 2's defaults (MirrorSourceConfig, MirrorCheckpointConfig, MirrorHeartbeatConfig,
# DefaultConfigPropertyFilter).
DEFAULTS = {
    "topics": ".*",
    "topics.exclude": r".*[\-\.]internal, .*\.replica, __.*",
    "groups": ".*",
    "groups.exclude": "console-consumer-.*, connect-.*, __.*",
    "replication.policy.class": DEFAULT_POLICY,
    "replication.policy.separator": ".",
    "replication.policy.internal.topic.separator.enabled": "true",
    "sync.group.offsets.enabled": "false",
    "sync.group.offsets.interval.seconds": "60",
    "emit.checkpoints.enabled": "true",
    "emit.checkpoints.interval.seconds": "60",
    "emit.heartbeats.enabled": "true",
    "emit.heartbeats.interval.seconds": "1",
    "refresh.topics.enabled": "true",
    "refresh.topics.interval.seconds": "600",
    "sync.topic.configs.enabled": "true",
    "sync.topic.configs.interval.seconds": "600",
    "sync.topic.acls.enabled": "true",
    "sync.topic.acls.interval.seconds": "600",
    "config.properties.exclude": (
        r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, "
        r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
        r"unclean\.leader\.election\.enable, min\.insync\.replicas"
    ),
    "offset-syncs.topic.location": "source",
}
# Deprecated names MirrorMaker 2 still reads when the new one is not set.
DEPRECATED = {
    "topics.blacklist": "topics.exclude",
    "groups.blacklist": "groups.exclude",
    "config.properties.blacklist": "config.properties.exclude",
}
# The replication factors of MirrorMaker 2's internal topics: Ferry's own topics (offset map, checkpoints,
# heartbeats) take one per cluster (internal_topics), the largest of those a flow to the cluster sets.
INTERNAL_REPLICATION_FACTORS = (
    "offset-syncs.topic.replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
)
# Client settings that apply to every cluster when given at the top level (MirrorClientConfig's CLIENT_CONFIG_DEF).
_TOP_LEVEL_CLIENT = re.compile(r"^(security\.protocol|sasl\..+|ssl\..+)$")
# Why MirrorMaker 2's own machinery has no counterpart in Ferry.
_NO_COUNTERPART = [
    (
        re.compile(r"^(offset|config|status)\.storage\.(topic|replication\.factor|partitions)$"),
        "Ferry keeps no Connect offsets, config or status topics: its state is in ZooKeeper and its source offsets in "
        "the consumer group ferry.<source>.<destination>",
    ),
    (re.compile(r"^tasks\.max$"), "Ferry's parallelism is its number of workers, balanced by the controller"),
    (re.compile(r"^(key|value|header)\.converter(\..*)?$"), "Ferry copies bytes as they are"),
    (
        re.compile(r"^(topic|group|config\.property)\.filter\.class$"),
        "a Java class; Ferry filters by regular expressions",
    ),
    (
        re.compile(r"^offset\.flush\.(interval|timeout)\.ms$"),
        "Connect's offset flush; Ferry commits what the destination acknowledged every worker.commit_interval_s",
    ),
    (
        re.compile(r"^offset-syncs\.topic\.location$"),
        "Ferry always writes an exact offset map; "
        "`ferry import-mm2 --takeover` reads MirrorMaker 2's offset syncs from there",
    ),
    (re.compile(r"^emit\.offset-syncs\.enabled$"), "Ferry always writes its exact offset map (__ferry_offset_map)"),
    (re.compile(r"^consumer\.poll\.timeout\.ms$"), "Ferry's copy loop polls without a pause"),
    (re.compile(r"^admin\.timeout\.ms$"), "Ferry's admin requests have deadlines of their own"),
    (re.compile(r"^add\.source\.alias\.to\.metrics$"), "Ferry's metrics carry the route as a label"),
    (re.compile(r"^use\.incremental\.alter\.configs$"), "Ferry's observer sets destination topic configs itself"),
    (re.compile(r"^(forwarding\.admin\.class|metric\.reporters)$"), "a Java class; Ferry exports Prometheus metrics"),
    (
        re.compile(r"^config\.providers(\..*)?$"),
        "Ferry reads its own secrets from files or environment variables (zookeeper.auth, controller.auth); "
        "write the resolved values into clusters",
    ),
    (
        re.compile(r"^replication\.policy\.internal\.topic\.separator\.enabled$"),
        "it names MirrorMaker 2's internal topics; Ferry's are __ferry_*",
    ),
    (
        re.compile(r"^(source|target)\.cluster\.alias$"),
        "MirrorMaker 2 sets it per flow; Ferry's routes name their clusters",
    ),
    (re.compile(r"^offset\.lag\.max$"), "Ferry maps every offset exactly (its offset map)"),
    (
        re.compile(r"^refresh\.groups\.(enabled|interval\.seconds)$"),
        "Ferry reads the groups at each checkpoint run (controller.checkpoint_interval_s)",
    ),
    (
        re.compile(r"^(dedicated\.mode\..*|listeners|rest\..*|admin\.listeners)$"),
        "Connect's REST server; Ferry's controller has its own (controller.rest_port)",
    ),
    (
        re.compile(r"^(exactly\.once\.support|transaction\.boundary)$"),
        "a Connect connector's transaction settings; a Ferry route's delivery_guarantee comes from "
        "<target>.exactly.once.source.support, and an exactly-once route commits a transaction per batch",
    ),
]
# Connect's worker setting that makes MirrorMaker 2 (3.5 and later, dedicated mode) write a flow in
# transactions: set per target cluster (``B.exactly.once.source.support``) or at the top level.
# ``preparing`` is the first step of MirrorMaker 2's two-step upgrade to ``enabled``: the intent is the same.
EXACTLY_ONCE_SOURCE_SUPPORT = "exactly.once.source.support"
EXACTLY_ONCE_VALUES = ("enabled", "preparing")
AT_LEAST_ONCE_NOTE = (
    "{routes}: MirrorMaker 2 copies {them} at least once (no {setting} = enabled for {targets}); Ferry copies "
    "a route exactly once by default from 2.0.0 (delivery_guarantee: exactly_once: Kafka transactions on the "
    "destination, each record once for read_committed consumers). To keep MirrorMaker 2's guarantee, set "
    "delivery_guarantee: at_least_once on {them}: no transactions (no transactional-id ACLs, no transaction "
    "markers among the destination's offsets, copies readable without waiting for a commit), but records "
    "copied twice when a worker dies or pauses past its session"
)


class Mm2Error(ValueError):
    """A MirrorMaker 2 config that cannot be converted at all (no clusters, a cluster without bootstrap.servers)."""


@dataclass(frozen=True)
class NotConverted:
    key: str
    value: str
    why: str

    def line(self) -> str:
        """The one stderr line ``ferry import-mm2`` prints for it."""
        return f"ferry import-mm2: not converted: {self.key}={self.value} ({self.why})"


@dataclass(frozen=True)
class Note:
    """Something converted that works differently in Ferry, to read before running it."""

    text: str

    def line(self) -> str:
        """The one stderr line ``ferry import-mm2`` prints for it."""
        return f"ferry import-mm2: note: {self.text}"


@dataclass
class Conversion:
    config: dict[str, Any]
    not_converted: list[NotConverted] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


def split_list(value: str) -> list[str]:
    """A Java ``ConfigDef`` list: comma-separated, blanks around the commas dropped, empty items dropped."""
    return [item for item in re.split(r"\s*,\s*", value.strip()) if item]


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


class _Reader:
    """The properties, with the keys read so far remembered (what is left is reported)."""

    def __init__(self, props: dict[str, str]) -> None:
        self.props = props
        self.used: set[str] = set()
        self.problems: list[NotConverted] = []

    def top(self, key: str) -> str:
        if key in self.props:
            self.used.add(key)
            return self.props[key]
        old = next((o for o, new in DEPRECATED.items() if new == key and o in self.props), None)
        if old:
            self.used.add(old)
            return self.props[old]
        return DEFAULTS.get(key, "")

    def flow(self, source: str, target: str, key: str) -> str:
        """``source->target.key``, else the top-level ``key`` (or its deprecated name), else MirrorMaker 2's default."""
        for name in (key, *(o for o, new in DEPRECATED.items() if new == key)):
            flow_key = f"{source}->{target}.{name}"
            if flow_key in self.props:
                self.used.add(flow_key)
                return self.props[flow_key]
        return self.top(key)

    def skip(self, key: str, why: str) -> None:
        self.used.add(key)
        self.problems.append(NotConverted(key, self.props[key], why))


def _patterns(reader: _Reader, source: str, target: str, key: str) -> list[str]:
    """A flow's filter list (``topics``, ``groups`` and their ``.exclude``): the regular expressions
    Python reads; the others are reported."""
    good = []
    for pattern in split_list(reader.flow(source, target, key)):
        try:
            re.compile(pattern)
            good.append(pattern)
        except re.error as exc:
            reader.problems.append(NotConverted(key, pattern, f"a Java regular expression Python cannot read: {exc}"))
    return good


def _clusters(reader: _Reader, names: list[str]) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """Each cluster's librdkafka properties, and the producer settings of each (their compression feeds routes)."""
    result: dict[str, dict[str, str]] = {}
    producers: dict[str, dict[str, str]] = {}
    top_level = {k: v for k, v in reader.props.items() if _TOP_LEVEL_CLIENT.match(k)}
    for name in names:
        prefix = f"{name}."
        own = {k[len(prefix) :]: v for k, v in reader.props.items() if k.startswith(prefix)}
        if "bootstrap.servers" not in own:
            raise Mm2Error(f"cluster {name!r} has no {name}.bootstrap.servers")
        props: dict[str, str] = {}
        common = {
            **top_level,
            **{
                k: v
                for k, v in own.items()
                if "." not in k or k.split(".", 1)[0] not in ("consumer", "producer", "admin")
            },
        }
        for key, value in common.items():
            full = f"{prefix}{key}" if key in own else key
            _client_setting(reader, full, key, value, "common", common, props)
        producers[name] = {}
        for kind in ("consumer", "producer", "admin"):
            settings = {k[len(kind) + 1 :]: v for k, v in own.items() if k.startswith(kind + ".")}
            for key, value in settings.items():
                full = f"{prefix}{kind}.{key}"
                if kind == "producer" and key == "compression.type":
                    reader.used.add(full)
                    producers[name][key] = value
                    continue
                _client_setting(reader, full, key, value, kind, {**common, **settings}, props)
        # Java trims the blanks around the commas; so does librdkafka, but the file reads better without them.
        props["bootstrap.servers"] = ",".join(split_list(props["bootstrap.servers"]))
        result[name] = props
    return result, producers


def _client_setting(
    reader: _Reader, full: str, key: str, value: str, kind: str, settings: dict[str, str], props: dict[str, str]
) -> None:
    if full in reader.used:
        translated = clients.translate(key, value, kind, settings)
        if isinstance(translated, dict):
            props.update(translated)
        return
    if _is_mm2_setting(key):
        return  # a cluster-scoped MirrorMaker 2 setting (e.g. B.offset.storage.topic): reported with the rest
    translated = clients.translate(key, value, kind, settings)
    if isinstance(translated, str):
        reader.skip(full, translated)
    else:
        reader.used.add(full)
        props.update(translated)


def _is_mm2_setting(key: str) -> bool:
    return (
        key in DEFAULTS
        or key in DEPRECATED
        or key in ("replication.factor", EXACTLY_ONCE_SOURCE_SUPPORT, *INTERNAL_REPLICATION_FACTORS)
        or any(p.match(key) for p, _ in _NO_COUNTERPART)
    )


def _replication_factor(reader: _Reader, key: str, value: str) -> int | None:
    """A replication factor MirrorMaker 2 was given (None: not given, or reported why not)."""
    if not value.strip():
        return None
    try:
        factor = int(value.strip())
    except ValueError:
        reader.problems.append(NotConverted(key, value, "not a number"))
        return None
    if factor < 1:
        reader.problems.append(
            NotConverted(
                key,
                value,
                "the broker's default.replication.factor; Ferry has no such choice: a copy gets its source "
                "topic's replica count, Ferry's own topics 3 (both at most one per broker)",
            )
        )
        return None
    return factor


def _internal_topics(reader: _Reader, flows: list[tuple[str, str]]) -> dict[str, Any]:
    """``internal_topics`` from MirrorMaker 2's internal topics' replication factors: the top-level ones'
    largest for every cluster, a flow's own (``A->B.<key>``) for its target; empty when none is set."""
    top_level = [key for key in INTERNAL_REPLICATION_FACTORS if key in reader.props]
    given = [_replication_factor(reader, key, reader.props[key]) for key in top_level]
    reader.used.update(top_level)
    top = max((factor for factor in given if factor is not None), default=None)
    section: dict[str, Any] = {} if top is None else {"replication_factor": top}
    per_cluster: dict[str, int] = {}
    for source, target in flows:
        own = [f"{source}->{target}.{key}" for key in INTERNAL_REPLICATION_FACTORS]
        factors = [_replication_factor(reader, key, reader.props[key]) for key in own if key in reader.props]
        reader.used.update(key for key in own if key in reader.props)
        found = [factor for factor in factors if factor is not None]
        if found:
            per_cluster[target] = max(per_cluster.get(target, 0), *found, top or 0)
    clusters = {name: factor for name, factor in sorted(per_cluster.items()) if factor != top}
    if clusters:
        section["clusters"] = clusters
    return section


def _on_cycle(routes: list[tuple[str, str]], route: tuple[str, str]) -> bool:
    """Whether ``route`` lies on a cycle of ``routes`` (its destination reaches its source)."""
    seen, frontier = {route[1]}, [route[1]]
    while frontier:
        cluster = frontier.pop()
        for source, destination in routes:
            if source == cluster and destination not in seen:
                seen.add(destination)
                frontier.append(destination)
    return route[0] in seen


def _global(reader: _Reader, flows: list[tuple[str, str]], key: str, pick: Callable[[list[str]], str]) -> str:
    """A setting Ferry has once for all routes: ``pick`` of the flows' values; a flow whose value differs is
    reported."""
    values = [reader.flow(s, t, key) for s, t in flows] or [reader.top(key)]
    chosen = pick(values)
    for (source, target), value in zip(flows, values, strict=False):
        flow_key = f"{source}->{target}.{key}"
        if value != chosen and flow_key in reader.props:
            reader.problems.append(
                NotConverted(flow_key, value, f"Ferry has one {key} for every route; {chosen} is used")
            )
    return chosen


def _any_true(values: list[str]) -> str:
    """``_global``'s pick for a switch: on when any flow has it on."""
    return "true" if any(map(_bool, values)) else "false"


def _shortest(values: list[str]) -> str:
    """``_global``'s pick for an interval in seconds: the shortest of the flows'."""
    return min(values, key=float)


def _internal_topic(reader: _Reader, name: str) -> str:
    """MirrorMaker 2's internal topic name ``mm2-offset-syncs.B.internal`` with the policy's separator."""
    separator = reader.top("replication.policy.separator")
    if not _bool(reader.top("replication.policy.internal.topic.separator.enabled")):
        separator = "."
    return name.replace(".", separator)


def convert(props: dict[str, str], zookeeper: str = "localhost:2181", takeover: bool = False) -> Conversion:
    """Ferry's config for MirrorMaker 2's ``props``; ``takeover``: each route starts where MirrorMaker 2 stopped."""
    reader = _Reader(props)
    names = split_list(reader.top("clusters"))
    if not names:
        raise Mm2Error("no clusters: a MirrorMaker 2 config names its clusters in `clusters = A, B`")
    for name in names:
        if not re.match(r"^[A-Za-z0-9_-]{1,64}$", name):
            raise Mm2Error(f"cluster alias {name!r}: Ferry's cluster names use only letters, digits, '_' and '-'")
    cluster_props, producers = _clusters(reader, names)
    flows = [(s, t) for s in names for t in names if s != t and _bool(reader.flow(s, t, "enabled"))]
    for s in names:
        for t in names:
            key = f"{s}->{t}.enabled"
            if s != t and key in props:
                reader.used.add(key)
    if not flows:
        raise Mm2Error("no flow is enabled: MirrorMaker 2 runs a flow A->B only with `A->B.enabled = true`")
    routes = [_route(reader, s, t, flows, producers, takeover) for s, t in flows]
    notes = _delivery_guarantees(reader, routes, names)
    config: dict[str, Any] = {"zookeeper": {"connect": zookeeper}, "clusters": cluster_props, "routes": routes}
    controller: dict[str, Any] = {}
    syncing = _global(reader, flows, "sync.group.offsets.enabled", _any_true)
    controller["sync_group_offsets"] = _bool(syncing)
    intervals = [
        float(_global(reader, flows, key, _shortest))
        for key in (
            "emit.checkpoints.interval.seconds",
            *(["sync.group.offsets.interval.seconds"] if _bool(syncing) else []),
        )
    ]
    controller["checkpoint_interval_s"] = min(intervals)
    observe = [
        float(_global(reader, flows, key, _shortest))
        for key in ("refresh.topics.interval.seconds", "sync.topic.configs.interval.seconds")
    ]
    controller["observer_interval_s"] = min(observe)
    acl_flows = [(s, t) for s, t in flows if _bool(reader.flow(s, t, "sync.topic.acls.enabled"))]
    if acl_flows:
        interval = _global(reader, acl_flows, "sync.topic.acls.interval.seconds", _shortest)
        controller["acl_sync_interval_s"] = float(interval)
    for source, target in flows:  # read: a flow that syncs no ACLs has no use for its interval
        reader.flow(source, target, "sync.topic.acls.interval.seconds")
    if not _bool(_global(reader, flows, "refresh.topics.enabled", _any_true)):
        reader.problems.append(
            NotConverted(
                "refresh.topics.enabled",
                "false",
                "Ferry's observer always follows new topics; its include patterns decide which",
            )
        )
    config["controller"] = controller
    internal = _internal_topics(reader, flows)
    if internal:
        config["internal_topics"] = internal
    if _bool(_global(reader, flows, "emit.heartbeats.enabled", _any_true)):
        interval = _global(reader, flows, "emit.heartbeats.interval.seconds", _shortest)
        config["heartbeats"] = {"interval_s": float(interval)}
    for key in sorted(set(props) - reader.used):
        reader.skip(key, _why_not(key))
    return Conversion(config, reader.problems, notes)


def _delivery_guarantees(reader: _Reader, routes: list[dict[str, Any]], clusters: list[str]) -> list[Note]:
    """Each route whose target MirrorMaker 2 writes with ``exactly.once.source.support`` enabled (or
    preparing) gets ``delivery_guarantee: exactly_once``; the others keep Ferry's default, which a note
    compares with MirrorMaker 2's at least once."""
    for key in (EXACTLY_ONCE_SOURCE_SUPPORT, *(f"{name}.{EXACTLY_ONCE_SOURCE_SUPPORT}" for name in clusters)):
        if key in reader.props:
            reader.used.add(key)
            value = reader.props[key].strip().lower()
            if value not in (*EXACTLY_ONCE_VALUES, "disabled"):
                reader.problems.append(
                    NotConverted(key, reader.props[key], "MirrorMaker 2 takes enabled, preparing or disabled")
                )
    at_least_once = []
    for route in routes:
        target = route["destination"]
        own = f"{target}.{EXACTLY_ONCE_SOURCE_SUPPORT}"
        chosen = reader.props.get(own) if own in reader.props else reader.props.get(EXACTLY_ONCE_SOURCE_SUPPORT)
        if chosen is not None and chosen.strip().lower() in EXACTLY_ONCE_VALUES:
            route["delivery_guarantee"] = "exactly_once"
        else:
            at_least_once.append(route)
    if not at_least_once:
        return []
    names = [f"{route['source']}.{route['destination']}" for route in at_least_once]
    targets = sorted({route["destination"] for route in at_least_once})
    text = AT_LEAST_ONCE_NOTE.format(
        routes=f"route{'s' if len(names) > 1 else ''} {', '.join(names)}",
        them="them" if len(names) > 1 else "it",
        setting=EXACTLY_ONCE_SOURCE_SUPPORT,
        targets=", ".join(targets),
    )
    return [Note(text)]


def _why_not(key: str) -> str:
    bare = key.split("->", 1)[1].split(".", 1)[1] if "->" in key else key
    for candidate in (
        bare,
        bare.split(".", 1)[-1],
    ):  # the setting itself, or one scoped to a cluster (B.offset.flush.interval.ms)
        for pattern, why in _NO_COUNTERPART:
            if pattern.match(candidate):
                return why
    if "->" in key:
        return (
            "its flow is not enabled"
            if bare in DEFAULTS or bare in DEPRECATED or bare == "enabled"
            else "no Ferry counterpart"
        )
    return "no Ferry counterpart"


def _route(
    reader: _Reader,
    source: str,
    target: str,
    flows: list[tuple[str, str]],
    producers: dict[str, dict[str, str]],
    takeover: bool,
) -> dict[str, Any]:
    route: dict[str, Any] = {"source": source, "destination": target}
    route["include"] = _patterns(reader, source, target, "topics")
    exclude = _patterns(reader, source, target, "topics.exclude")
    policy = reader.flow(source, target, "replication.policy.class").strip()
    separator = reader.flow(source, target, "replication.policy.separator")
    if policy == IDENTITY_POLICY:
        route["naming"] = "identity"
        if _on_cycle(flows, (source, target)):
            route["loop_prevention"] = True
    else:
        if policy != DEFAULT_POLICY:
            reader.problems.append(
                NotConverted(
                    "replication.policy.class",
                    policy,
                    "a custom policy: Ferry names topics identity, prefix or by a template; prefix used",
                )
            )
        if separator == ".":
            route["naming"] = "prefix"
        elif re.fullmatch(r"[A-Za-z0-9._-]+", separator):
            route["naming"] = f"{{source}}{separator}{{topic}}"
            # MirrorMaker 2's cycle rule, which Ferry's prefix naming has built in: never mirror a
            # topic back to a cluster its prefix chain names.
            sep, dest = re.escape(separator), re.escape(target)
            exclude.append(f"(?:.*{sep})?{dest}{sep}.*")
        else:
            route["naming"] = "prefix"
            reader.problems.append(
                NotConverted(
                    "replication.policy.separator",
                    separator,
                    "Ferry's topic names allow only letters, digits, '.', '_' and '-' around the topic; '.' used",
                )
            )
    route["exclude"] = exclude
    key = f"{source}->{target}.replication.factor"
    factor = _replication_factor(
        reader, key if key in reader.props else "replication.factor", reader.flow(source, target, "replication.factor")
    )
    if factor is not None:
        route["replication_factor"] = factor
    if _bool(reader.flow(source, target, "emit.checkpoints.enabled")):
        route["groups"] = _patterns(reader, source, target, "groups")
        route["groups_exclude"] = _patterns(reader, source, target, "groups.exclude")
    else:
        for key in ("groups", "groups.exclude"):
            reader.flow(source, target, key)  # read: no checkpoints, so no groups
    if _bool(reader.flow(source, target, "sync.topic.configs.enabled")):
        excluded = []
        for pattern in split_list(reader.flow(source, target, "config.properties.exclude")):
            name = pattern.replace("\\.", ".")
            if re.fullmatch(r"[a-z0-9.-]+", name):
                excluded.append(name)
            else:
                reader.problems.append(
                    NotConverted(
                        "config.properties.exclude",
                        pattern,
                        "Ferry's config_exclude names configs, it takes no regular expressions",
                    )
                )
        route["config_exclude"] = excluded
    else:
        reader.problems.append(
            NotConverted(
                "sync.topic.configs.enabled",
                "false",
                f"route {source}.{target}: Ferry always follows topic configs; list the ones "
                "to keep apart in config_exclude",
            )
        )
    # MirrorMaker 2 copies topic ACLs only, without WRITE, and turns ALLOW ALL into READ; Ferry copies READ
    # and DESCRIBE, on the route's groups too (docs/security.md).
    route["sync_acls"] = _bool(reader.flow(source, target, "sync.topic.acls.enabled"))
    compression = producers.get(target, {}).get("compression.type")
    if compression in ("none", "gzip", "snappy", "lz4", "zstd"):
        route["compression"] = compression
    elif compression is not None:
        reader.problems.append(
            NotConverted(f"{target}.producer.compression.type", compression, "librdkafka has no such codec")
        )
    if takeover:
        location = reader.flow(source, target, "offset-syncs.topic.location")
        offsets_topic = reader.props.get("offset.storage.topic") or reader.props.get(f"{target}.offset.storage.topic")
        for key in ("offset.storage.topic", f"{target}.offset.storage.topic"):
            if key in reader.props:
                reader.used.add(key)
        route["mirrormaker2"] = {
            "source_alias": source,
            "target_alias": target,
            "offsets_topic": offsets_topic or f"mm2-offsets.{source}.internal",
            "offset_syncs_topic": _internal_topic(reader, f"mm2-offset-syncs.{target}.internal"),
            "offset_syncs_on": "destination" if location.strip().lower() == "target" else "source",
            "checkpoints_topic": _internal_topic(reader, f"{source}.checkpoints.internal"),
        }
    return route
