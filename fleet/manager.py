"""A fleet of Ferry controllers and workers as containers on one Docker engine.

Every container carries Ferry's labels (``io.ferry.fleet=<name>``, ``io.ferry.role``, index, port,
config path) and every lookup selects by the fleet's label only, so nothing else on the engine is
ever touched and fleets with different names coexist.

Networking: the host network. The containers reach the clusters and ZooKeeper at the addresses
the config names (``127.0.0.1:...`` for the local stack) exactly as a process on the host would,
and the controllers' advertised REST URLs (derived from ``rest_host`` and the port), where
standbys forward writes, are the same inside and outside the containers. The price is that every member needs its own
host port: the fleet picks free ones and records each in the container's ``io.ferry.port`` label.
So the fleet creates no network; ``down`` still removes any network labelled with the fleet.

A member's life: ``created -> running -> (SIGTERM: drain) -> exited -> removed``; a rolling
restart takes one member at a time through ``running -> exited -> running``. The manager waits on
the fleet's own view (controller REST ``/health``, ``/instances``, ``/validation``), polling
with a deadline; clock and sleep are injectable.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import requests

from ferry.common.config import load_config
from ferry.fleet import plan
from ferry.fleet.errors import FleetError, FleetNotFound, FleetTimeout
from ferry.fleet.image import require_image
from ferry.fleet.plan import CONTROLLER, WORKER, Member

HOST = "127.0.0.1"
# Covers a worker's drain (flush, commit, at most 10 s waiting for the leader) with room to spare.
STOP_TIMEOUT_S = 60
Log = Callable[[str], None]


def fleets(client: Any) -> list[str]:
    """Names of the fleets on the engine."""
    containers = client.containers.list(all=True, filters={"label": plan.LABEL_FLEET})
    return sorted({c.labels[plan.LABEL_FLEET] for c in containers})


def logs(client: Any, container_name: str, tail: int | None = None) -> str:
    """The output of a container of any fleet (only containers with a fleet label are looked at)."""
    for container in client.containers.list(all=True, filters={"label": plan.LABEL_FLEET}):
        if container.name == container_name:
            data: bytes = container.logs(tail=tail if tail is not None else "all")
            return data.decode(errors="replace")
    raise FleetNotFound(f"no container of a Ferry fleet is named {container_name!r} (see `ferry fleet status`)")


def _free_port(taken: set[int]) -> int:
    while True:
        with socket.socket() as sock:
            sock.bind((HOST, 0))
            port = int(sock.getsockname()[1])
        if port not in taken:
            return port


# A health probe's answers: 200, or 503 with the same body saying why not ready.
PROBE_ANSWERS = (200, 503)


def _get(url: str, timeout: float = 3, statuses: tuple[int, ...] = (200,)) -> Any | None:
    """The JSON body of an answer with one of ``statuses``, or None (not answering, another status, not JSON)."""
    try:
        response = requests.get(url, timeout=timeout)
        return response.json() if response.status_code in statuses else None
    except (requests.RequestException, ValueError):
        return None


class FleetManager:
    def __init__(
        self,
        *,
        client: Any,
        name: str,
        log: Log | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.name = plan.check_fleet_name(name)
        self._log = log or (lambda message: None)
        self._clock = clock
        self._sleep = sleep

    # -- reading the fleet ------------------------------------------------------------------

    def containers(self) -> list[Any]:
        return list(self.client.containers.list(all=True, filters={"label": f"{plan.LABEL_FLEET}={self.name}"}))

    def members(self) -> list[Member]:
        found = [Member.from_labels(c.name, c.labels, c.status) for c in self.containers()]
        return sorted(found, key=lambda m: (plan.ROLES.index(m.role) if m.role in plan.ROLES else 9, m.index))

    def require(self) -> list[Member]:
        members = self.members()
        if not members:
            others = fleets(self.client)
            known = f"fleets on this engine: {', '.join(others)}" if others else "no fleet runs on this engine"
            raise FleetNotFound(f"no fleet named {self.name!r} ({known})")
        return members

    def _container(self, member_name: str) -> Any:
        for container in self.containers():
            if container.name == member_name:
                return container
        raise FleetNotFound(f"fleet {self.name!r} has no container {member_name!r}")

    @staticmethod
    def url(member: Member) -> str:
        return f"http://{HOST}:{member.port}"

    def leader(self, members: list[Member] | None = None) -> Member | None:
        for member in members if members is not None else self.members():
            if member.role == CONTROLLER:
                health = _get(f"{self.url(member)}/health", timeout=2)
                if health and health.get("leader"):
                    return member
        return None

    def _rest(self, path: str, members: list[Member] | None = None) -> Any | None:
        """GET ``path`` from the first controller that answers (standbys answer reads)."""
        for member in members if members is not None else self.members():
            if member.role == CONTROLLER:
                body = _get(f"{self.url(member)}{path}")
                if body is not None:
                    return body
        return None

    def _rebalance(self) -> None:
        for member in self.members():
            if member.role == CONTROLLER:
                try:
                    if requests.post(f"{self.url(member)}/instances", timeout=30).status_code == 200:
                        return
                except requests.RequestException:
                    continue
        raise FleetError("no controller accepted the rebalance (POST /instances)")

    def _post(self, path: str) -> Any:
        """POST ``path`` to the first controller that accepts it (standbys forward to the leader)."""
        for member in self.members():
            if member.role == CONTROLLER:
                try:
                    answer = requests.post(f"{self.url(member)}{path}", timeout=30)
                except requests.RequestException:
                    continue
                if answer.status_code == 200:
                    return answer.json()
        raise FleetError(f"no controller accepted POST {path}")

    def _drain(self, member: Member, timeout_s: float) -> None:
        """Drains a worker through the controller (its partitions move to the others, flushed and
        committed first) and waits until it holds none, before it is stopped."""
        self._post(f"/workers/{member.name}/drain")
        self._wait(
            lambda: (self._rest(f"/workers/{member.name}") or {}).get("partitions") == 0,
            timeout_s,
            f"{member.name} to hold no partition",
        )
        self._log(f"drained {member.name}")

    def contenders(self) -> list[str]:
        """Ids of the controllers in the ZooKeeper election, the leader first (read from the
        config the fleet's containers mount; an unreachable ZooKeeper gives an empty list)."""
        from kazoo.exceptions import KazooException
        from kazoo.handlers.threading import KazooTimeoutError
        from kazoo.recipe.election import Election

        from ferry.common.zk.layout import ZkLayout, make_client

        containers = self.containers()
        if not containers:
            return []
        config = load_config(containers[0].labels[plan.LABEL_CONFIG])
        zk = make_client(config.zookeeper)
        try:
            zk.start(timeout=10)
            return [str(c) for c in Election(zk, ZkLayout(config.zookeeper.root).election).contenders()]
        except (KazooException, KazooTimeoutError):
            return []
        finally:
            zk.stop()
            zk.close()

    def _in_election(self, names: set[str]) -> bool:
        return names <= set(self.contenders())

    def status(self) -> dict[str, Any]:
        """Containers, each worker's health and partitions, the leader and the partition summary."""
        members = self.require()
        instances = {i["id"]: i for i in (self._rest("/instances", members) or {}).get("instances", [])}
        rows = []
        leader = None
        for member in members:
            row: dict[str, Any] = {"name": member.name, "role": member.role, "state": member.state, "port": member.port}
            if member.role == CONTROLLER:
                health = _get(f"{self.url(member)}/health", timeout=2, statuses=PROBE_ANSWERS) or {}
                row["health"] = health.get("status", "-")
                row["leader"] = "leader" if health.get("leader") else ("standby" if health else "-")
                if health.get("leader"):
                    leader = member.name
            else:
                health = _get(f"{self.url(member)}/health", timeout=2, statuses=PROBE_ANSWERS) or {}
                row["health"] = health.get("status", "-")
                instance = instances.get(member.name)
                row["partitions"] = len(instance["partitions"]) if instance else None
                row["states"] = health.get("partitions")
            rows.append(row)
        validation = self._rest("/validation", members)
        return {
            "fleet": self.name,
            "leader": leader,
            "members": rows,
            "summary": validation.get("summary") if validation else None,
            "ok": bool(validation and validation.get("ok")),
        }

    def scrape_targets(self) -> dict[str, list[dict[str, Any]]]:
        """Prometheus file_sd target groups (``ferry-controllers.json``, ``ferry-workers.json``):
        one group per container, labelled with the fleet and the container's name."""
        groups: dict[str, list[dict[str, Any]]] = {"ferry-controllers.json": [], "ferry-workers.json": []}
        for member in self.require():
            file = "ferry-controllers.json" if member.role == CONTROLLER else "ferry-workers.json"
            groups[file].append(
                {"targets": [f"{HOST}:{member.port}"], "labels": {"fleet": self.name, "member": member.name}}
            )
        return groups

    # -- waiting ----------------------------------------------------------------------------

    def _wait(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        deadline = self._clock() + timeout_s
        while True:
            result = condition()
            if result:
                return result
            if self._clock() >= deadline:
                raise FleetTimeout(f"fleet {self.name!r}: timed out after {timeout_s:.0f} s waiting for {what}")
            self._sleep(0.5)

    def _workers_registered(self, names: set[str], absent: frozenset[str] = frozenset()) -> bool:
        body = self._rest("/instances")
        if body is None:
            return False
        live = {i["id"] for i in body["instances"] if not i.get("leaving")}
        return names <= live and not (absent & live)

    def _all_online(self) -> bool:
        body = self._rest("/validation")
        if not body or not body.get("ok"):
            return False
        summary = body.get("summary") or {}
        return bool(summary.get("online") == summary.get("partitions"))

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Until a controller leads, every worker container is registered and every partition is ONLINE."""
        members = self.members()
        self._wait(lambda: self.leader(members), timeout_s, "a leading controller")
        workers = {m.name for m in members if m.role == WORKER}
        self._wait(lambda: self._workers_registered(workers), timeout_s, f"workers {sorted(workers)} to register")
        self._wait(self._all_online, timeout_s, "every partition to be ONLINE")

    # -- changing the fleet -----------------------------------------------------------------

    def _create(self, role: str, index: int, image: str, config: str) -> Member:
        taken = {
            int(c.labels.get(plan.LABEL_PORT, 0))
            for c in self.client.containers.list(all=True, filters={"label": plan.LABEL_FLEET})
        }
        port = _free_port(taken)
        name = plan.container_name(self.name, role, index)
        from docker.errors import APIError

        try:
            self.client.containers.run(
                image,
                command=plan.command(role, name, port),
                name=name,
                labels=plan.labels(self.name, role, index, port, config),
                network_mode="host",
                init=True,
                detach=True,
                stop_signal="SIGTERM",
                volumes={config: {"bind": plan.CONFIG_IN_CONTAINER, "mode": "ro"}},
                restart_policy={"Name": "unless-stopped"},
            )
        except APIError as exc:
            raise FleetError(f"could not start {name}: {exc.explanation or exc}") from None
        self._log(f"started {name} (port {port})")
        return Member(name, role, index, port, "running")

    def up(self, config: Path, controllers: int, workers: int, image: str, timeout_s: float = 180) -> None:
        if controllers < 1 or workers < 0:
            raise FleetError("--controllers must be at least 1 and --workers at least 0")
        loaded = load_config(config)  # a bad config: ConfigError, one message per key
        if loaded.controller.validation_interval_s > 0:
            raise FleetError(
                "controller.validation_interval_s > 0 asks for Spark validation, which Ferry's image "
                "leaves out (no pyspark, no Java); set it to 0 for a fleet"
            )
        existing = self.members()
        if existing:
            raise FleetError(
                f"fleet {self.name!r} exists already ({len(existing)} containers); "
                "use `ferry fleet scale` or `ferry fleet down`"
            )
        require_image(self.client, image)
        config_path = str(config.resolve())
        for index in range(1, controllers + 1):
            self._create(CONTROLLER, index, image, config_path)
        for index in range(1, workers + 1):
            self._create(WORKER, index, image, config_path)
        self.wait_ready(timeout_s)

    def _template(self) -> tuple[str, str]:
        """Image and config of the fleet's existing containers (new workers get the same)."""
        containers = self.containers()
        if not containers:
            raise FleetNotFound(f"no fleet named {self.name!r}")
        first = containers[0]
        return first.image.id, first.labels[plan.LABEL_CONFIG]

    def _stop(self, member: Member) -> int:
        """SIGTERM, wait for the drain and the exit; returns the exit status (0: drained)."""
        container = self._container(member.name)
        container.stop(timeout=STOP_TIMEOUT_S)
        status = int(container.wait(timeout=STOP_TIMEOUT_S + 10).get("StatusCode", -1))
        self._log(f"stopped {member.name} (exit status {status}{'' if status == 0 else ': NOT drained cleanly'})")
        return status

    def scale(self, workers: int, rebalance: bool = True, timeout_s: float = 180) -> None:
        """Adds or removes workers. Removal is one worker at a time: drained through the controller
        (its partitions move to the others, flushed and committed first, until it holds none), then
        SIGTERM, exit, remove, uncordon, and every partition ONLINE before the next one goes, so
        nothing is copied twice."""
        members = self.require()
        image, config = self._template()
        current = [m for m in members if m.role == WORKER]
        decided = plan.scale_plan((m.index for m in current), workers)
        added = [self._create(WORKER, index, image, config) for index in decided.add]
        if added:
            names = {m.name for m in added}
            self._wait(lambda: self._workers_registered(names), timeout_s, f"workers {sorted(names)} to register")
            if rebalance:
                self._rebalance()
        by_index = {m.index: m for m in current}
        undrained = []
        for index in decided.remove:
            member = by_index[index]
            self._drain(member, timeout_s)
            if self._stop(member) != 0:
                undrained.append(member.name)
            self._container(member.name).remove()
            self._post(f"/workers/{member.name}/uncordon")  # a worker added later under its name gets work
            self._wait(
                partial(self._workers_registered, set(), frozenset({member.name})), timeout_s, f"{member.name} to leave"
            )
            self._wait(self._all_online, timeout_s, "every partition to be ONLINE")
        self._wait(self._all_online, timeout_s, "every partition to be ONLINE")
        if undrained:
            raise FleetError(
                f"{', '.join(undrained)} did not drain cleanly (killed at the stop timeout): "
                "records after their last commit may be copied twice"
            )

    def restart_rolling(self, timeout_s: float = 180, rebalance: bool = True) -> list[str]:
        """Restarts one container at a time: workers, standby controllers, then the leader, so the
        lead moves once. Before a controller goes, every other controller is a contender in the
        ZooKeeper election (the successor's node is next in line, so the lead passes the moment
        the old leader's node goes); after each restart: it answers again (a controller: and is
        back in the election), a controller leads, and every partition is ONLINE.
        Returns the order taken."""
        members = self.require()
        leader = self.leader(members)
        order = plan.rolling_order(members, leader.name if leader else None)
        controllers = {m.name for m in members if m.role == CONTROLLER}
        for member in order:
            started = self._clock()
            if member.role == CONTROLLER and len(controllers) > 1:
                others = controllers - {member.name}
                self._wait(partial(self._in_election, others), timeout_s, f"{sorted(others)} to be in the election")
            self._container(member.name).restart(timeout=STOP_TIMEOUT_S)
            if member.role == WORKER:
                self._wait(
                    partial(self._workers_registered, {member.name}), timeout_s, f"{member.name} to register again"
                )
            else:
                self._wait(partial(_get, f"{self.url(member)}/health", 2), timeout_s, f"{member.name} to answer again")
                self._wait(
                    partial(self._in_election, {member.name}), timeout_s, f"{member.name} to rejoin the election"
                )
            self._wait(self.leader, timeout_s, "a leading controller")
            self._wait(self._all_online, timeout_s, "every partition to be ONLINE")
            self._log(f"restarted {member.name} ({self._clock() - started:.1f} s)")
        if rebalance and any(m.role == WORKER for m in order):
            self._rebalance()
            self._wait(self._all_online, timeout_s, "every partition to be ONLINE after the rebalance")
        return [m.name for m in order]

    def down(self) -> list[str]:
        """Stops the workers (SIGTERM: they drain at the same time), then the controllers, and removes
        every container and network with the fleet's label."""
        self.require()
        removed: list[str] = []
        for role in (WORKER, CONTROLLER):
            group = [c for c in self.containers() if c.labels.get(plan.LABEL_ROLE) == role]
            threads = [threading.Thread(target=c.stop, kwargs={"timeout": STOP_TIMEOUT_S}) for c in group]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        for container in self.containers():
            container.remove(force=True)
            removed.append(container.name)
            self._log(f"removed {container.name}")
        for network in self.client.networks.list(filters={"label": f"{plan.LABEL_FLEET}={self.name}"}):
            network.remove()
            removed.append(f"network {network.name}")
        return removed
