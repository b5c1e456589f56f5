"""The embedded local stack: a real ZooKeeper and two or more single-node Apache Kafka clusters (KRaft),
and optionally one schema registry per cluster (Apicurio Registry, Confluent-compatible API).

``ferry dev up [--registries] | down | status``. Everything listens on loopback only; state, data and logs
live under ``.dev/`` (``FERRY_DEV_DIR``; default ``<checkout>/.dev`` in a source checkout, ``./.dev``
of the current directory for an installed Ferry), the jars under ``$FERRY_DEV_DIR/jars/``
(``FERRY_JARS_DIR`` points elsewhere: an installed Ferry uses it to find jars that ``make setup``
fetched from the pinned ``deploy/pom.xml``).

Ports come from the environment. Every default lies below Linux's ephemeral range (32768-60999):
a port in that range may be the local end of any outgoing connection, for as long as it lasts, and
a broker could not bind it then.

========================  =======  ============================================
variable                  default  what
========================  =======  ============================================
``FERRY_DEV_ZK_PORT``     2181     ZooKeeper client port (TLS, with ``FERRY_DEV_ZK_TLS=1``: +1)
``FERRY_DEV_SRC_PORT``    19092    cluster ``src`` broker port (its KRaft controller: +1, SASL_SSL: +2)
``FERRY_DEV_DST_PORT``    29092    cluster ``dst`` broker port (its KRaft controller: +1, SASL_SSL: +2)
``FERRY_DEV_CLUSTERS``    (none)   extra clusters beyond ``src`` and ``dst``, comma-separated (``a,b,c``);
                                   ``name:N`` gives one N brokers (1-3, e.g. ``a:3,b``), ``name:VERSION``
                                   an older Kafka (``old:kafka-2.8``, below)
``FERRY_DEV_EXTRA_PORT``  30092    broker port of the first extra cluster; the n-th (from 0) listens on
                                   this + 10 n (its KRaft controller: +1, SASL_SSL: +2; its k-th broker
                                   from 0: + 3 k)
``FERRY_DEV_PORT_<NAME>`` (above)  one extra cluster's broker port, e.g. ``FERRY_DEV_PORT_A=30192``
``FERRY_DEV_EXTRA_HEAP``  256m     heap of each extra cluster's JVM (Serial GC: 2 cores, many JVMs)
``FERRY_DEV_SRC_REGISTRY_PORT``  18081  schema registry of ``src`` (with ``--registries``)
``FERRY_DEV_DST_REGISTRY_PORT``  28081  schema registry of ``dst`` (with ``--registries``)
========================  =======  ============================================

Extra clusters (``ferry dev up --clusters a,b`` or ``FERRY_DEV_CLUSTERS``) are started only when
asked; ``up`` records them in ``.dev/extra-clusters`` so that ``ferry dev status`` and ``ferry dev
down`` know them without being told again (a later plain ``up`` starts only ``src`` and ``dst``).
The n-th extra cluster of a list gets the n-th port: keep the order, or pin ports per name. Their
names follow Ferry's cluster names (``[A-Za-z0-9_-]``); ``src``, ``dst`` and ``zookeeper`` are taken.

An extra cluster may have up to three brokers (``ferry dev up --clusters a:3``, or
``Stack.with_clusters(names, brokers=3)``), each a JVM of its own: its first broker is also the
cluster's one KRaft controller (a quorum of one), the others are brokers only. The k-th broker (from
0) listens on the cluster's port + 3 k (SASL_SSL: + 2 more) and keeps its state in
``.dev/<name>.<k + 1>`` (the first: ``.dev/<name>``). Like ``src`` and ``dst`` they keep
``default.replication.factor=1``: what a replica count other than one takes is chosen by the client.

An extra cluster may run an older Kafka release (``ferry dev up --clusters old:kafka-3.9``, with
several brokers ``old:3:kafka-3.9``, or ``Stack.with_clusters(names, version="kafka-2.8")``): the
``deploy/pom.xml`` profile of that name, whose jars ``make setup`` fetches into ``.dev/jars/<version>``.
``kafka-3.9`` runs in KRaft mode (a static quorum: ``controller.quorum.voters``); ``kafka-2.8`` in
ZooKeeper mode, its metadata under ``/kafka-<name>`` in the stack's ZooKeeper (wipe ``.dev/zookeeper``
and that cluster's folder together). Both log through log4j 1 (a ``log4j.properties`` in the broker's
folder, the same file and format as ``log4j2.xml``). ``src`` and ``dst`` run the pinned release.

Each broker serves two client listeners: ``PLAINTEXT`` on its port, and ``SASL_SSL`` on port + 2
(SCRAM-SHA-512, user ``ferry``, password ``ferry-dev-secret``: a local test identity, not a secret).
The TLS material is generated once with ``openssl`` into ``.dev/tls/`` and reused while present:
a CA (``ca.pem``, what clients trust: ``ssl.ca.location``) and one broker certificate for
``127.0.0.1``/``localhost`` signed by it, in a PKCS12 keystore (``broker.p12``). The SCRAM user is
created by ``up`` through the PLAINTEXT listener when the broker does not know it yet, so a stack
formatted before the secured listener existed comes up with it too. :meth:`Stack.secured` gives a
client's librdkafka properties for the secured listener.

With ``FERRY_DEV_ZK_TLS=1``, ZooKeeper serves TLS too, on its port + 1 (``secureClientPort``), with the same
CA and a PEM copy of the broker's certificate and key (``zookeeper.pem``): a client trusts ``ca.pem``
(``zookeeper.tls.ca_location``); a client certificate signed by that CA is checked when sent, not required.
The listener is written into ``zoo.cfg`` when ZooKeeper starts: a ZooKeeper started without it keeps running
without it.

Extra clusters may enforce ACLs (``ferry dev up --clusters a,b --authorizer``, or
``Stack.with_clusters(names, authorizer=True)``): KRaft's ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``, so the SASL_SSL user ``ferry`` may do only what ACLs
grant it. The PLAINTEXT listener (``User:ANONYMOUS``, which the broker's own controller and
inter-broker traffic use too) is the super user: the administrator's and the tests' way in. The
choice is written into the broker's config when it starts; stop the cluster to change it.

The registries run only when asked: ``ferry dev up --registries`` or ``FERRY_DEV_REGISTRIES=1``
(the schema tests start them). They keep their schemas in memory: a restart starts empty. Their
app is built by ``make registry`` (part of ``make setup``) from the pinned ``deploy/registry``.

States of one server (``ServerState``), as ``up`` and ``down`` move it::

    STOPPED --up--> STARTING --answers--> RUNNING --down--> STOPPED
                       |
                       +--exits or deadline--> FAILED (the error names the server and its log)

A server is ours when its pid file names a live process whose command line carries our config
file; ``down`` signals only such processes (SIGTERM, then SIGKILL after a grace period).

Restarts. ``up`` and ``down`` hold an exclusive lock on ``<dev dir>/stack.lock``, so two of them
never start the same server twice (the loser would fail to bind, and overwrite the winner's pid
file). A process killed with ``kill -9`` does not vanish at once: it may still look alive when
``up`` looks, and hold its ports for a moment after it stopped looking alive. So ``up`` restarts
a server whose process vanishes while ``up`` waits for it (it reports "exited while starting"
only for a process it started itself), and starts a server only once its ports are free.
Reading state (``status``) never removes a pid file; only ``up`` and ``down`` do, under the lock.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import enum
import errno
import fcntl
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from ferry.common.errors import DevStackError
from ferry.common.paths import DEV_DIR_ENV as DEV_DIR_ENV
from ferry.common.paths import JARS_DIR_ENV as JARS_DIR_ENV
from ferry.common.paths import REPO_ROOT as REPO_ROOT
from ferry.common.paths import dev_dir as dev_dir
from ferry.common.paths import jars_dir as jars_dir
from ferry.common.tables import print_table
from ferry.devstack import support

ZK_PORT_ENV = "FERRY_DEV_ZK_PORT"
ZK_TLS_ENV = "FERRY_DEV_ZK_TLS"
SRC_PORT_ENV = "FERRY_DEV_SRC_PORT"
DST_PORT_ENV = "FERRY_DEV_DST_PORT"
SRC_REGISTRY_PORT_ENV = "FERRY_DEV_SRC_REGISTRY_PORT"
DST_REGISTRY_PORT_ENV = "FERRY_DEV_DST_REGISTRY_PORT"
REGISTRIES_ENV = "FERRY_DEV_REGISTRIES"
CLUSTERS_ENV = "FERRY_DEV_CLUSTERS"
EXTRA_PORT_ENV = "FERRY_DEV_EXTRA_PORT"
EXTRA_HEAP_ENV = "FERRY_DEV_EXTRA_HEAP"
EXTRA_PORT_STEP = 10
# A broker's ports within its cluster's: PLAINTEXT, the KRaft controller (the first broker only), SASL_SSL.
BROKER_PORT_STEP = 3
MAX_BROKERS = EXTRA_PORT_STEP // BROKER_PORT_STEP
_EXTRA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# The secured listener's identity: a fixed, documented test user of the local stack only.
SASL_MECHANISM = "SCRAM-SHA-512"
SASL_USER = "ferry"
SASL_PASSWORD = "ferry-dev-secret"
# Clusters started with an authorizer: the PLAINTEXT listener's principal is the super user.
AUTHORIZER_CLASS = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ZK_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"  # a cluster in ZooKeeper mode
SUPER_USER = "User:ANONYMOUS"
# Protects only the broker keystore on this machine's disk; Kafka needs a password for PKCS12.
_KEYSTORE_PASSWORD = "ferry-dev-keystore"

# Shipped inside the package (package data), so an installed Ferry has it too.
LOG4J2_CONFIG = Path(__file__).resolve().parent / "log4j2.xml"


@dataclass(frozen=True)
class KafkaVersion:
    """A Kafka release the stack's clusters can run: its ``deploy/pom.xml`` profile, which is also the
    name of its jar folder, and what its broker's configuration and start-up need."""

    name: str
    kraft: bool  # KRaft mode; otherwise ZooKeeper mode, its metadata under a chroot of the stack's ZooKeeper
    dynamic_quorum: bool  # a controller formatted --standalone, found by controller.quorum.bootstrap.servers
    log4j2: bool  # logs through log4j 2 (log4j2.xml); otherwise log4j 1 (a log4j.properties per broker)
    authorizer: str  # the ACL authorizer of its mode


