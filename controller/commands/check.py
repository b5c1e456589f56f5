"""``ferry check --config FILE [--connect] [--timeout S]``: is this config usable, before any server starts?

Without ``--connect`` nothing is reached: every problem of the file is listed at once
(:mod:`common.preflight.config_check`: placeholders, the schema and its cross-field checks, librdkafka's
verdict on each cluster's properties for its roles; then the REST tokens as the controller checks
them at start); exit 2 when there is any, else 0. A file that declares a newer ``config_version``
than this release knows may hold keys it does not know: each is a ``WARN`` line (left out, as every
process of this release leaves it out), no problem.

With ``--connect`` a valid config is then tried against every endpoint with its configured
credentials, one line each (``ok`` or ``FAIL`` and the reason; never a traceback), each bounded
by ``--timeout``; exit 1 when any fails:

- each Kafka cluster: a metadata request through an admin client (TLS and SASL included);
- ZooKeeper: a session with the digest credentials (with ``zookeeper.tls``, a TLS handshake first:
  a certificate its CA does not trust is named); the ACL on ``zookeeper.root`` (when it exists) must
  grant Ferry's identity;
- each schema registry: its subject list, with its basic auth.

- each route with ``include`` whose source answered: the topics it mirrors, and those it leaves out
  as other systems' internal topics (``exclude_internal``, :mod:`common.preflight.route_topics`);
- each route whose clusters both answered: a warning (``WARN``, no failure) when a copy has, or would
  get, fewer replicas than its source topic (:mod:`common.preflight.replicas`);
- each exactly-once route whose destination answered: the destination brokers' transaction settings
  (``transaction.state.log.replication.factor`` and ``.min.isr`` against the broker count, read with
  ``describe_configs``): a failure when transactions cannot start, a warning for a min.isr of 1 with
  more brokers (:mod:`common.preflight.transactions`). Describing broker configs needs
  ``DescribeConfigs`` on the cluster: a refusal says it could not be checked (``----``);
- each cluster that answered, has a SASL user and that Ferry needs Kafka ACLs on: whether it grants
  Ferry's principal (its ``sasl.username``) every ACL ``ferry acls`` prints. Describing ACLs needs
  ``Describe`` on the cluster, which Ferry's own principal does not have under least privilege: such
  a cluster's line says it could not be checked (``----``), which is no failure;
- each exactly-once route, on each such destination: whether Ferry's principal has ``Write`` and
  ``Describe`` on the route's transactional ids (prefixed ``ferry.<route>.``), from the same answer.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import ConfigResource, ResourceType
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.security import make_digest_acl_credential

from ferry.common.config import FerryConfig, RegistryConfig, RouteConfig, ZookeeperConfig
from ferry.common.core.topics.replicas import replica_count
from ferry.common.errors import ConfigError, FerryError, UnreachableError
from ferry.common.kafka import clients as kafka_clients
from ferry.common.placeholders import Secret
from ferry.common.preflight import acls as acl_rules
from ferry.common.preflight import grants as acl_check
from ferry.common.preflight import replicas as replica_check
from ferry.common.preflight import route_topics
from ferry.common.preflight import transactions as transaction_check
from ferry.common.preflight.config_check import EndpointResult, check_file
from ferry.common.zk.layout import connect, make_client
from ferry.controller.api.auth import load_tokens
from ferry.controller.schemas.registry import RegistryClient

_SILENT = logging.getLogger("ferry.check.kafka")
_SILENT.setLevel(logging.CRITICAL + 1)
_SILENT.propagate = False
# librdkafka's generic verdicts: a specific one (authentication, TLS) from error_cb says more.
_GENERIC = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "check", help="check a config file: every problem at once; --connect: reach every server"
    )
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument(
        "--connect",
        action="store_true",
        help="also reach every Kafka cluster, ZooKeeper and schema registry with the configured credentials",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per endpoint with --connect (default 10)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.timeout <= 0:
        raise FerryError("--timeout must be a positive number of seconds")
    ignored: list[str] = []  # keys of a newer config format, left out as every process leaves them out
    config, problems = check_file(args.config, ignored)
    if config is not None and config.controller.auth is not None:
        try:  # what the controller checks of its tokens when it starts (length, characters, duplicates)
            load_tokens(config.controller.auth)
        except ConfigError as exc:
            config, problems = None, [*problems, str(exc)]
    if config is None:  # every problem on its own line: the point of this command (others say one line)
        print(f"ferry: {args.config} is invalid:", *(f"  {problem}" for problem in problems), sep="\n", file=sys.stderr)
        for line in ignored:
            print(f"WARN  {line}", file=sys.stderr)
        return 2
    print(f"{args.config}: ok")
    for line in ignored:
        print(f"WARN  {line}", flush=True)
    if not args.connect:
        return 0
    failed = False
    for result in connect_results(config, args.timeout):
        print(result.line(), flush=True)
        failed = failed or result.ok is False
    return 1 if failed else 0


def connect_results(config: FerryConfig, timeout_s: float) -> Iterator[EndpointResult]:
    """One result per endpoint, as each is tried: clusters, routes' replicas (warnings only), exactly-once
    routes' transaction settings, ZooKeeper, registries, then ACLs (exactly-once routes' transactional
    ids last)."""
    answered = []
    reachable = []
    for name, props in config.clusters.items():
        result = kafka_result(name, props, timeout_s)
        if result.ok:
            reachable.append(name)
            if props.get("sasl.username"):
                answered.append(name)
        yield result
    yield from topic_results(config, reachable, timeout_s)
    yield from replica_results(config, reachable, timeout_s)
    yield from transaction_results(config, reachable, timeout_s)
    yield zookeeper_result(config.zookeeper, timeout_s)
    for name, registry in config.schemas.registries.items() if config.schemas else []:
        yield registry_result(name, registry, timeout_s)
    grants = acl_check.check_granted(config, clusters=answered)
    yield from acl_results(grants)
    yield from transactional_id_results(config, grants)


def topic_results(config: FerryConfig, clusters: list[str], timeout_s: float) -> Iterator[EndpointResult]:
    """Per route with ``include`` whose source (one of ``clusters``) answered: the topics it mirrors and the
    internal ones it leaves out (:func:`common.preflight.route_topics.summary`)."""
    listed: dict[str, list[str] | None] = {}
    for route in config.routes:
        if not route.include or route.source not in clusters:
            continue
        if route.source not in listed:
            try:
                admin = kafka_clients.admin(config.clusters[route.source], logger=_SILENT)
                listed[route.source] = list(admin.list_topics(timeout=timeout_s).topics)
            except KafkaException:
                listed[route.source] = None  # it stopped answering: its own line said so
        topics = listed[route.source]
        if topics is not None:
            yield EndpointResult(
                endpoint=f"route {route.name} topics", ok=True, detail=route_topics.summary(route, topics)
            )


def replica_results(config: FerryConfig, clusters: list[str], timeout_s: float) -> Iterator[EndpointResult]:
    """A warning per route (both of whose ``clusters`` answered) where a copy has or would get fewer
    replicas than its source topic; nothing for a route where none would."""
    seen: dict[str, tuple[dict[str, int], int] | None] = {}

    def replicas(cluster: str) -> tuple[dict[str, int], int] | None:
        """Topic -> replica count on ``cluster``, and its broker count; None when it stopped answering."""
        if cluster not in seen:
            try:
                admin = kafka_clients.admin(config.clusters[cluster], logger=_SILENT)
                metadata = admin.list_topics(timeout=timeout_s)
            except KafkaException:
                seen[cluster] = None
            else:
                topics = {
                    name: replica_count(len(p.replicas) for p in topic.partitions.values())
                    for name, topic in metadata.topics.items()
                    if topic.error is None
                }
                seen[cluster] = (topics, len(metadata.brokers))
        return seen[cluster]

    for route in config.routes:
        if route.source not in clusters or route.destination not in clusters:
            continue
        source, destination = replicas(route.source), replicas(route.destination)
        if source is None or destination is None:
            continue
        brokers = destination[1]
        found = replica_check.fewer_replicas(route, source[0], destination[0], brokers)
        if found:
            yield EndpointResult(
                endpoint=f"route {route.name} replicas",
                ok=True,
                detail=replica_check.warning(route, found, brokers),
                warning=True,
            )


def _exactly_once_destinations(config: FerryConfig) -> Iterator[tuple[RouteConfig, str]]:
    """(route, destination) for every exactly-once route and every cluster it may write to."""
    for route in config.routes:
        if route.exactly_once:
            for destination in acl_rules.destinations(config, route):
                yield route, destination


def transaction_results(config: FerryConfig, clusters: list[str], timeout_s: float) -> Iterator[EndpointResult]:
    """Per exactly-once route, per destination of ``clusters`` (those that answered): whether its brokers'
    transaction settings let transactions start."""
    seen: dict[str, transaction_check.Verdict | str] = {}
    for route, destination in _exactly_once_destinations(config):
        if destination not in clusters:
            continue
        if destination not in seen:
            seen[destination] = _transaction_verdict(destination, config.clusters[destination], timeout_s)
        verdict = seen[destination]
        endpoint = f"route {route.name} transactions on {destination}"
        if isinstance(verdict, str):
            yield EndpointResult(endpoint=endpoint, ok=None, detail=f"not checked: {verdict}")
        else:
            level = verdict.level
            yield EndpointResult(
                endpoint=endpoint,
                ok=level != transaction_check.ERROR,
                detail=verdict.detail,
                warning=level == transaction_check.WARNING,
            )


def _transaction_verdict(cluster: str, props: dict[str, Any], timeout_s: float) -> transaction_check.Verdict | str:
    """The verdict on ``cluster``'s transaction settings, or why they could not be read."""
    try:
        admin = kafka_clients.admin(props, logger=_SILENT)
        brokers = sorted(admin.list_topics(timeout=timeout_s).brokers)
        resources = [ConfigResource(ResourceType.BROKER, str(broker)) for broker in brokers]
        futures = admin.describe_configs(resources, request_timeout=timeout_s) if resources else {}
        settings = {}
        for resource, future in futures.items():
            entries = future.result(timeout=timeout_s)
            settings[int(resource.name)] = {
                name: None if name not in entries else entries[name].value for name in transaction_check.SETTINGS
            }
    except KafkaException as exc:
        return f"cannot describe the brokers' configs (that needs DescribeConfigs on the cluster): {_text(exc)}"
    except TimeoutError:
        return f"no answer with the brokers' configs within {timeout_s:g}s"
    if not any(value is not None for shown in settings.values() for value in shown.values()):
        return "the brokers showed none of their transaction settings (that needs DescribeConfigs on the cluster)"
    return transaction_check.settings_verdict(cluster, settings, len(brokers))


