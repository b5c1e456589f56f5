"""The local stack's processes: one JVM per server, started, watched and stopped; ``up`` and ``down`` of a stack.

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

What runs where is :mod:`ferry.devstack.stack`'s; the files a server reads,
:mod:`ferry.devstack.server_files`'; its certificates and SCRAM user, :mod:`ferry.devstack.security`'s.
"""

from __future__ import annotations

import base64
import contextlib
import enum
import errno
import fcntl
import os
import re
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import psutil

from ferry.common.errors import DevStackError
from ferry.common.paths import dev_dir
from ferry.devstack import support
from ferry.devstack.security import ensure_certificates, ensure_scram_user, ensure_zookeeper_keystore
from ferry.devstack.server_files import LOG4J2_CONFIG, write_server_files
from ferry.devstack.stack import EXTRA_HEAP_ENV, Server, Stack, port_env_of, record_extra, stack_from_env
from ferry.devstack.support import QUIET


class ServerState(enum.Enum):
    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    FAILED = "failed"


# --- one server's JVM ----------------------------------------------------------------------


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


def pid_of(server: Server) -> int | None:
    """The pid of our live process for ``server``, or None. Only reads: see ``_forget_stale_pid``."""
    try:
        pid = int(server.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_ours(server, pid) else None


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
    if pid_of(server) is None:
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
    write_server_files(server)
    if server.kind == "kafka":
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

        client = KazooClient(hosts=server.address, timeout=timeout, connection_retry={"max_tries": 0}, logger=QUIET)
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

    conf: dict[str, Any] = {"bootstrap.servers": server.address, "logger": QUIET}
    admin = AdminClient(conf)
    try:
        metadata = admin.list_topics(timeout=timeout)
        return len(metadata.brokers) >= server.brokers  # a cluster of several: all of them
    except KafkaException:
        return False


def state_of(server: Server) -> ServerState:
    if pid_of(server) is None:
        return ServerState.STOPPED
    return ServerState.RUNNING if _answers(server, timeout=2.0) else ServerState.STARTING


# --- the stack: up, down, status ---------------------------------------------------------


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
    record_extra(stack)
    started: list[Server] = []
    with _stack_lock(deadline_s, clock, sleep):
        for server in stack.servers:
            if pid_of(server) is None:
                _start(server, deadline_s, clock, sleep, echo)
                started.append(server)
        for server in stack.servers:
            while not _wait_until_answers(server, deadline_s, clock, sleep, started_it=server in started):
                echo(f"{server.label} ({server.kind}) is gone (killed a moment ago?); starting it again")
                _start(server, deadline_s, clock, sleep, echo)
                started.append(server)
        for server in stack.kafka:
            if configured_with_sasl_ssl(server):
                ensure_scram_user(
                    cluster=server.name,
                    bootstrap=server.address,
                    sasl_ssl_bootstrap=server.sasl_ssl_bootstrap,
                    log_file=server.log_file,
                    deadline_s=deadline_s,
                    clock=clock,
                    sleep=sleep,
                )
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
            f"stop it or pick another port with {port_env_of(server)}"
        )
    give_up = clock() + deadline_s
    while not all(_port_free(port) for port in server.ports):
        if clock() > give_up:
            raise DevStackError(
                f"{server.kind} '{server.label}': ports {', '.join(map(str, server.ports))} are still taken "
                f"after {deadline_s:.0f}s; stop what holds them or pick other ports with {port_env_of(server)}"
            )
        sleep(0.2)
    pid = _spawn(server, clock, sleep)
    echo(f"started {server.label} ({server.kind}) on {server.address}, pid {pid}")


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
        if pid_of(server) is None:
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
            pid = pid_of(server)
            if pid is None:
                _forget_stale_pid(server)
                continue
            os.kill(pid, signal.SIGTERM)
            stopped.append((server, pid))
        for server, pid in stopped:
            give_up = clock() + grace_s
            while pid_of(server) is not None and clock() < give_up:
                sleep(0.2)
            if pid_of(server) is not None:
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
            zookeeper=stack.zookeeper,
            src=stack.src,
            dst=stack.dst,
            registries=tuple(r for r in every.registries if pid_of(r) is not None),
            extra=stack.extra,
        )
    rows: list[dict[str, object]] = []
    for server in stack.servers:
        rows.append(
            {
                "name": server.label,
                "kind": server.kind,
                "address": server.address,
                "pid": pid_of(server),
                "state": state_of(server).value,
                "log": str(server.log_file),
            }
        )
    return rows