# The pinned release (deploy/pom.xml's kafka.version), which src and dst run, and older ones for the
# compatibility tier. An extra cluster names one with ``name:VERSION`` (``old:kafka-3.9``).
DEFAULT_KAFKA = "kafka"
KAFKA_VERSIONS = {
    version.name: version
    for version in (
        KafkaVersion(DEFAULT_KAFKA, kraft=True, dynamic_quorum=True, log4j2=True, authorizer=AUTHORIZER_CLASS),
        KafkaVersion("kafka-3.9", kraft=True, dynamic_quorum=False, log4j2=False, authorizer=AUTHORIZER_CLASS),
        KafkaVersion("kafka-2.8", kraft=False, dynamic_quorum=False, log4j2=False, authorizer=ZK_AUTHORIZER_CLASS),
    )
}

OLDER_KAFKA = tuple(name for name in KAFKA_VERSIONS if name != DEFAULT_KAFKA)

# log4j 1 (Kafka 3.x, 2.x): the same file and format as log4j2.xml.
_LOG4J1_CONFIG = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${ferry.log.file}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.org.apache.kafka.controller=INFO
log4j.logger.org.apache.zookeeper=WARN
"""


# Probing a server that is still starting fails many times on purpose; say nothing about it.
_QUIET = logging.getLogger("ferry.devstack.probe")
_QUIET.setLevel(logging.CRITICAL + 1)
_QUIET.propagate = False


class ServerState(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"


def _port(env: str, default: int) -> int:
    raw = os.environ.get(env, str(default))
    try:
        port = int(raw)
    except ValueError:
        raise DevStackError(f"{env}={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise DevStackError(f"{env}={raw!r} is not a port number (1-65535)")
    return port


def tls_dir() -> Path:
    """The local stack's CA and broker certificate (generated by ``up`` when absent)."""
    return dev_dir() / "tls"


def ca_file() -> Path:
    """The CA certificate (PEM) a client of the secured listeners trusts."""
    return tls_dir() / "ca.pem"


def zookeeper_keystore_file() -> Path:
    """ZooKeeper's TLS key store: the broker's key and certificate in one PEM file."""
    return tls_dir() / "zookeeper.pem"


