"""The soak's servers and Ferry processes: a stack of its own, the fleet's config, and a supervisor.

The soak's stack is a ZooKeeper and two Kafka clusters of its own (:func:`soak_stack`, on ports no
other part of the local stack uses), so stopping them never touches the shared stack. The
destination has three brokers by default: the destination topic gets three replicas
(:func:`route`), so restarting one broker leaves it writable.

The :class:`Supervisor` runs ``ferry controller`` and ``ferry worker`` processes and starts again
any that exited, as systemd's ``Restart=always`` would, counting the restarts per process.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.devstack.stack import Server, Stack
from ferry.devstack.support import Spawned, ferry_command, free_port, spawn, stop_all

ZOOKEEPER_PORT = 31600
SRC_PORT = 31612
DST_PORT = 31622  # brokers on 31622, 31625, 31628 (each also + 1 and + 2)


def soak_stack(dst_brokers: int = 3) -> Stack:
    """The soak's own ZooKeeper, a one-broker source and a ``dst_brokers``-broker destination."""
    return Stack(
        zookeeper=Server("soak-zookeeper", "zookeeper", ZOOKEEPER_PORT),
        src=Server("soak-src", "kafka", SRC_PORT),
        dst=Server("soak-dst", "kafka", DST_PORT, brokers=dst_brokers),
    )


def route(topic: str, replicas: int, options: Mapping[str, Any]) -> dict[str, Any]:
    """The soak's one route, src -> dst over ``topic``: the one place its keys are chosen.
    ``options`` (``--route-option key=value``) are added last and win."""
    return {
        "source": "src",
        "destination": "dst",
        "include": [topic],
        "replication_factor": replicas,
        **options,
    }


def fleet_config(
    stack: Stack, zk_root: str, topic: str, session_timeout_s: float, route_options: Mapping[str, Any]
) -> dict[str, Any]:
    """The config every controller and worker of the soak reads."""
    return {
        "zookeeper": {"connect": stack.zookeeper.address, "root": zk_root, "session_timeout_s": session_timeout_s},
        "clusters": {
            "src": {"bootstrap.servers": stack.src.bootstrap},
            "dst": {"bootstrap.servers": stack.dst.bootstrap},
        },
        "routes": [route(topic, stack.dst.brokers, route_options)],
        "controller": {
            "rest_host": "127.0.0.1",
            "rebalance_delay_s": 3.0,
            "failover_delay_s": 2.0,
            "observer_interval_s": 2.0,
            "lag_interval_s": 1.0,
        },
        "worker": {"commit_interval_s": 0.5},
    }


@dataclass
class Member:
    """One supervised process: its name (``c1``, ``w1``), kind (``controller`` or ``worker``), HTTP port,
    the running process, and how often the supervisor started it again (``exits_on_its_own``: the
    restarts after exits the nemesis did not cause)."""

    name: str
    kind: str
    port: int
    process: Spawned
    restarts: int = 0
    exits_on_its_own: int = 0
    exited_at: float | None = None
    exit_expected: bool = False
    retired: bool = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Supervisor:
    """Starts controllers and workers and keeps them running.

    States of a member: RUNNING -> EXITED (killed, or by itself) -> RUNNING again ``restart_delay_s``
    after the exit (one restart counted); :meth:`retire` moves it to RETIRED (stopped, never started
    again). A stopped (SIGSTOP) process is running: it is left alone. :meth:`tick` does the restarts;
    the soak calls it about once a second.
    """

    config_path: Path
    workdir: Path
    clock: Callable[[], float]
    restart_delay_s: float = 2.0
    members: dict[str, Member] = field(default_factory=dict)

    def _spawn(self, name: str, kind: str, port: int) -> Spawned:
        flag = "--rest-port" if kind == "controller" else "--metrics-port"
        command = ferry_command(kind, "--config", str(self.config_path), "--id", name, flag, str(port))
        return spawn(name, command, self.workdir / f"{name}.log")

    def start(self, kind: str, name: str) -> Member:
        port = free_port()
        member = Member(name, kind, port, self._spawn(name, kind, port))
        self.members[name] = member
        return member

    def running(self, kind: str) -> list[Member]:
        return [m for m in self.members.values() if m.kind == kind and not m.retired and m.process.alive()]

    def expect_exit(self, name: str) -> None:
        """The nemesis is about to end ``name``: its restart is not counted as an exit on its own."""
        self.members[name].exit_expected = True

    def kill(self, name: str) -> None:
        """kill -9, and reap it (the supervisor starts it again)."""
        self.expect_exit(name)
        self.members[name].process.kill()

    def retire(self, name: str, timeout: float = 30.0) -> None:
        """Stops ``name`` for good (SIGTERM, SIGKILL after ``timeout`` s)."""
        member = self.members[name]
        member.retired = True
        member.process.stop(timeout)

    def tick(self) -> None:
        now = self.clock()
        for member in self.members.values():
            if member.retired or member.process.alive():
                continue
            if member.exited_at is None:
                member.exited_at = now
                if not member.exit_expected:
                    member.exits_on_its_own += 1
            if now - member.exited_at >= self.restart_delay_s:
                member.process = self._spawn(member.name, member.kind, member.port)
                member.restarts += 1
                member.exited_at, member.exit_expected = None, False

    def stop_all(self) -> None:
        for member in self.members.values():
            member.retired = True
            member.process.signal(signal.SIGCONT)  # a stopped process would not see SIGTERM until continued
        stop_all([m.process for m in self.members.values()], timeout=20)

    def summary(self) -> list[dict[str, Any]]:
        return [
            {"name": m.name, "kind": m.kind, "restarts": m.restarts, "exitsOnItsOwn": m.exits_on_its_own}
            for m in self.members.values()
        ]