def acl_results(granted: dict[str, acl_check.ClusterGrants]) -> Iterator[EndpointResult]:
    """Per cluster asked (those that answered, with a SASL user, that need ACLs): granted, missing (how
    many), or not checked (why)."""
    for cluster, grants in sorted(granted.items()):
        endpoint = f"kafka {cluster} ACLs" + (f" of {grants.principal}" if grants.principal else "")
        if grants.error is not None:
            yield EndpointResult(endpoint=endpoint, ok=None, detail=f"not checked: {grants.error}")
        elif grants.missing:
            yield EndpointResult(
                endpoint=endpoint, ok=False, detail=f"{len(grants.missing)} missing: grant what `ferry acls` prints"
            )
        else:
            yield EndpointResult(endpoint=endpoint, ok=True, detail="every ACL Ferry needs is granted")


def transactional_id_results(
    config: FerryConfig, granted: dict[str, acl_check.ClusterGrants]
) -> Iterator[EndpointResult]:
    """Per exactly-once route, per destination asked for its ACLs (``granted``): whether Ferry's
    principal may write in transactions there with the route's transactional ids, or why it could not
    be checked. No line for a destination not asked (no SASL user, or it did not answer), as for the
    other ACLs."""
    for route, destination in _exactly_once_destinations(config):
        grants = granted.get(destination)
        if grants is None:
            continue
        endpoint = f"route {route.name} transactional-id ACLs on {destination}"
        if grants.error is not None:
            yield EndpointResult(endpoint=endpoint, ok=None, detail=f"not checked: {grants.error}")
            continue
        verdict = transaction_check.acl_verdict(route, grants.missing, destination)
        yield EndpointResult(endpoint=endpoint, ok=verdict.level != transaction_check.ERROR, detail=verdict.detail)


