"""The soak's supervisor: runs ``ferry controller`` and ``ferry worker`` processes and starts again any
that exited, as systemd's ``Restart=always`` would, counting the restarts per process."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ferry.devstack.support import Spawned, ferry_command, free_port, spawn, stop_all


@dataclass(kw_only=True)
class SupervisedProcess:
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


@dataclass(kw_only=True)
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
    members: dict[str, SupervisedProcess] = field(default_factory=dict)

    def _spawn(self, name: str, kind: str, port: int) -> Spawned:
        flag = "--rest-port" if kind == "controller" else "--metrics-port"
        command = ferry_command(kind, "--config", str(self.config_path), "--id", name, flag, str(port))
        return spawn(name, command, self.workdir / f"{name}.log")

    def start(self, kind: str, name: str) -> SupervisedProcess:
        port = free_port()
        member = SupervisedProcess(name=name, kind=kind, port=port, process=self._spawn(name, kind, port))
        self.members[name] = member
        return member

    def running(self, kind: str) -> list[SupervisedProcess]:
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
