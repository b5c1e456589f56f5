"""The soak's nemesis: applies one fault of the schedule to the soak's processes and servers.

Which faults there are, and which of its methods runs each, is the fault table's (:mod:`.faults`).
Each fault returns once it is over (the process or server it hit runs again); meanwhile it waits
through ``pause``, which the soak gives it so that the supervisor keeps restarting whatever exits.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from ferry.bench.errors import BenchError
from ferry.bench.soak import faults
from ferry.bench.soak.supervisor import SupervisedProcess, Supervisor
from ferry.devstack import processes
from ferry.devstack.stack import Server, Stack

# A broker (or ZooKeeper) is down this long when restarted; a worker added by "scale" stays this long.
BROKER_DOWN_S = 10.0
SCALE_STAY_S = 25.0
# A worker held with SIGSTOP stays stopped this long past its ZooKeeper session timeout.
PAST_SESSION_S = 4.0
# The moves fault: this many operator moves, each 0.5-2 s after the previous one.
MOVES = 12


@dataclass(kw_only=True)
class Nemesis:
    supervisor: Supervisor
    stack: Stack
    draw: random.Random
    pause: Callable[[float], None]
    clock: Callable[[], float]
    session_timeout_s: float
    zookeeper_down_s: float
    echo: Callable[[str], None] = print
    _added: int = 0

    def apply(self, fault: str) -> dict[str, Any]:
        """Applies ``fault``; returns what it hit (``target``) and how long it took (``took_s``)."""
        started = self.clock()
        target = faults.named(fault).run(self)
        return {"fault": fault, "target": target, "took_s": round(self.clock() - started, 1)}

    def _some_worker(self) -> SupervisedProcess:
        workers = self.supervisor.running("worker")
        if not workers:
            raise BenchError("no worker is running to apply a fault to")
        return self.draw.choice(sorted(workers, key=lambda m: m.name))

    def _wait_restarted(self, member: SupervisedProcess, restarts_before: int, timeout: float = 60.0) -> None:
        deadline = self.clock() + timeout
        while not (member.restarts > restarts_before and member.process.alive()) and self.clock() < deadline:
            self.pause(0.2)

    def kill_worker(self) -> str:
        worker = self._some_worker()
        restarts = worker.restarts
        self.supervisor.kill(worker.name)
        self._wait_restarted(worker, restarts)
        return worker.name

    def stop_worker(self) -> str:
        worker = self._some_worker()
        worker.process.signal(signal.SIGSTOP)
        try:
            self.pause(self.session_timeout_s + PAST_SESSION_S)
        finally:
            worker.process.signal(signal.SIGCONT)
        return worker.name

    def _leader(self) -> SupervisedProcess | None:
        for controller in self.supervisor.running("controller"):
            try:
                if requests.get(f"{controller.url}/health", timeout=2).json().get("leader"):
                    return controller
            except (requests.RequestException, ValueError):
                continue
        return None

    def _await_leader(self) -> SupervisedProcess | None:
        """The leading controller, waited for up to 30 s (one may be starting again after a fault)."""
        deadline = self.clock() + 30.0
        leader = self._leader()
        while leader is None and self.clock() < deadline:
            self.pause(0.5)
            leader = self._leader()
        return leader

    def kill_leader(self) -> str:
        leader = self._await_leader()
        if leader is None:
            return "(no leader found)"
        restarts = leader.restarts
        self.supervisor.kill(leader.name)
        self._wait_restarted(leader, restarts)
        return leader.name

    def _up(self) -> None:
        processes.up(self.stack, deadline_s=300.0, clock=self.clock, sleep=self.pause, echo=self.echo)

    def stop_zookeeper(self) -> str:
        zookeeper = self.stack.zookeeper
        processes.down(self.stack, names=[zookeeper.name], clock=self.clock, sleep=self.pause, echo=self.echo)
        self.pause(self.zookeeper_down_s)
        self._up()
        return zookeeper.label

    def _some_broker(self, cluster: Server) -> Server:
        # Not a cluster's first broker while it has others: it is the cluster's one KRaft controller.
        nodes = cluster.nodes[1:] or cluster.nodes
        return self.draw.choice(nodes)

    def restart_broker(self, cluster: str) -> str:
        """Restarts one broker of the soak's ``cluster``: ``src`` or ``dst`` (its servers have names of their own)."""
        broker = self._some_broker({"src": self.stack.src, "dst": self.stack.dst}[cluster])
        pid = processes.pid_of(broker)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = self.clock() + 60.0
            while processes.pid_of(broker) is not None and self.clock() < deadline:
                self.pause(0.2)
            if processes.pid_of(broker) is not None:
                os.kill(pid, signal.SIGKILL)
        self.pause(BROKER_DOWN_S)
        self._up()
        return broker.label

    def add_and_remove_worker(self) -> str:
        self._added += 1
        name = f"extra{self._added}"
        self.supervisor.start("worker", name)
        self.pause(SCALE_STAY_S)
        self.supervisor.retire(name)
        return name

    def _operate(self, leader: SupervisedProcess, worker: str, verb: str) -> None:
        try:
            requests.post(f"{leader.url}/workers/{worker}/{verb}", timeout=10)
        except requests.RequestException as exc:  # the soak goes on; the verdict says what it cost
            self.echo(f"soak: {verb} {worker} failed: {exc}")

    def move_partitions(self) -> str:
        """Moves partitions between live workers faster than they acknowledge: a drain and an uncordon,
        two drains chained less than a second apart, a cordon, a worker joining and leaving."""
        leader = self._await_leader()
        if leader is None:
            return "(no leader found)"
        extra: str | None = None
        names = sorted(m.name for m in self.supervisor.running("worker"))
        for _ in range(MOVES):
            if len(names) < 2:
                break
            a, b = self.draw.sample(names, 2)
            move = self.draw.choice(["drain", "chain", "cordon", "join" if extra is None else "leave"])
            if move in ("drain", "cordon"):
                self._operate(leader, a, move)
                self.pause(self.draw.uniform(0.5, 2.0))
                self._operate(leader, a, "uncordon")
            elif move == "chain":
                self._operate(leader, a, "drain")
                self.pause(self.draw.uniform(0.2, 0.9))
                self._operate(leader, b, "drain")
                self._operate(leader, a, "uncordon")
                self.pause(self.draw.uniform(0.2, 0.9))
                self._operate(leader, b, "uncordon")
            elif move == "join":
                self._added += 1
                extra = f"extra{self._added}"
                self.supervisor.start("worker", extra)
            else:
                assert extra is not None
                self.supervisor.retire(extra)
                extra = None
            self.pause(self.draw.uniform(0.5, 2.0))
        if extra is not None:
            self.supervisor.retire(extra)
        for name in names:
            self._operate(leader, name, "uncordon")
        return f"{MOVES} moves"