@dataclass(frozen=True)
class Server:
    """One JVM of the stack: ZooKeeper (``kind == "zookeeper"``), a Kafka cluster's broker, or a schema
    registry (``kind == "registry"``, named ``<cluster>-registry``).

    A Kafka cluster is named by its first broker (``node_id`` 1, which is its KRaft controller too);
    :attr:`nodes` are all of its brokers, each with the cluster's name."""

    name: str
    kind: str
    port: int
    authorizer: bool = False  # a Kafka cluster that enforces ACLs (PLAINTEXT: the super user)
    brokers: int = 1  # how many brokers the Kafka cluster has
    node_id: int = 1  # which of them this JVM is
    version: str = DEFAULT_KAFKA  # a key of KAFKA_VERSIONS
    # A cluster in ZooKeeper mode: where its metadata lives (``host:port/chroot`` of the stack's ZooKeeper).
    zookeeper: str = ""
    tls: bool = False  # ZooKeeper: also serve TLS on port + 1

    @property
    def nodes(self) -> tuple[Server, ...]:
        """Every broker of this Kafka cluster, the first (the controller) first."""
        first = self.port - BROKER_PORT_STEP * (self.node_id - 1)
        return tuple(
            dataclasses.replace(self, port=first + BROKER_PORT_STEP * i, node_id=i + 1) for i in range(self.brokers)
        )

    @property
    def kafka_version(self) -> KafkaVersion:
        return KAFKA_VERSIONS[self.version]

    @property
    def label(self) -> str:
        """The name, with the broker's number for a cluster's second broker on (``a.2``)."""
        return self.name if self.node_id == 1 else f"{self.name}.{self.node_id}"

    @property
    def bootstrap(self) -> str:
        """A client's ``bootstrap.servers`` for the cluster: every broker's PLAINTEXT address."""
        return ",".join(node.address for node in self.nodes)

    @property
    def quorum_port(self) -> int:
        """The cluster's KRaft controller port (on its first broker)."""
        return self.nodes[0].controller_port

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def sasl_ssl_port(self) -> int:
        return self.port + 2

    @property
    def sasl_ssl_address(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def tls_port(self) -> int:
        """ZooKeeper's TLS client port (``secureClientPort``)."""
        return self.port + 1

    @property
    def tls_address(self) -> str:
        return f"127.0.0.1:{self.tls_port}"

    @property
    def ports(self) -> tuple[int, ...]:
        """Every port the server binds: a Kafka node also binds its KRaft controller and SASL_SSL ports,
        ZooKeeper its TLS port (a registry: its one port)."""
        if self.kind == "zookeeper":
            return (self.port, self.tls_port) if self.tls else (self.port,)
        if self.kind == "registry":
            return (self.port,)
        if self.node_id > 1 or not self.kafka_version.kraft:
            return (self.port, self.sasl_ssl_port)
        return (self.port, self.controller_port, self.sasl_ssl_port)

    @property
    def home(self) -> Path:
        return dev_dir() / self.label

    @property
    def url(self) -> str:
        """A registry's base URL."""
        return f"http://{self.address}"

    @property
    def config_file(self) -> Path:
        names = {"zookeeper": "zoo.cfg", "registry": "application.properties"}
        return self.home / names.get(self.kind, "server.properties")

    @property
    def log4j1_config_file(self) -> Path:
        """A broker's log4j 1 configuration (releases that log through log4j 1)."""
        return self.home / "log4j.properties"

    @property
    def pid_file(self) -> Path:
        return self.home / "pid"

    @property
    def log_file(self) -> Path:
        return self.home / "server.log"

    @property
    def stdout_file(self) -> Path:
        return self.home / "stdout.log"

    @property
    def runner_jar(self) -> Path:
        """A registry's runnable jar, built by ``make registry``."""
        jars = sorted(jars_dir("registry").glob("*-runner.jar"))
        if not jars:
            raise DevStackError(f"no registry in {jars_dir('registry')}: run `make registry` (or `make setup`)")
        return jars[0]

    @property
    def classpath(self) -> str:
        folder = jars_dir("zookeeper" if self.kind == "zookeeper" else self.kafka_version.name)
        if not any(folder.glob("*.jar")):
            raise DevStackError(f"no jars in {folder}: run `make setup` first (it fetches them with Maven)")
        return f"{folder}/*"


@dataclass(frozen=True)
class Stack:
    zookeeper: Server
    src: Server
    dst: Server
    # One schema registry per cluster, when asked for (empty otherwise).
    registries: tuple[Server, ...] = ()
    extra: tuple[Server, ...] = ()  # Kafka clusters beyond src and dst (FERRY_DEV_CLUSTERS, --clusters)

    @property
    def servers(self) -> tuple[Server, ...]:
        """Every JVM: ZooKeeper, every broker of every cluster, the registries."""
        return (self.zookeeper, *(node for cluster in self.kafka for node in cluster.nodes), *self.registries)

    def registry_url(self, cluster: str) -> str:
        for server in self.registries:
            if server.name == f"{cluster}-registry":
                return server.url
        raise DevStackError(f"no registry for cluster {cluster!r} in this stack: start it with --registries")

    @property
    def kafka(self) -> tuple[Server, ...]:
        return (self.src, self.dst, *self.extra)

    def cluster(self, name: str) -> Server:
        for server in self.kafka:
            if server.name == name:
                return server
        raise DevStackError(
            f"the local stack has no cluster {name!r} (it has {[s.name for s in self.kafka]}); "
            f"start it with `ferry dev up --clusters {name}`"
        )

    def bootstrap(self, cluster: str) -> str:
        return self.cluster(cluster).bootstrap

    def secured(self, cluster: str) -> dict[str, str]:
        """librdkafka properties of a client of ``cluster``'s SASL_SSL listener (SCRAM-SHA-512)."""
        return secured_client(self.cluster(cluster))

    def with_clusters(
        self, names: Iterable[str], authorizer: bool = False, brokers: int = 1, version: str = DEFAULT_KAFKA
    ) -> Stack:
        """This stack plus extra clusters ``names`` (ports from the environment, module docstring);
        with ``authorizer``, those not in the stack yet enforce ACLs; each with ``brokers`` brokers
        running Kafka ``version`` (a key of ``KAFKA_VERSIONS``; module docstring)."""
        known = {server.name: server for server in self.extra}
        for name in names:
            if name not in known and name not in ("src", "dst"):
                spec = ClusterSpec(brokers, version)
                known[name] = _extra_server(name, len(known), spec, self.zookeeper, authorizer)
        return Stack(self.zookeeper, self.src, self.dst, registries=self.registries, extra=tuple(known.values()))


@dataclass(frozen=True)
class ClusterSpec:
    """What an extra cluster is asked to be (``name[:N][:VERSION]``): its broker count and Kafka release."""

    brokers: int = 1
    version: str = DEFAULT_KAFKA


def secured_client(server: Server) -> dict[str, str]:
    return {
        "bootstrap.servers": ",".join(node.sasl_ssl_address for node in server.nodes),
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SASL_MECHANISM,
        "sasl.username": SASL_USER,
        "sasl.password": SASL_PASSWORD,
        "ssl.ca.location": str(ca_file()),
    }


def registries_wanted() -> bool:
    return os.environ.get(REGISTRIES_ENV, "").strip().lower() in ("1", "true", "yes")


def stack_from_env(clusters: Iterable[str] = (), recorded: bool = False, registries: bool | None = None) -> Stack:
    """The stack at the ports of the environment: src, dst, ``FERRY_DEV_CLUSTERS``, ``clusters``,
    and with ``recorded`` the extra clusters an earlier ``up`` started (what ``status`` and
    ``down`` look at); with registries when ``registries`` is true (None: when
    ``FERRY_DEV_REGISTRIES`` is set)."""
    with_registries = registries_wanted() if registries is None else registries
    base = Stack(
        zookeeper=Server("zookeeper", "zookeeper", _port(ZK_PORT_ENV, 2181), tls=os.environ.get(ZK_TLS_ENV) == "1"),
        src=Server("src", "kafka", _port(SRC_PORT_ENV, 19092)),
        dst=Server("dst", "kafka", _port(DST_PORT_ENV, 29092)),
        registries=(
            Server("src-registry", "registry", _port(SRC_REGISTRY_PORT_ENV, 18081)),
            Server("dst-registry", "registry", _port(DST_REGISTRY_PORT_ENV, 28081)),
        )
        if with_registries
        else (),
    )
    recorded_clusters = _recorded_extra() if recorded else {}
    from_env = parse_clusters(os.environ.get(CLUSTERS_ENV, ""), CLUSTERS_ENV)
    asked = parse_clusters(",".join(clusters), "clusters")
    wanted = {**{name: spec for name, (_, spec) in recorded_clusters.items()}, **from_env, **asked}
    extra = []
    for index, name in enumerate(n for n in wanted if n not in ("src", "dst")):
        server = _extra_server(name, index, wanted[name], base.zookeeper)
        if name in recorded_clusters and not os.environ.get(_port_env(name)):
            port, spec = recorded_clusters[name]  # keep the port, brokers and release it was started with
            server = dataclasses.replace(_extra_server(name, index, spec, base.zookeeper), port=port)
        extra.append(server)
    return Stack(base.zookeeper, base.src, base.dst, registries=base.registries, extra=tuple(extra))


def parse_cluster_names(text: str, where: str) -> list[str]:
    """``a,b:3,c`` -> names; :class:`DevStackError` for a bad one."""
    return list(parse_cluster_specs(text, where))


def parse_cluster_specs(text: str, where: str) -> dict[str, int]:
    """``a,b:3,c`` -> name -> brokers (1 unless ``:N``); :class:`DevStackError` for a bad one."""
    return {name: spec.brokers for name, spec in parse_clusters(text, where).items()}


def parse_clusters(text: str, where: str) -> dict[str, ClusterSpec]:
    """``a,b:3,old:kafka-2.8,c:2:kafka-3.9`` -> name -> :class:`ClusterSpec` (one broker of the pinned
    release unless ``:N`` or ``:VERSION`` say otherwise); :class:`DevStackError` for a bad one."""
    specs: dict[str, ClusterSpec] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, *options = item.split(":")
        if not _EXTRA_NAME.match(name) or name == "zookeeper":
            raise DevStackError(f"{where}: {name!r} is not a usable cluster name (letters, digits, '_', '-')")
        spec = ClusterSpec()
        for option in options:
            if option in KAFKA_VERSIONS:
                spec = dataclasses.replace(spec, version=option)
            elif option.isdigit() and 1 <= int(option) <= MAX_BROKERS:
                spec = dataclasses.replace(spec, brokers=int(option))
            else:
                raise DevStackError(
                    f"{where}: {item!r}: a cluster has 1 to {MAX_BROKERS} brokers and runs one of the "
                    f"Kafka releases {', '.join(KAFKA_VERSIONS)}"
                )
        specs[name] = spec
    return specs


def _port_env(name: str) -> str:
    return "FERRY_DEV_PORT_" + name.upper().replace("-", "_")


def _extra_server(name: str, index: int, spec: ClusterSpec, zookeeper: Server, authorizer: bool = False) -> Server:
    if not 1 <= spec.brokers <= MAX_BROKERS:
        raise DevStackError(f"cluster {name!r}: a cluster has 1 to {MAX_BROKERS} brokers, not {spec.brokers}")
    if spec.version not in KAFKA_VERSIONS:
        raise DevStackError(f"cluster {name!r}: no Kafka release {spec.version!r} (known: {', '.join(KAFKA_VERSIONS)})")
    default = _port(EXTRA_PORT_ENV, 30092) + EXTRA_PORT_STEP * index
    # A cluster in ZooKeeper mode keeps its metadata under a chroot of its own in the stack's ZooKeeper.
    chroot = "" if KAFKA_VERSIONS[spec.version].kraft else f"{zookeeper.address}/kafka-{name}"
    port = _port(_port_env(name), default)
    return Server(name, "kafka", port, authorizer, spec.brokers, version=spec.version, zookeeper=chroot)


def _extra_record() -> Path:
    return dev_dir() / "extra-clusters"


def _recorded_extra() -> dict[str, tuple[int, ClusterSpec]]:
    """name -> (port, spec) of the extra clusters an earlier ``up`` started (``.dev/extra-clusters``,
    a line ``name:port[:brokers][:version]`` each)."""
    try:
        lines = _extra_record().read_text().split()
    except OSError:
        return {}
    recorded: dict[str, tuple[int, ClusterSpec]] = {}
    for line in lines:
        name, _, rest = line.partition(":")
        port, _, options = rest.partition(":")
        if not (_EXTRA_NAME.match(name) and port.isdigit()):
            continue
        with contextlib.suppress(DevStackError):  # a line this Ferry cannot read: not one of its clusters
            recorded[name] = (int(port), parse_clusters(f"{name}:{options}" if options else name, "")[name])
    return recorded


def _write_record(clusters: dict[str, tuple[int, ClusterSpec]]) -> None:
    _extra_record().write_text(
        "".join(
            f"{name}:{port}"
            + (f":{spec.brokers}" if spec.brokers > 1 else "")
            + (f":{spec.version}" if spec.version != DEFAULT_KAFKA else "")
            + "\n"
            for name, (port, spec) in clusters.items()
        )
    )


def forget_extra(names: Iterable[str]) -> None:
    """Drops stopped extra clusters from ``.dev/extra-clusters`` (``status`` and ``down`` stop looking at them)."""
    gone = set(names)
    with contextlib.suppress(OSError):
        _write_record({name: known for name, known in _recorded_extra().items() if name not in gone})


def _record_extra(stack: Stack) -> None:
    if stack.extra:
        clusters = {**_recorded_extra(), **{s.name: (s.port, ClusterSpec(s.brokers, s.version)) for s in stack.extra}}
        dev_dir().mkdir(parents=True, exist_ok=True)
        _write_record(clusters)


# --- configuration files -------------------------------------------------------------------


def _zookeeper_config(server: Server) -> str:
    return "\n".join(
        [
            "tickTime=2000",
            f"dataDir={server.home / 'data'}",
            f"clientPort={server.port}",
            "clientPortAddress=127.0.0.1",
            "maxClientCnxns=0",
            # The admin server would take port 8080; kazoo's server_version() needs the `envi` 4lw.
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            # Tests expire sessions on purpose; let them ask for short ones.
            "minSessionTimeout=2000",
            *(_zookeeper_tls_lines(server) if server.tls else []),
            "",
        ]
    )


def _zookeeper_tls_lines(server: Server) -> list[str]:
    return [
        # TLS on a second port (Netty serves both); PEM key store and trust store (ZooKeeper 3.8+).
        f"secureClientPort={server.tls_port}",
        "secureClientPortAddress=127.0.0.1",
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
        f"ssl.keyStore.location={zookeeper_keystore_file()}",
        "ssl.keyStore.type=PEM",
        f"ssl.trustStore.location={ca_file()}",
        "ssl.trustStore.type=PEM",
        # A client certificate is checked when sent, not required: clients may trust the server only.
        "ssl.clientAuth=want",
    ]


def _kafka_config(server: Server) -> str:
    version = server.kafka_version
    # A KRaft cluster's first broker is its controller too.
    controller = version.kraft and server.node_id == 1
    listeners = ",".join(
        [
            f"PLAINTEXT://127.0.0.1:{server.port}",
            *([f"CONTROLLER://127.0.0.1:{server.controller_port}"] if controller else []),
            f"SASL_SSL://{server.sasl_ssl_address}",
        ]
    )
    keystore = tls_dir() / "broker.p12"
    props = {
        **_metadata_config(server, controller),
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        # The secured client listener: TLS with the stack's own CA, SCRAM-SHA-512 users.
        "sasl.enabled.mechanisms": SASL_MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(keystore),
        "ssl.keystore.password": _KEYSTORE_PASSWORD,
        "ssl.key.password": _KEYSTORE_PASSWORD,
        "log.dirs": str(server.home / "data"),
        # Kafka's own topics have one replica (on a cluster of several brokers too: it needs only one).
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        "group.initial.rebalance.delay.ms": "0",
        # As in production: Ferry must create what it writes to.
        "auto.create.topics.enable": "false",
        # Two cores: small thread pools, and a cleaner buffer that does not eat the heap.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": "2097152",
        "num.partitions": "1",
    }
    if server.authorizer:
        props.update(
            {
                "authorizer.class.name": version.authorizer,
                "allow.everyone.if.no.acl.found": "false",
                "super.users": SUPER_USER,
            }
        )
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _metadata_config(server: Server, controller: bool) -> dict[str, str]:
    """Where a broker's cluster metadata lives: its KRaft quorum, or (ZooKeeper mode) its ZooKeeper chroot."""
    version = server.kafka_version
    if not version.kraft:
        return {
            "broker.id": str(server.node_id),
            "zookeeper.connect": server.zookeeper,
            # `up` starts ZooKeeper and the brokers together: a broker waits for ZooKeeper to answer.
            "zookeeper.connection.timeout.ms": "60000",
            # A broker killed with -9 holds its registration until its session expires: keep that short.
            "zookeeper.session.timeout.ms": "6000",
        }
    quorum = (
        {"controller.quorum.bootstrap.servers": f"127.0.0.1:{server.quorum_port}"}
        if version.dynamic_quorum
        else {"controller.quorum.voters": f"1@127.0.0.1:{server.quorum_port}"}
    )
    return {
        "process.roles": "broker,controller" if controller else "broker",
        "node.id": str(server.node_id),
        "controller.listener.names": "CONTROLLER",
        **quorum,
    }


def _registry_config(server: Server) -> str:
    # Quarkus reads this file (quarkus.config.locations); in-memory H2 storage, no auth.
    return "\n".join(
        [
            f"quarkus.http.port={server.port}",
            "quarkus.http.host=127.0.0.1",
            "quarkus.log.console.level=WARN",
            "quarkus.log.file.enable=true",
            f"quarkus.log.file.path={server.log_file}",
            "",
        ]
    )


def _jvm(server: Server, heap: str) -> list[str]:
    if server.kind == "kafka" and not server.kafka_version.log4j2:
        logging_config = f"-Dlog4j.configuration=file:{server.log4j1_config_file}"
    else:
        logging_config = f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}"
    return [
        "java",
        f"-Xms{heap}",
        f"-Xmx{heap}",
        f"-Dferry.log.file={server.log_file}",
        f"-Dkafka.logs.dir={server.home}",
        logging_config,
        "-Djava.awt.headless=true",
        "-cp",
        server.classpath,
    ]


