"""The embedded local stack: a real ZooKeeper and two single-node Apache Kafka clusters (KRaft),
and optionally one schema registry per cluster (Apicurio Registry, Confluent-compatible API).

``ferry dev up [--registries] | down | status``. Everything listens on loopback only; state, data and logs
live under ``.dev/`` (``FERRY_DEV_DIR``), the jars under ``.dev/jars/`` (``FERRY_JARS_DIR``),
fetched by ``make setup`` from the pinned ``deploy/pom.xml``.

Ports come from the environment:

========================  =======  ============================================
variable                  default  what
========================  =======  ============================================
``FERRY_DEV_ZK_PORT``     2181     ZooKeeper client port
``FERRY_DEV_SRC_PORT``    19092    cluster ``src`` broker port (its KRaft controller: +1)
``FERRY_DEV_DST_PORT``    29092    cluster ``dst`` broker port (its KRaft controller: +1)
``FERRY_DEV_SRC_REGISTRY_PORT``  18081  schema registry of ``src`` (with ``--registries``)
``FERRY_DEV_DST_REGISTRY_PORT``  28081  schema registry of ``dst`` (with ``--registries``)
========================  =======  ============================================

The registries run only when asked: ``ferry dev up --registries`` or ``FERRY_DEV_REGISTRIES=1``
(the schema tests set it). They keep their schemas in memory: a restart starts empty. Their
app is built by ``make registry`` (part of ``make setup``) from the pinned ``deploy/registry``.

States of one server (``ServerState``), as ``up`` and ``down`` move it::

    STOPPED --up--> STARTING --answers--> RUNNING --down--> STOPPED
                       |
                       +--exits or deadline--> FAILED (the error names the server and its log)

A server is ours when its pid file names a live process whose command line carries our config
file; ``down`` signals only such processes (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import argparse
import base64
import enum
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.errors import DevStackError

ZK_PORT_ENV = "FERRY_DEV_ZK_PORT"
SRC_PORT_ENV = "FERRY_DEV_SRC_PORT"
DST_PORT_ENV = "FERRY_DEV_DST_PORT"
SRC_REGISTRY_PORT_ENV = "FERRY_DEV_SRC_REGISTRY_PORT"
DST_REGISTRY_PORT_ENV = "FERRY_DEV_DST_REGISTRY_PORT"
REGISTRIES_ENV = "FERRY_DEV_REGISTRIES"
DEV_DIR_ENV = "FERRY_DEV_DIR"
JARS_DIR_ENV = "FERRY_JARS_DIR"

REPO_ROOT = Path(__file__).resolve().parent.parent
LOG4J2_CONFIG = REPO_ROOT / "deploy" / "log4j2.xml"


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


def dev_dir() -> Path:
    return Path(os.environ.get(DEV_DIR_ENV, REPO_ROOT / ".dev")).resolve()


def jars_dir() -> Path:
    return Path(os.environ.get(JARS_DIR_ENV, dev_dir() / "jars")).resolve()


@dataclass(frozen=True)
class Server:
    """One JVM of the stack: ZooKeeper (``kind == "zookeeper"``), a Kafka cluster, or a schema
    registry (``kind == "registry"``, named ``<cluster>-registry``)."""

    name: str
    kind: str
    port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller_port(self) -> int:
        return self.port + 1

    @property
    def home(self) -> Path:
        return dev_dir() / self.name

    @property
    def url(self) -> str:
        """A registry's base URL."""
        return f"http://{self.address}"

    @property
    def config_file(self) -> Path:
        names = {"zookeeper": "zoo.cfg", "registry": "application.properties"}
        return self.home / names.get(self.kind, "server.properties")

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
        jars = sorted((jars_dir() / "registry").glob("*-runner.jar"))
        if not jars:
            raise DevStackError(f"no registry in {jars_dir() / 'registry'}: run `make registry` (or `make setup`)")
        return jars[0]

    @property
    def classpath(self) -> str:
        folder = jars_dir() / ("zookeeper" if self.kind == "zookeeper" else "kafka")
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

    @property
    def servers(self) -> tuple[Server, ...]:
        return (self.zookeeper, self.src, self.dst, *self.registries)

    def registry_url(self, cluster: str) -> str:
        for server in self.registries:
            if server.name == f"{cluster}-registry":
                return server.url
        raise DevStackError(f"no registry for cluster {cluster!r} in this stack: start it with --registries")

    @property
    def kafka(self) -> tuple[Server, Server]:
        return (self.src, self.dst)

    def bootstrap(self, cluster: str) -> str:
        return {"src": self.src, "dst": self.dst}[cluster].address


def registries_wanted() -> bool:
    return os.environ.get(REGISTRIES_ENV, "").strip().lower() in ("1", "true", "yes")


