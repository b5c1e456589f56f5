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
(SCRAM-SHA-512 over TLS with the stack's own CA: :mod:`ferry.devstack.security`). :meth:`Stack.secured`
gives a client's librdkafka properties for the secured listener.

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

The package's parts: this module says what runs where (the servers, their ports, folders and
environment overrides, and the extra clusters an earlier ``up`` recorded);
:mod:`ferry.devstack.processes` starts, watches and stops them (``up``, ``down``, ``status``);
:mod:`ferry.devstack.server_files` renders the files each server reads;
:mod:`ferry.devstack.security` makes the TLS material and the SCRAM user; :mod:`ferry.devstack.cli`
is ``ferry dev``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ferry.common.errors import DevStackError
from ferry.common.paths import dev_dir, jars_dir
from ferry.devstack.security import AUTHORIZER_CLASS, ZK_AUTHORIZER_CLASS, secured_client

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


@dataclass(frozen=True, kw_only=True)
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
        KafkaVersion(name=DEFAULT_KAFKA, kraft=True, dynamic_quorum=True, log4j2=True, authorizer=AUTHORIZER_CLASS),
        KafkaVersion(name="kafka-3.9", kraft=True, dynamic_quorum=False, log4j2=False, authorizer=AUTHORIZER_CLASS),
        KafkaVersion(name="kafka-2.8", kraft=False, dynamic_quorum=False, log4j2=False, authorizer=ZK_AUTHORIZER_CLASS),
    )
}

OLDER_KAFKA = tuple(name for name in KAFKA_VERSIONS if name != DEFAULT_KAFKA)


def _port(env: str, default: int) -> int:
    raw = os.environ.get(env, str(default))
    try:
        port = int(raw)
    except ValueError:
        raise DevStackError(f"{env}={raw!r} is not a port number") from None
    if not 0 < port < 65536:
        raise DevStackError(f"{env}={raw!r} is not a port number (1-65535)")
    return port


@dataclass(frozen=True, kw_only=True)
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
    def sasl_ssl_bootstrap(self) -> str:
        """A client's ``bootstrap.servers`` for the cluster's secured listeners: every broker's SASL_SSL address."""
        return ",".join(node.sasl_ssl_address for node in self.nodes)

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


@dataclass(frozen=True, kw_only=True)
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
        return secured_client(self.cluster(cluster).sasl_ssl_bootstrap)

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
        return dataclasses.replace(self, extra=tuple(known.values()))


@dataclass(frozen=True)
class ClusterSpec:
    """What an extra cluster is asked to be (``name[:N][:VERSION]``): its broker count and Kafka release."""

    brokers: int = 1
    version: str = DEFAULT_KAFKA


def registries_wanted() -> bool:
    return os.environ.get(REGISTRIES_ENV, "").strip().lower() in ("1", "true", "yes")


def stack_from_env(clusters: Iterable[str] = (), recorded: bool = False, registries: bool | None = None) -> Stack:
    """The stack at the ports of the environment: src, dst, ``FERRY_DEV_CLUSTERS``, ``clusters``,
    and with ``recorded`` the extra clusters an earlier ``up`` started (what ``status`` and
    ``down`` look at); with registries when ``registries`` is true (None: when
    ``FERRY_DEV_REGISTRIES`` is set)."""
    with_registries = registries_wanted() if registries is None else registries
    base = Stack(
        zookeeper=Server(
            name="zookeeper", kind="zookeeper", port=_port(ZK_PORT_ENV, 2181), tls=os.environ.get(ZK_TLS_ENV) == "1"
        ),
        src=Server(name="src", kind="kafka", port=_port(SRC_PORT_ENV, 19092)),
        dst=Server(name="dst", kind="kafka", port=_port(DST_PORT_ENV, 29092)),
        registries=(
            Server(name="src-registry", kind="registry", port=_port(SRC_REGISTRY_PORT_ENV, 18081)),
            Server(name="dst-registry", kind="registry", port=_port(DST_REGISTRY_PORT_ENV, 28081)),
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
    return dataclasses.replace(base, extra=tuple(extra))


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


def port_env_of(server: Server) -> str:
    """The environment variable that moves ``server``'s port (what an error about its port names)."""
    return {
        "zookeeper": ZK_PORT_ENV,
        "src": SRC_PORT_ENV,
        "dst": DST_PORT_ENV,
        "src-registry": SRC_REGISTRY_PORT_ENV,
        "dst-registry": DST_REGISTRY_PORT_ENV,
    }.get(server.name) or _port_env(server.name)


def _extra_server(name: str, index: int, spec: ClusterSpec, zookeeper: Server, authorizer: bool = False) -> Server:
    if not 1 <= spec.brokers <= MAX_BROKERS:
        raise DevStackError(f"cluster {name!r}: a cluster has 1 to {MAX_BROKERS} brokers, not {spec.brokers}")
    if spec.version not in KAFKA_VERSIONS:
        raise DevStackError(f"cluster {name!r}: no Kafka release {spec.version!r} (known: {', '.join(KAFKA_VERSIONS)})")
    default = _port(EXTRA_PORT_ENV, 30092) + EXTRA_PORT_STEP * index
    # A cluster in ZooKeeper mode keeps its metadata under a chroot of its own in the stack's ZooKeeper.
    chroot = "" if KAFKA_VERSIONS[spec.version].kraft else f"{zookeeper.address}/kafka-{name}"
    port = _port(_port_env(name), default)
    return Server(
        name=name,
        kind="kafka",
        port=port,
        authorizer=authorizer,
        brokers=spec.brokers,
        version=spec.version,
        zookeeper=chroot,
    )


def extra_record_file() -> Path:
    """``.dev/extra-clusters``: the extra clusters ``up`` started (``ferry dev down`` removes it)."""
    return dev_dir() / "extra-clusters"


def _recorded_extra() -> dict[str, tuple[int, ClusterSpec]]:
    """name -> (port, spec) of the extra clusters an earlier ``up`` started (``.dev/extra-clusters``,
    a line ``name:port[:brokers][:version]`` each)."""
    try:
        lines = extra_record_file().read_text().split()
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
    extra_record_file().write_text(
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


def record_extra(stack: Stack) -> None:
    """Adds ``stack``'s extra clusters to ``.dev/extra-clusters`` (``up`` does, before it starts them)."""
    if stack.extra:
        clusters = {**_recorded_extra(), **{s.name: (s.port, ClusterSpec(s.brokers, s.version)) for s in stack.extra}}
        dev_dir().mkdir(parents=True, exist_ok=True)
        _write_record(clusters)