def kafka_result(name: str, props: dict[str, Any], timeout_s: float) -> EndpointResult:
    servers = props.get("bootstrap.servers")
    endpoint = f"kafka {name}" + ("" if isinstance(servers, Secret) else f" ({servers})")
    reported: list[KafkaError] = []
    try:
        admin = kafka_clients.admin(props, logger=_SILENT, error_cb=reported.append)
    except KafkaException as exc:  # `ferry check` without --connect names the property
        return EndpointResult(endpoint=endpoint, ok=False, detail=f"cannot build a client: {_text(exc)}")
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(min(1.0, timeout_s))  # error_cb runs from poll()
        specific = [error for error in reported if error.code() not in _GENERIC]
        reason = specific[-1].str() if specific else _text(exc)
        return EndpointResult(
            endpoint=endpoint, ok=False, detail=f"no answer within {timeout_s:g}s: {reason}" if not specific else reason
        )
    brokers = len(metadata.brokers)
    return EndpointResult(
        endpoint=endpoint,
        ok=True,
        detail=f"{brokers} broker{'s' if brokers != 1 else ''}, {len(metadata.topics)} topics",
    )


def _text(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def zookeeper_result(zookeeper: ZookeeperConfig, timeout_s: float) -> EndpointResult:
    """A session as Ferry's processes open it (:func:`common.zk.layout.connect`: with ``zookeeper.tls``
    a TLS handshake first, whose refusal is named), then the ACL on ``zookeeper.root``."""
    endpoint = f"zookeeper {zookeeper.connect} ({zookeeper.root})"
    config = zookeeper.model_copy(update={"retry_deadline_s": timeout_s})
    try:
        client = make_client(config)
    except ConfigError as exc:  # a TLS file that cannot be read
        return EndpointResult(endpoint=endpoint, ok=False, detail=str(exc))
    kazoo_logger = logging.getLogger("kazoo")
    level = kazoo_logger.level
    kazoo_logger.setLevel(logging.CRITICAL)  # its connection warnings would repeat the one line below
    try:
        try:
            connect(client, config)
        except ConfigError as exc:  # a TLS handshake refused, or the digest credentials
            return EndpointResult(endpoint=endpoint, ok=False, detail=str(exc))
        except UnreachableError:
            return EndpointResult(endpoint=endpoint, ok=False, detail=f"no session within {timeout_s:g}s")
        root = zookeeper.root
        user, password = zookeeper.auth.credentials() if zookeeper.auth else ("", "")
        refused = EndpointResult(
            endpoint=endpoint,
            ok=False,
            detail=f"the ACL on {root} does not grant user {user!r} with this "
            "password (a wrong password, or nodes created by another identity)",
        )
        try:
            if client.exists(root) is None:
                return EndpointResult(
                    endpoint=endpoint, ok=True, detail=f"session open; {root} does not exist yet (Ferry creates it)"
                )
            if zookeeper.auth is None:
                children = client.get_children(root)
                return EndpointResult(
                    endpoint=endpoint, ok=True, detail=f"session open; {len(children)} nodes under {root}"
                )
            acls, _ = client.get_acls(root)
        except NoAuthError:
            if zookeeper.auth is None:
                return EndpointResult(
                    endpoint=endpoint, ok=False, detail=f"not allowed to read {root} (it needs zookeeper.auth)"
                )
            return refused
        identity = make_digest_acl_credential(user, password)
        if not any(acl.id.scheme == "digest" and acl.id.id == identity for acl in acls):
            return refused
        return EndpointResult(
            endpoint=endpoint, ok=True, detail=f"authenticated as {user!r}; the ACL on {root} grants it"
        )
    except KazooException as exc:
        return EndpointResult(endpoint=endpoint, ok=False, detail=f"{type(exc).__name__} {exc}".strip())
    finally:
        client.stop()
        client.close()
        kazoo_logger.setLevel(level)


def registry_result(name: str, registry: RegistryConfig, timeout_s: float) -> EndpointResult:
    endpoint = f"registry {name} ({registry.base_url})"
    client = RegistryClient(
        name=name, config=registry.model_copy(update={"timeout_s": timeout_s}), retry_deadline_s=timeout_s
    )
    try:
        subjects = client.subjects()
    except FerryError as exc:
        return EndpointResult(endpoint=endpoint, ok=False, detail=str(exc))
    finally:
        client.close()
    return EndpointResult(endpoint=endpoint, ok=True, detail=f"{len(subjects)} subjects")