def stack_from_env(registries: bool | None = None) -> Stack:
    """The stack at the ports of the environment; with registries when ``registries`` is true
    (None: when ``FERRY_DEV_REGISTRIES`` is set)."""
    with_registries = registries_wanted() if registries is None else registries
    return Stack(
        zookeeper=Server("zookeeper", "zookeeper", _port(ZK_PORT_ENV, 2181)),
        src=Server("src", "kafka", _port(SRC_PORT_ENV, 19092)),
        dst=Server("dst", "kafka", _port(DST_PORT_ENV, 29092)),
        registries=(
            Server("src-registry", "registry", _port(SRC_REGISTRY_PORT_ENV, 18081)),
            Server("dst-registry", "registry", _port(DST_REGISTRY_PORT_ENV, 28081)),
        ) if with_registries else (),
    )


# --- configuration files -------------------------------------------------------------------

def _zookeeper_config(server: Server) -> str:
    return "\n".join([
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
        "",
    ])


def _kafka_config(server: Server) -> str:
    listeners = f"PLAINTEXT://127.0.0.1:{server.port},CONTROLLER://127.0.0.1:{server.controller_port}"
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{server.controller_port}",
        "log.dirs": str(server.home / "data"),
        # One node: every internal topic has one replica.
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
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _registry_config(server: Server) -> str:
    # Quarkus reads this file (quarkus.config.locations); in-memory H2 storage, no auth.
    return "\n".join([
        f"quarkus.http.port={server.port}",
        "quarkus.http.host=127.0.0.1",
        "quarkus.log.console.level=WARN",
        "quarkus.log.file.enable=true",
        f"quarkus.log.file.path={server.log_file}",
        "",
    ])


def _jvm(server: Server, heap: str) -> list[str]:
    return [
        "java", f"-Xms{heap}", f"-Xmx{heap}",
        f"-Dferry.log.file={server.log_file}",
        f"-Dkafka.logs.dir={server.home}",
        f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
        "-Djava.awt.headless=true",
        "-cp", server.classpath,
    ]


def _command(server: Server) -> list[str]:
    if server.kind == "registry":
        # Small heap, serial GC, C1 only: two of them share two cores with everything else.
        return ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dquarkus.config.locations={server.config_file}", "-jar", str(server.runner_jar)]
    if server.kind == "zookeeper":
        return [*_jvm(server, "128m"), "org.apache.zookeeper.server.ZooKeeperServerMain", str(server.config_file)]
    return [*_jvm(server, "512m"), "kafka.Kafka", str(server.config_file)]