def _command(server: Server) -> list[str]:
    if server.kind == "registry":
        # Small heap, serial GC, C1 only: two of them share two cores with everything else.
        return [
            "java",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dquarkus.config.locations={server.config_file}",
            "-jar",
            str(server.runner_jar),
        ]
    if server.kind == "zookeeper":
        return [*_jvm(server, "128m"), "org.apache.zookeeper.server.ZooKeeperServerMain", str(server.config_file)]
    if server.name in ("src", "dst"):
        return [*_jvm(server, "512m"), "kafka.Kafka", str(server.config_file)]
    heap = os.environ.get(EXTRA_HEAP_ENV, "256m")
    jvm = _jvm(server, heap)
    return [*jvm[:1], "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *jvm[1:], "kafka.Kafka", str(server.config_file)]


def _new_cluster_id() -> str:
    # 16 random bytes, URL-safe base64 without padding; Kafka's tool rejects one starting with '-'.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _cluster_id_of(server: Server) -> str | None:
    """The cluster id ``server``'s storage was formatted with; None when it is not formatted."""
    try:
        text = (server.home / "data" / "meta.properties").read_text()
    except OSError:
        return None
    found = re.search(r"^cluster\.id=(.+)$", text, re.MULTILINE)
    return found.group(1).strip() if found else None


def _format_storage(server: Server) -> None:
    """Formats a broker's storage once: the first broker of a cluster as its one KRaft controller with a
    new cluster id, the others (started after it) with the first one's id."""
    if (server.home / "data" / "meta.properties").exists():
        return
    if server.node_id == 1:
        # A static quorum (controller.quorum.voters) is formatted without a role.
        cluster_id, role = _new_cluster_id(), ["--standalone"] if server.kafka_version.dynamic_quorum else []
    else:
        first = _cluster_id_of(server.nodes[0])
        if first is None:
            raise DevStackError(f"kafka '{server.label}': its cluster's first broker is not formatted yet")
        cluster_id, role = first, []
    cmd = [
        *_jvm(server, "256m"),
        "kafka.tools.StorageTool",
        "format",
        "--ignore-formatted",
        "--cluster-id",
        cluster_id,
        "--config",
        str(server.config_file),
        *role,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise DevStackError(
            f"formatting storage of kafka '{server.label}' failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )


def ensure_zookeeper_keystore() -> None:
    """:func:`zookeeper_keystore_file` from the broker's key and certificate; kept when present."""
    ensure_certificates()
    target = zookeeper_keystore_file()
    if target.exists():
        return
    folder = tls_dir()
    partial = target.with_suffix(".tmp")
    partial.write_text((folder / "broker.key").read_text() + (folder / "broker.pem").read_text())
    partial.replace(target)


def _openssl(*args: str) -> None:
    result = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60, cwd=tls_dir())
    if result.returncode != 0:
        raise DevStackError(f"openssl {args[0]} failed (exit {result.returncode}) in {tls_dir()}:\n{result.stderr}")


def ensure_certificates() -> None:
    """A CA and a broker certificate for 127.0.0.1/localhost in ``.dev/tls``; kept when present.

    The keystore is written last, so an interrupted run is redone as a whole next time.
    """
    folder = tls_dir()
    if (folder / "broker.p12").exists() and ca_file().exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    days = "3650"
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        days,
        "-subj",
        "/CN=Ferry local stack CA",
    )
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=127.0.0.1"
    )
    (folder / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.pem",
        "-days",
        days,
        "-extfile",
        "broker.ext",
    )
    _openssl(
        "pkcs12",
        "-export",
        "-in",
        "broker.pem",
        "-inkey",
        "broker.key",
        "-certfile",
        "ca.pem",
        "-name",
        "broker",
        "-out",
        "broker.p12.tmp",
        "-passout",
        f"pass:{_KEYSTORE_PASSWORD}",
    )
    (folder / "broker.p12.tmp").replace(folder / "broker.p12")
    for private in ("ca.key", "broker.key", "broker.p12"):
        (folder / private).chmod(0o600)