def _new_cluster_id() -> str:
    # 16 random bytes, URL-safe base64 without padding; Kafka's tool rejects one starting with '-'.
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _format_storage(server: Server) -> None:
    if (server.home / "data" / "meta.properties").exists():
        return
    cmd = [
        *_jvm(server, "256m"), "kafka.tools.StorageTool", "format", "--ignore-formatted",
        "--cluster-id", _new_cluster_id(), "--config", str(server.config_file), "--standalone",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise DevStackError(
            f"formatting storage of kafka '{server.name}' failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )


# --- processes -----------------------------------------------------------------------------

def _pid_of(server: Server) -> int | None:
    """The pid of our live process for ``server``, or None (a stale pid file is removed)."""
    try:
        pid = int(server.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        cmdline = []
    # Pids are recycled: only a process started with our config file is ours.
    marker = str(server.config_file).encode()
    ours = any(arg == marker or arg.endswith(b"=" + marker) for arg in cmdline)
    if not ours or _is_zombie(pid):
        server.pid_file.unlink(missing_ok=True)
        return None
    return pid


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _spawn(server: Server) -> int:
    server.home.mkdir(parents=True, exist_ok=True)
    writers = {"zookeeper": _zookeeper_config, "registry": _registry_config}
    server.config_file.write_text(writers.get(server.kind, _kafka_config)(server))
    if server.kind == "kafka":
        _format_storage(server)
    with open(server.stdout_file, "ab") as out:
        # A session of its own: the server outlives `ferry dev up` and ignores its Ctrl-C.
        proc = subprocess.Popen(
            _command(server), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=server.home,
        )
    server.pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def _answers(server: Server, timeout: float) -> bool:
    """Whether ``server`` really serves: a ZooKeeper session, or Kafka metadata with a broker."""
    if server.kind == "zookeeper":
        from kazoo.client import KazooClient
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError

        client = KazooClient(
            hosts=server.address, timeout=timeout, connection_retry={"max_tries": 0}, logger=_QUIET
        )
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
        return bool(metadata.brokers)
    except KafkaException:
        return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


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
    this call started, so a caller can stop exactly those.
    """
    stack = stack or stack_from_env()
    started: list[str] = []
    for server in stack.servers:
        if _pid_of(server) is not None:
            continue
        if _answers(server, timeout=1.0):
            raise DevStackError(
                f"{server.kind} '{server.name}': something else already serves {server.address}; "
                f"stop it or pick another port with {_env_of(server)}"
            )
        pid = _spawn(server)
        started.append(server.name)
        echo(f"started {server.name} ({server.kind}) on {server.address}, pid {pid}")
    for server in stack.servers:
        _wait_until_answers(server, deadline_s, clock, sleep)
    return started


def _env_of(server: Server) -> str:
    return {"zookeeper": ZK_PORT_ENV, "src": SRC_PORT_ENV, "dst": DST_PORT_ENV,
            "src-registry": SRC_REGISTRY_PORT_ENV, "dst-registry": DST_REGISTRY_PORT_ENV}.get(server.name, "")


def _wait_until_answers(
    server: Server, deadline_s: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> None:
    give_up = clock() + deadline_s
    while True:
        if _pid_of(server) is None:
            raise DevStackError(
                f"{server.kind} '{server.name}' exited while starting; its log is {server.log_file} "
                f"(and {server.stdout_file}):\n{_tail(server.stdout_file)}\n{_tail(server.log_file)}"
            )
        if _answers(server, timeout=2.0):
            return
        if clock() > give_up:
            raise DevStackError(
                f"{server.kind} '{server.name}' did not answer on {server.address} within {deadline_s:.0f}s; "
                f"its log is {server.log_file}:\n{_tail(server.log_file)}"
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
    order = [*stack.registries, *stack.kafka, stack.zookeeper]
    stopped = []
    for server in order:
        if wanted is not None and server.name not in wanted:
            continue
        pid = _pid_of(server)
        if pid is None:
            continue
        os.kill(pid, signal.SIGTERM)
        stopped.append((server, pid))
    for server, pid in stopped:
        give_up = clock() + grace_s
        while _pid_of(server) is not None and clock() < give_up:
            sleep(0.2)
        if _pid_of(server) is not None:
            os.kill(pid, signal.SIGKILL)
            echo(f"{server.name} did not stop within {grace_s:.0f}s; killed pid {pid}")
        server.pid_file.unlink(missing_ok=True)
        echo(f"stopped {server.name} (pid {pid})")
    return [server.name for server, _ in stopped]


def status(stack: Stack | None = None) -> list[dict[str, object]]:
    """One row per server; registries only when asked for or running."""
    stack = stack or stack_from_env()
    if not stack.registries:
        every = stack_from_env(registries=True)
        stack = Stack(stack.zookeeper, stack.src, stack.dst,
                      tuple(r for r in every.registries if _pid_of(r) is not None))
    rows: list[dict[str, object]] = []
    for server in stack.servers:
        rows.append({
            "name": server.name,
            "kind": server.kind,
            "address": server.address,
            "pid": _pid_of(server),
            "state": state_of(server).value,
            "log": str(server.log_file),
        })
    return rows


# --- CLI -----------------------------------------------------------------------------------

def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dev", help="the local ZooKeeper + two Kafka clusters (src, dst) [+ registries]")
    actions = parser.add_subparsers(dest="dev_action", required=True)
    up_parser = actions.add_parser("up", help="start what is not running and wait until all answer")
    up_parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each server")
    up_parser.add_argument("--registries", action="store_true",
                           help=f"also one schema registry per cluster (or set {REGISTRIES_ENV}=1)")
    up_parser.set_defaults(func=_cmd_up)
    actions.add_parser("down", help="stop what `up` started").set_defaults(func=_cmd_down)
    status_parser = actions.add_parser("status", help="what runs where")
    status_parser.add_argument("--json", action="store_true")
    status_parser.set_defaults(func=_cmd_status)


def _cmd_up(args: argparse.Namespace) -> int:
    stack = stack_from_env(registries=True if args.registries else None)
    up(stack, deadline_s=args.timeout)
    for row in status(stack):
        print(f"{row['name']:<12} {row['address']:<16} {row['state']}")
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    if not down():
        print("nothing to stop")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    rows = status()
    if args.json:
        import json

        json.dump(rows, sys.stdout, indent=2)
        print()
    else:
        print(f"{'NAME':<12} {'KIND':<10} {'ADDRESS':<16} {'PID':<8} {'STATE':<9} LOG")
        for row in rows:
            pid = row["pid"] if row["pid"] is not None else "-"
            print(f"{row['name']:<12} {row['kind']:<10} {row['address']:<16} {pid!s:<8} {row['state']:<9} {row['log']}")
    return 0