def ensure_scram_user(
    server: Server, deadline_s: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> None:
    """Creates the SCRAM user through the PLAINTEXT listener when the broker lacks it, then waits
    until the SASL_SSL listener accepts it (credentials reach the listener through the metadata log).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    plain: dict[str, Any] = {"bootstrap.servers": server.address, "logger": _QUIET}
    admin = AdminClient(plain)
    try:
        futures = admin.describe_user_scram_credentials([SASL_USER])
        assert isinstance(futures, dict)  # a dict of futures when users are named
        described = futures[SASL_USER].result(timeout=30)
        known = any(info.mechanism == ScramMechanism.SCRAM_SHA_512 for info in described.scram_credential_infos)
    except KafkaException:  # RESOURCE_NOT_FOUND: no credentials for this user yet
        known = False
    if not known:
        upsert = UserScramCredentialUpsertion(
            SASL_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), SASL_PASSWORD.encode()
        )
        try:
            admin.alter_user_scram_credentials([upsert])[SASL_USER].result(timeout=30)
        except KafkaException as exc:
            raise DevStackError(f"kafka '{server.name}': creating SCRAM user {SASL_USER!r} failed: {exc}") from exc
    give_up = clock() + deadline_s
    secured_conf: dict[str, Any] = {**secured_client(server), "logger": _QUIET}
    secured = AdminClient(secured_conf)
    last_error = "no broker in the metadata"
    while True:
        try:
            if secured.list_topics(timeout=5).brokers:
                return
        except KafkaException as exc:
            last_error = str(exc)
        if clock() > give_up:
            raise DevStackError(
                f"kafka '{server.name}': the SASL_SSL listener {server.sasl_ssl_address} did not accept "
                f"user {SASL_USER!r} within {deadline_s:.0f}s ({last_error}); its log is {server.log_file}"
            )
        sleep(0.5)


# --- processes -----------------------------------------------------------------------------


def _pid_of(server: Server) -> int | None:
    """The pid of our live process for ``server``, or None. Only reads: see ``_forget_stale_pid``."""
    try:
        pid = int(server.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_ours(server, pid) else None


def pid_of(server: Server) -> int | None:
    """The pid of our live process for ``server``, or None (for fault-injection tests and tools)."""
    return _pid_of(server)


def _is_ours(server: Server, pid: int) -> bool:
    """Whether ``pid`` is a live process started with ``server``'s config file (pids are recycled).

    A process killed a moment ago (a zombie), or one whose ``exec`` has not finished yet, has an
    empty command line: it is not (or not yet) ours.
    """
    try:
        process = psutil.Process(pid)
        cmdline = process.cmdline()
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:  # gone, a zombie whose command line cannot be read, or not ours to read
        return False
    # A registry names its config file in -Dquarkus.config.locations=<file>.
    marker = str(server.config_file)
    return any(arg == marker or arg.endswith("=" + marker) for arg in cmdline)


def _forget_stale_pid(server: Server) -> None:
    """Remove a pid file that names no live process of ours. Only under ``_stack_lock``: a reader
    without it could remove the file a concurrent ``_spawn`` has just written."""
    if _pid_of(server) is None:
        server.pid_file.unlink(missing_ok=True)


@contextlib.contextmanager
def _stack_lock(deadline_s: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> Iterator[None]:
    """Exclusive for one ``up`` or ``down`` at a time on this dev dir (across processes)."""
    path = dev_dir() / "stack.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        give_up = clock() + deadline_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if clock() > give_up:
                    raise DevStackError(
                        f"another `ferry dev up` or `down` has held {path} for {deadline_s:.0f}s; try again"
                    ) from None
                sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _port_free(port: int) -> bool:
    """Whether nothing listens on ``127.0.0.1:port`` (a process killed a moment ago may)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As the JVM's server sockets do: a connection in TIME_WAIT does not hold the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _spawn(server: Server, clock: Callable[[], float], sleep: Callable[[float], None]) -> int:
    """Start ``server``'s JVM and write its pid file once the process is recognisably ours."""
    server.home.mkdir(parents=True, exist_ok=True)
    if server.kind == "zookeeper" and server.tls:
        ensure_zookeeper_keystore()
    writers = {"zookeeper": _zookeeper_config, "registry": _registry_config}
    server.config_file.write_text(writers.get(server.kind, _kafka_config)(server))
    if server.kind == "kafka":
        if not server.kafka_version.log4j2:
            server.log4j1_config_file.write_text(_LOG4J1_CONFIG)
        ensure_certificates()
        if server.kafka_version.kraft:
            _format_storage(server)
    # A session of its own: the server outlives `ferry dev up` and ignores its Ctrl-C.
    process = support.spawn(server.label, _command(server), server.stdout_file, cwd=server.home, new_session=True)
    # Popen returns when the child's exec has passed the point of no return (the close-on-exec
    # pipe closed), which can be before the kernel set up its new command line: for a moment,
    # its command line is empty and the new server would look dead. Wait (briefly) for it.
    with contextlib.suppress(support.WaitTimeout):  # exited, or slow: `up` reports it when it waits
        support.poll_until(
            lambda: _is_ours(server, process.pid) or not process.alive(),
            10.0,
            f"{server.label}'s command line",
            interval=0.01,
            clock=clock,
            sleep=sleep,
        )
    # Written whole or not at all: a concurrent reader never sees an empty pid file.
    partial = server.pid_file.with_suffix(".tmp")
    partial.write_text(f"{process.pid}\n")
    partial.replace(server.pid_file)
    return process.pid


def _answers(server: Server, timeout: float) -> bool:
    """Whether ``server`` really serves: a ZooKeeper session, or Kafka metadata with a broker."""
    if server.kind == "zookeeper":
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(hosts=server.address, timeout=timeout, connection_retry={"max_tries": 0}, logger=_QUIET)
        try:
            client.start(timeout=timeout)
            client.get_children("/")
            return True
        except (KazooTimeoutError, KazooException):
            return False
        finally:
            client.stop()
            client.close()
    if server.kind == "registry":
        import requests

        try:
            return requests.get(f"{server.url}/apis/ccompat/v7/subjects", timeout=timeout).status_code == 200
        except requests.RequestException:
            return False
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {"bootstrap.servers": server.address, "logger": _QUIET}
    admin = AdminClient(conf)
    try:
        metadata = admin.list_topics(timeout=timeout)
        return len(metadata.brokers) >= server.brokers  # a cluster of several: all of them
    except KafkaException:
        return False


def state_of(server: Server) -> ServerState:
    if _pid_of(server) is None:
        return ServerState.STOPPED
    return ServerState.RUNNING if _answers(server, timeout=2.0) else ServerState.STARTING


def up(
    stack: Stack | None = None,
    *,
    deadline_s: float = 120.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Start every server of ``stack`` that is not running and wait until all answer.

    Idempotent: a server already running is left alone. Returns the names of the servers
    this call started, so a caller can stop exactly those. A server whose process vanishes
    while this call waits for it (killed a moment before) is started again.
    """
    stack = stack or stack_from_env()
    _record_extra(stack)
    started: list[Server] = []
    with _stack_lock(deadline_s, clock, sleep):
        for server in stack.servers:
            if _pid_of(server) is None:
                _start(server, deadline_s, clock, sleep, echo)
                started.append(server)
        for server in stack.servers:
            while not _wait_until_answers(server, deadline_s, clock, sleep, started_it=server in started):
                echo(f"{server.label} ({server.kind}) is gone (killed a moment ago?); starting it again")
                _start(server, deadline_s, clock, sleep, echo)
                started.append(server)
        for server in stack.kafka:
            if configured_with_sasl_ssl(server):
                ensure_scram_user(server, deadline_s, clock, sleep)
            else:
                echo(
                    f"kafka '{server.name}' was started before it had a SASL_SSL listener; "
                    f"`ferry dev down` then `ferry dev up` adds {server.sasl_ssl_address}"
                )
    return list(dict.fromkeys(server.name for server in started))  # a cluster's brokers: its name once


def configured_with_sasl_ssl(server: Server) -> bool:
    """Whether the running broker's config (written when it was spawned) has the SASL_SSL listener."""
    try:
        return f"SASL_SSL://{server.sasl_ssl_address}" in server.config_file.read_text()
    except OSError:
        return False


def _start(
    server: Server,
    deadline_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    echo: Callable[[str], None],
) -> None:
    """STOPPED -> STARTING, once the server's ports are free (only under ``_stack_lock``)."""
    _forget_stale_pid(server)
    if _answers(server, timeout=1.0):
        raise DevStackError(
            f"{server.kind} '{server.label}': something else already serves {server.address}; "
            f"stop it or pick another port with {_env_of(server)}"
        )
    give_up = clock() + deadline_s
    while not all(_port_free(port) for port in server.ports):
        if clock() > give_up:
            raise DevStackError(
                f"{server.kind} '{server.label}': ports {', '.join(map(str, server.ports))} are still taken "
                f"after {deadline_s:.0f}s; stop what holds them or pick other ports with {_env_of(server)}"
            )
        sleep(0.2)
    pid = _spawn(server, clock, sleep)
    echo(f"started {server.label} ({server.kind}) on {server.address}, pid {pid}")


def _env_of(server: Server) -> str:
    return {
        "zookeeper": ZK_PORT_ENV,
        "src": SRC_PORT_ENV,
        "dst": DST_PORT_ENV,
        "src-registry": SRC_REGISTRY_PORT_ENV,
        "dst-registry": DST_REGISTRY_PORT_ENV,
    }.get(server.name) or _port_env(server.name)


def _wait_until_answers(
    server: Server,
    deadline_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    *,
    started_it: bool,
) -> bool:
    """True once ``server`` answers. When its process is gone: an error if this ``up`` started it
    (it exited while starting), else False (it was running, or dying, when ``up`` looked)."""
    give_up = clock() + deadline_s
    while True:
        if _pid_of(server) is None:
            if not started_it:
                return False
            raise DevStackError(
                f"{server.kind} '{server.label}' exited while starting; its log is {server.log_file} "
                f"(and {server.stdout_file}):\n{support.tail(server.stdout_file, 15)}\n"
                f"{support.tail(server.log_file, 15)}"
            )
        if _answers(server, timeout=2.0):
            return True
        if clock() > give_up:
            raise DevStackError(
                f"{server.kind} '{server.label}' did not answer on {server.address} within {deadline_s:.0f}s; "
                f"its log is {server.log_file}:\n{support.tail(server.log_file, 15)}"
            )
        sleep(0.5)


def down(
    stack: Stack | None = None,
    names: Iterable[str] | None = None,
    *,
    grace_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = print,
) -> list[str]:
    """Stop the servers this stack started (all, or only ``names``), by pid. Returns those stopped.

    Without a ``stack``, registries are stopped too when they run (whatever the environment says).
    """
    stack = stack or stack_from_env(registries=True)
    wanted = set(names) if names is not None else None
    # Registries and Kafka first: a broker shutting down still talks to nobody but itself, ZooKeeper last.
    # A cluster's first broker (its KRaft controller) after its others: they shut down through it.
    brokers = [node for cluster in stack.kafka for node in reversed(cluster.nodes)]
    order = [*stack.registries, *brokers, stack.zookeeper]  # kafka: src, dst and the extra clusters
    stopped = []
    with _stack_lock(grace_s + 150.0, clock, sleep):
        for server in order:
            if wanted is not None and server.name not in wanted:
                continue
            pid = _pid_of(server)
            if pid is None:
                _forget_stale_pid(server)
                continue
            os.kill(pid, signal.SIGTERM)
            stopped.append((server, pid))
        for server, pid in stopped:
            give_up = clock() + grace_s
            while _pid_of(server) is not None and clock() < give_up:
                sleep(0.2)
            if _pid_of(server) is not None:
                os.kill(pid, signal.SIGKILL)
                echo(f"{server.label} did not stop within {grace_s:.0f}s; killed pid {pid}")
            server.pid_file.unlink(missing_ok=True)
            echo(f"stopped {server.label} (pid {pid})")
    return [server.name for server, _ in stopped]


def status(stack: Stack | None = None) -> list[dict[str, object]]:
    """One row per server; registries only when asked for or running."""
    stack = stack or stack_from_env()
    if not stack.registries:
        every = stack_from_env(registries=True)
        stack = Stack(
            stack.zookeeper,
            stack.src,
            stack.dst,
            tuple(r for r in every.registries if _pid_of(r) is not None),
            stack.extra,
        )
    rows: list[dict[str, object]] = []
    for server in stack.servers:
        rows.append(
            {
                "name": server.label,
                "kind": server.kind,
                "address": server.address,
                "pid": _pid_of(server),
                "state": state_of(server).value,
                "log": str(server.log_file),
            }
        )
    return rows


# --- CLI -----------------------------------------------------------------------------------


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dev", help="the local ZooKeeper + Kafka clusters src, dst [+ more, + registries]")
    actions = parser.add_subparsers(dest="dev_action", required=True)
    up_parser = actions.add_parser("up", help="start what is not running and wait until all answer")
    up_parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each server")
    up_parser.add_argument(
        "--clusters",
        default="",
        metavar="A,B:3,C:kafka-2.8,...",
        help=f"extra Kafka clusters to start besides src and dst (also ${CLUSTERS_ENV}), NAME:N for N brokers "
        f"(1-{MAX_BROKERS}), NAME:VERSION for an older Kafka ({', '.join(OLDER_KAFKA)}); "
        f"ports from ${EXTRA_PORT_ENV} (30092) + 10 each, or $FERRY_DEV_PORT_<NAME>",
    )
    up_parser.add_argument(
        "--authorizer",
        action="store_true",
        help="the --clusters enforce ACLs (StandardAuthorizer; the SASL_SSL user may do only what "
        "ACLs grant, PLAINTEXT is the super user); for clusters not running yet",
    )
    up_parser.add_argument(
        "--registries", action="store_true", help=f"also one schema registry per cluster (or set {REGISTRIES_ENV}=1)"
    )
    up_parser.set_defaults(func=_cmd_up)
    actions.add_parser("down", help="stop what `up` started").set_defaults(func=_cmd_down)
    status_parser = actions.add_parser("status", help="what runs where")
    status_parser.add_argument("--json", action="store_true")
    status_parser.set_defaults(func=_cmd_status)


def _cmd_up(args: argparse.Namespace) -> int:
    specs = parse_clusters(args.clusters, "--clusters")
    stack = stack_from_env(list(filter(None, args.clusters.split(","))), registries=args.registries or None)
    if args.authorizer:
        stack = stack_from_env(registries=args.registries or None)
        for name, spec in specs.items():
            stack = stack.with_clusters([name], authorizer=True, brokers=spec.brokers, version=spec.version)
    up(stack, deadline_s=args.timeout)
    print_table(status(stack), ["name", "address", "state"])
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    stopped = down(stack_from_env(recorded=True, registries=True))
    _extra_record().unlink(missing_ok=True)
    if not stopped:
        print("nothing to stop")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    rows = status(stack_from_env(recorded=True))
    if args.json:
        import json

        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print_table(rows, ["name", "kind", "address", "pid", "state", "log"])
    return 0
