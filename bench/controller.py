"""``ferry bench controller``: one real controller (and a standby) against fake workers, at scale.

Measures the controller at scale on the local stack (``ferry dev up``): a given number of
topics and partitions, ``N`` fake workers (:mod:`bench.fake_workers`: kazoo sessions in a few
processes that speak the worker protocol and report every assigned partition ONLINE), and the
controller as a process of its own (``python -m ferry.cli controller``), measured from outside:

1. whitelisting: all but the last ``--single-posts`` topics in bulk ``POST /topics`` requests of
   ``--batch-topics`` topics, then the rest one ``POST /topics`` each (their latency); the time
   until every partition is ONLINE at the fake workers;
2. steady state over ``--steady-s``: the controller's CPU (``/proc``), its ZooKeeper reads and
   writes per second and its reconciles (its ``/metrics``), and how often the observer and lag
   jobs ran or were skipped;
3. REST read latencies (``GET /validation``, ``/instances``, ``/topics``);
4. a worker's failover: one fake worker's session closes; the time until all its partitions are
   ONLINE elsewhere, beyond ``failover_delay_s``;
5. a rebalance onto a joining worker: the time until it holds its share and everything is
   ONLINE, beyond ``rebalance_delay_s``;
6. leader failover: ``kill -9`` of the leader; when the standby leads, and when its
   ``/validation`` shows every partition ONLINE on its ideal worker again.

The topics exist only in ZooKeeper (``controller.check_source_topics: false``): the local broker
cannot hold 160,000 partitions. The observer and lag jobs still run against the source cluster
(they find none of those topics there) and are counted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import multiprocessing
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from ferry.bench.errors import BenchError
from ferry.bench.procstat import cpu_seconds, machine
from ferry.common.errors import FerryError
from ferry.common.vocabulary import ControllerState
from ferry.devstack.support import ferry_command, fleet_config, free_port, poll_until, spawn

ROUTE = "src.dst"
# The figures of Ferry's first controller (a whole-state reconcile, one read per node), measured on the
# benchmark machine with one controller and 50-200 fake workers: the report prints them beside today's.
BEFORE_16K = {
    "whitelist_s": "255 s for 4,000 partitions one POST each; ~6 s per POST at 2,000 topics",
    "post_median_ms": "181 -> 834 (first/last 50 of 500)",
    "reconcile_s": "3.0-3.5 (read 1.1-1.6 + plan 1.9)",
    "steady_cpu_pct": "54-58",
    "zk_reads_per_s": "986",
    "failover_beyond_delay_s": "8.3-8.6",
    "rebalance_beyond_delay_s": "97 (12,000 moves, 50 -> 200 workers)",
    "observer_lag_runs": "0 of 12 in 90 s",
    "rest_ms": "/validation 1,800 (max 3,500), /instances 800, /topics 700",
    "leader_failover_s": "8.5 leads, 15.4 consistent",
    "max_transaction_bytes": "1.55 MB (refused by ZooKeeper) at 500 workers x 320 partitions",
}


@dataclass(frozen=True)
class Size:
    partitions: int
    workers: int

    @classmethod
    def parse(cls, text: str) -> Size:
        try:
            partitions, workers = (int(part.replace("_", "").replace(",", "")) for part in text.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not PARTITIONS:WORKERS, e.g. 16000:200") from None
        if partitions < 1 or workers < 1:
            raise argparse.ArgumentTypeError("partitions and workers must be positive")
        return cls(partitions, workers)


@dataclass(kw_only=True)
class ControllerBenchOptions:
    sizes: list[Size]
    topic_partitions: int = 8
    processes: int = 4
    batch_topics: int = 1000
    single_posts: int = 50
    steady_s: float = 30.0
    failover_delay_s: float = 5.0
    rebalance_delay_s: float = 10.0
    session_timeout_s: float = 6.0  # the controllers' (leader failover waits for it)
    worker_session_timeout_s: float = 30.0  # the fake workers' (thousands of sessions on two cores)
    observer_interval_s: float = 10.0
    lag_interval_s: float = 10.0
    timeout_s: float = 600.0
    keep: bool = False  # keep the ZooKeeper root of each size
    phases: list[str] = field(
        default_factory=lambda: ["whitelist", "steady", "rest", "failover", "rebalance", "leader"]
    )


# -- the fake workers' fleet ------------------------------------------------------------------


class Fleet:
    """Fake workers in ``processes`` processes; tracks how many partitions each reports ONLINE."""

    def __init__(self, connect: str, root: str, session_timeout_s: float) -> None:
        self._connect, self._root, self._session_timeout_s = connect, root, session_timeout_s
        self.online: dict[str, int] = {}
        self.changed = threading.Condition()
        self._pipes: list[Any] = []
        self._processes: list[Any] = []
        self._owner: dict[str, int] = {}
        self._replies: dict[int, list[tuple[Any, ...]]] = {}

    def start(self, worker_ids: list[str], processes: int, timeout_s: float) -> None:
        context = multiprocessing.get_context("spawn")
        from ferry.bench.fake_workers import fleet_main

        groups = [worker_ids[i::processes] for i in range(min(processes, len(worker_ids)))]
        for index, ids in enumerate(groups):
            parent, child = context.Pipe()
            process = context.Process(
                target=fleet_main, args=(self._connect, self._root, ids, self._session_timeout_s, child), daemon=True
            )
            process.start()
            self._pipes.append(parent)
            self._processes.append(process)
            self._replies[index] = []
            for worker in ids:
                self._owner[worker] = index
            threading.Thread(target=self._listen, args=(index, parent), daemon=True).start()
        self._wait(
            lambda: all(any(r[0] == "ready" for r in self._replies[i]) for i in self._replies),
            timeout_s,
            "the fake workers to start",
        )

    def _listen(self, index: int, pipe: Any) -> None:
        while True:
            try:
                message = pipe.recv()
            except (EOFError, OSError):
                return
            with self.changed:
                if message[0] == "online":
                    self.online[message[1]] = message[2]
                else:
                    self._replies[index].append(message)
                self.changed.notify_all()

    def _wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while not condition():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BenchError(f"timed out after {timeout_s:.0f}s waiting for {what}")
                self.changed.wait(min(left, 1.0))

    def total(self) -> int:
        return sum(self.online.values())

    def wait_online(self, partitions: int, timeout_s: float, extra: Callable[[], bool] = lambda: True) -> float:
        """Waits until the workers report ``partitions`` ONLINE (and ``extra``); returns when, time.time()."""
        self._wait(lambda: self.total() == partitions and extra(), timeout_s, f"{partitions:,} partitions ONLINE")
        return time.time()

    def command(self, kind: str, worker: str, process: int | None = None) -> None:
        index = self._owner.get(worker, 0) if process is None else process
        self._owner[worker] = index
        before = len(self._replies[index])
        self._pipes[index].send((kind, worker))
        self._wait(lambda: len(self._replies[index]) > before, 120, f"the fleet to {kind} {worker}")
        if kind in ("kill", "leave"):
            with self.changed:
                self.online[worker] = 0

    def stop(self) -> None:
        for pipe in self._pipes:
            try:
                pipe.send(("stop",))
            except OSError:
                continue
        for process in self._processes:
            process.join(60)
            if process.is_alive():
                process.kill()


# -- the controller processes -----------------------------------------------------------------


class ControllerProcess:
    """``python -m ferry.cli controller`` with its own REST port and log file."""

    def __init__(self, config_path: Path, controller_id: str, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.controller_id = controller_id
        self.process = spawn(
            controller_id,
            ferry_command(
                "controller", "--config", str(config_path), "--id", controller_id, "--rest-port", str(self.port)
            ),
            workdir / f"{controller_id}.log",
        )

    def get(self, path: str, timeout: float = 60.0) -> Any:
        return requests.get(self.url + path, timeout=timeout)

    def health(self) -> dict[str, Any] | None:
        try:
            answer: dict[str, Any] = self.get("/health", 2.0).json()
            return answer
        except (requests.RequestException, ValueError):
            return None

    def wait(self, condition: Callable[[dict[str, Any]], bool], timeout_s: float, what: str) -> float:
        def reached() -> bool:
            if not self.process.alive():
                raise BenchError(f"controller {self.controller_id} exited with {self.process.returncode}; see its log")
            health = self.health()
            return health is not None and condition(health)

        poll_until(reached, timeout_s, f"controller {self.controller_id} {what}", interval=0.05)
        return time.time()

    def metrics(self) -> dict[str, float]:
        """Sample name (with labels) -> value, from ``/metrics``."""
        from prometheus_client.parser import text_string_to_metric_families

        values: dict[str, float] = {}
        for family in text_string_to_metric_families(self.get("/metrics").text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return values

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.process.pid)

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> None:
        self.process.stop(timeout=30)


# -- one size ---------------------------------------------------------------------------------


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _job(metrics: dict[str, float], name: str, job: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(f"{name}{{") and f"job={job}" in k)


def _histogram(before: dict[str, float], after: dict[str, float], name: str) -> dict[str, float | None]:
    """Count, mean and an upper bound of the max (the smallest bucket holding every new sample)."""
    count = after.get(f"{name}_count", 0) - before.get(f"{name}_count", 0)
    total = after.get(f"{name}_sum", 0) - before.get(f"{name}_sum", 0)
    bound = None
    buckets = sorted(
        (float(k.split("le=")[1].rstrip("}")), after[k] - before.get(k, 0))
        for k in after
        if k.startswith(f"{name}_bucket{{")
    )
    for le, n in buckets:
        if n >= count:
            bound = le
            break
    return {"count": count, "mean_s": total / count if count else None, "max_below_s": bound}


def _write_config(workdir: Path, stack: Any, root: str, options: ControllerBenchOptions, name: str) -> Path:
    config = fleet_config(
        stack,
        root,
        {
            "zookeeper": {"session_timeout_s": options.session_timeout_s},
            "controller": {
                "failover_delay_s": options.failover_delay_s,
                "rebalance_delay_s": options.rebalance_delay_s,
                "observer_interval_s": options.observer_interval_s,
                "lag_interval_s": options.lag_interval_s,
                "check_source_topics": False,
            },
        },
    )
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def run_size(
    size: Size, options: ControllerBenchOptions, stack: Any, workdir: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    topics = -(-size.partitions // options.topic_partitions)
    partitions = topics * options.topic_partitions
    root = f"/ferry-bench-controller-{int(time.time())}-{size.partitions}"
    config_path = _write_config(workdir, stack, root, options, f"controller-{size.partitions}")
    result: dict[str, Any] = {"partitions": partitions, "topics": topics, "workers": size.workers, "root": root}
    controllers: list[ControllerProcess] = []
    fleet = Fleet(stack.zookeeper.address, root, options.worker_session_timeout_s)
    try:
        leader = ControllerProcess(config_path, "c1", workdir)
        controllers.append(leader)
        leader.wait(lambda h: bool(h.get("leader")), 60, "to lead")
        worker_ids = [f"fake-{i:05d}" for i in range(size.workers)]
        started = time.time()
        fleet.start(worker_ids, options.processes, options.timeout_s)
        result["fleet_start_s"] = round(time.time() - started, 1)
        # The leader must know every worker before topics arrive: a worker it sees late would
        # get its share through the rebalance (``rebalance_delay_s`` later), not the whitelisting.
        deadline = time.monotonic() + options.timeout_s
        while len(leader.get("/instances").json()["instances"]) < size.workers:
            if time.monotonic() > deadline:
                raise BenchError("the leader never listed every fake worker")
            time.sleep(0.5)
        time.sleep(options.rebalance_delay_s + 1)  # the joins' rebalance runs now, not amid the whitelisting
        log(f"{size.workers} fake workers registered in {result['fleet_start_s']}s")

        # 1. whitelisting
        names = [f"bench-{i:06d}" for i in range(topics)]
        bulk, singles = names[: max(0, topics - options.single_posts)], names[max(0, topics - options.single_posts) :]
        session = requests.Session()
        started = time.time()
        bulk_s: list[float] = []
        for i in range(0, len(bulk), options.batch_topics):
            body = {
                "topics": [
                    {"topic": t, "numPartitions": options.topic_partitions} for t in bulk[i : i + options.batch_topics]
                ]
            }
            sent = time.perf_counter()
            answer = session.post(leader.url + "/topics", json=body, timeout=options.timeout_s)
            bulk_s.append(time.perf_counter() - sent)
            if answer.status_code != 201:
                raise BenchError(f"bulk POST /topics answered {answer.status_code}: {answer.text[:300]}")
        latencies = []
        before_singles = leader.metrics()
        for topic in singles:
            sent = time.perf_counter()
            answer = session.post(
                leader.url + "/topics",
                json={"topic": topic, "numPartitions": options.topic_partitions},
                timeout=options.timeout_s,
            )
            latencies.append(time.perf_counter() - sent)
            if answer.status_code != 201:
                raise BenchError(f"POST /topics answered {answer.status_code}: {answer.text[:300]}")
        posted = time.time()
        done = fleet.wait_online(partitions, options.timeout_s)
        # The reconciles of the single POSTs and of the statuses they caused: the everyday ones.
        result["reconcile_single_posts"] = _histogram(
            before_singles, leader.metrics(), "ferry_controller_reconcile_seconds"
        )
        result["whitelist"] = {
            "all_online_s": round(done - started, 2),
            "posts_done_s": round(posted - started, 2),
            "bulk_posts": len(bulk_s),
            "bulk_topics_per_post": options.batch_topics,
            "bulk_post_median_ms": _ms(statistics.median(bulk_s)) if bulk_s else None,
            "single_posts": len(latencies),
            "post_median_ms": _ms(statistics.median(latencies)) if latencies else None,
            "post_p95_ms": _ms(_percentile(latencies, 0.95)),
        }
        log(f"whitelist: {result['whitelist']}")

        # 2. steady state: once the leader itself shows every partition ONLINE (it has taken in
        # every worker's report), with nothing more to do
        caught_up = _wait_consistent(leader, partitions, options.timeout_s)
        result["whitelist"]["leader_consistent_s"] = round(caught_up - started, 2)
        time.sleep(3)
        before, cpu_before, at_before = leader.metrics(), leader.cpu_seconds(), time.monotonic()
        time.sleep(options.steady_s)
        after, cpu_after, at_after = leader.metrics(), leader.cpu_seconds(), time.monotonic()
        window = at_after - at_before
        result["steady"] = {
            "window_s": round(window, 1),
            "controller_cpu_pct": round(100 * (cpu_after - cpu_before) / window, 1),
            "zk_reads_per_s": round(
                (after["ferry_controller_zk_reads_total"] - before["ferry_controller_zk_reads_total"]) / window, 1
            ),
            "zk_writes_per_s": round(
                (after["ferry_controller_zk_writes_total"] - before["ferry_controller_zk_writes_total"]) / window, 1
            ),
            "reconcile": _histogram(before, after, "ferry_controller_reconcile_seconds"),
            "jobs": {
                job: {
                    "runs": _job(after, "ferry_controller_job_runs_total", job)
                    - _job(before, "ferry_controller_job_runs_total", job),
                    "skips": _job(after, "ferry_controller_job_skips_total", job)
                    - _job(before, "ferry_controller_job_skips_total", job),
                }
                for job in ("observe", "lag", "resync", "reconcile")
            },
        }
        result["reconcile_whole_run"] = _histogram({}, after, "ferry_controller_reconcile_seconds")
        result["plan_whole_run"] = _histogram({}, after, "ferry_controller_plan_seconds")
        log(f"steady: {result['steady']}")

        # 3. REST reads
        rest = {}
        for path in ("/validation", "/instances", "/topics"):
            times = []
            for _ in range(10):
                sent = time.perf_counter()
                answer = leader.get(path)
                times.append(time.perf_counter() - sent)
                answer.raise_for_status()
            rest[path] = {"median_ms": _ms(statistics.median(times)), "max_ms": _ms(max(times))}
        result["rest"] = rest
        log(f"rest: {rest}")

        # 4. worker failover
        victim = worker_ids[0]
        killed = time.time()
        fleet.command("kill", victim)
        done = fleet.wait_online(partitions, options.timeout_s)
        result["worker_failover"] = {
            "worker": victim,
            "all_online_after_s": round(done - killed, 2),
            "beyond_failover_delay_s": round(done - killed - options.failover_delay_s, 2),
        }
        log(f"worker failover: {result['worker_failover']}")

        # 5. rebalance onto a joining worker (after the rebalance the kill scheduled has run)
        time.sleep(options.rebalance_delay_s + 2)
        fleet.wait_online(partitions, options.timeout_s)
        joiner = "fake-joiner"
        share = partitions // size.workers  # workers alive after the kill and the join: size.workers
        joined = time.time()
        fleet.command("join", joiner, process=0)
        done = fleet.wait_online(partitions, options.timeout_s, lambda: fleet.online.get(joiner, 0) >= share)
        result["rebalance"] = {
            "joiner_partitions": fleet.online.get(joiner, 0),
            "all_online_after_s": round(done - joined, 2),
            "beyond_rebalance_delay_s": round(done - joined - options.rebalance_delay_s, 2),
        }
        log(f"rebalance: {result['rebalance']}")
        final = leader.metrics()
        result["zk_leader"] = {
            "reads": final["ferry_controller_zk_reads_total"],
            "writes": final["ferry_controller_zk_writes_total"],
            "transactions": final["ferry_controller_zk_transactions_total"],
            "max_transaction_bytes": final["ferry_controller_zk_max_transaction_bytes"],
            "max_node_bytes": final["ferry_controller_zk_max_node_bytes"],
            "job_skips_total": sum(v for k, v in final.items() if k.startswith("ferry_controller_job_skips_total")),
        }

        # 6. leader failover
        standby = ControllerProcess(config_path, "c2", workdir)
        controllers.append(standby)
        standby.wait(lambda h: h.get("state") == ControllerState.STANDBY and h.get("status") == "ok", 60, "to stand by")
        killed = time.time()
        leader.kill()
        leads = standby.wait(lambda h: bool(h.get("leader")), options.timeout_s, "to lead")

        # Until its first reconcile a new leader answers /validation from ZooKeeper, which still
        # shows the old leader's views: wait for that reconcile (it read the state and wrote).
        deadline = time.monotonic() + options.timeout_s
        while standby.metrics().get("ferry_controller_reconcile_seconds_count", 0) < 1:
            if time.monotonic() > deadline:
                raise BenchError("the new leader never reconciled")
            time.sleep(0.2)
        consistent = _wait_consistent(standby, partitions, options.timeout_s)
        result["leader_failover"] = {
            "session_timeout_s": options.session_timeout_s,
            "leads_after_s": round(leads - killed, 2),
            "consistent_after_s": round(consistent - killed, 2),
        }
        after_standby = standby.metrics()
        result["reconcile_takeover"] = _histogram({}, after_standby, "ferry_controller_reconcile_seconds")
        result["zk_standby"] = {
            "max_transaction_bytes": after_standby["ferry_controller_zk_max_transaction_bytes"],
            "max_node_bytes": after_standby["ferry_controller_zk_max_node_bytes"],
        }
        log(f"leader failover: {result['leader_failover']}")
    finally:
        fleet.stop()
        for controller in controllers:
            controller.stop()
        if not options.keep:
            started = time.time()
            delete_tree(stack.zookeeper.address, root)
            log(f"deleted {root} in {time.time() - started:.1f}s")
    return result


def delete_tree(connect: str, root: str) -> None:
    """Deletes ``root`` and everything under it, each folder's children pipelined (not one by one)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError, NotEmptyError

    zk = KazooClient(hosts=connect, timeout=30)
    zk.start(timeout=60)
    try:

        def remove(path: str) -> None:
            try:
                children = zk.get_children(path)
            except NoNodeError:
                return
            pending = [(f"{path}/{c}", zk.delete_async(f"{path}/{c}")) for c in children]
            for child, answer in pending:
                try:
                    answer.get()
                except NotEmptyError:
                    remove(child)
                except NoNodeError:
                    continue
            with contextlib.suppress(NoNodeError):
                zk.delete(path)

        remove(root)
    finally:
        zk.stop()
        zk.close()


def _wait_consistent(controller: ControllerProcess, partitions: int, timeout_s: float) -> float:
    """Waits until ``controller``'s /validation is clean with every partition ONLINE; returns when."""

    def consistent() -> bool:
        summary = controller.get("/validation").json()
        return bool(summary.get("ok") and summary["summary"]["online"] == partitions)

    poll_until(
        consistent,
        timeout_s,
        f"controller {controller.controller_id} to show every partition ONLINE",
        interval=0.2,
        ignoring=(requests.RequestException, ValueError, KeyError),
    )
    return time.time()


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def render(results: list[dict[str, Any]]) -> str:
    header = (
        "| size | whitelist all | POST /topics median | reconcile mean (max <) | steady controller CPU "
        "| ZK reads/s, writes/s | max txn / node | failover beyond delay | joiner rebalance beyond delay "
        "| leader failover (leads / consistent) | GET /validation, /instances, /topics median |"
    )
    lines = [header, "|" + "---|" * 11]
    for r in results:
        steady, reconcile = r.get("steady", {}), r.get("steady", {}).get("reconcile", {})
        whole = r.get("reconcile_whole_run", {})
        singles = r.get("reconcile_single_posts", {})
        rest = r.get("rest", {})
        zk = r.get("zk_leader", {})
        lines.append(
            f"| {r['partitions']:,} partitions, {r['workers']:,} workers "
            f"| {r.get('whitelist', {}).get('all_online_s')} s "
            f"| {r.get('whitelist', {}).get('post_median_ms')} ms "
            f"| steady {_fmt_s(reconcile.get('mean_s'))} (< {_fmt_s(reconcile.get('max_below_s'))}); "
            f"single POSTs {_fmt_s(singles.get('mean_s'))} (< {_fmt_s(singles.get('max_below_s'))}); "
            f"whole run {_fmt_s(whole.get('mean_s'))} (< {_fmt_s(whole.get('max_below_s'))}) "
            f"| {steady.get('controller_cpu_pct')} % "
            f"| {steady.get('zk_reads_per_s')}, {steady.get('zk_writes_per_s')} "
            f"| {_kb(zk.get('max_transaction_bytes'))} / {_kb(zk.get('max_node_bytes'))} "
            f"| {r.get('worker_failover', {}).get('beyond_failover_delay_s')} s "
            f"| {r.get('rebalance', {}).get('beyond_rebalance_delay_s')} s "
            f"| {r.get('leader_failover', {}).get('leads_after_s')} s "
            f"/ {r.get('leader_failover', {}).get('consistent_after_s')} s "
            f"| {', '.join(str(rest.get(p, {}).get('median_ms')) for p in ('/validation', '/instances', '/topics'))}"
            " ms |"
        )
    return "\n".join(lines)


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _kb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1024:.0f} KiB"


# -- the command ------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--size",
        dest="sizes",
        type=Size.parse,
        action="append",
        metavar="PARTITIONS:WORKERS",
        help="a size to run, e.g. 16000:200 (repeatable; default 16000:200 and 160000:2000)",
    )
    parser.add_argument("--processes", type=int, default=4, help="processes for the fake workers (default 4)")
    parser.add_argument(
        "--batch-topics",
        type=int,
        default=1000,
        help="topics per bulk POST /topics (default 1000, the most one may hold)",
    )
    parser.add_argument(
        "--single-posts",
        type=int,
        default=50,
        help="topics whitelisted last, one POST each, for the POST latency (default 50)",
    )
    parser.add_argument("--steady-s", type=float, default=30.0, help="steady-state window (default 30)")
    parser.add_argument("--failover-delay-s", type=float, default=5.0, help="controller.failover_delay_s (default 5)")
    parser.add_argument(
        "--rebalance-delay-s", type=float, default=10.0, help="controller.rebalance_delay_s (default 10)"
    )
    parser.add_argument(
        "--session-timeout-s", type=float, default=6.0, help="the controllers' ZooKeeper session timeout (default 6)"
    )
    parser.add_argument(
        "--worker-session-timeout-s",
        type=float,
        default=30.0,
        help="the fake workers' ZooKeeper session timeout (default 30)",
    )
    parser.add_argument("--timeout-s", type=float, default=900.0, help="the longest any phase may take (default 900)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument(
        "--workdir", metavar="DIR", help="configs and controller logs (default: a new temporary folder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep each size's ZooKeeper root (default: deleted)")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="the controller at scale: fake workers, many partitions")
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import tempfile

    from ferry.devstack import processes
    from ferry.devstack import stack as devstack

    sizes = args.sizes or [Size(16_000, 200), Size(160_000, 2_000)]
    if args.processes < 1 or args.batch_topics < 1 or args.single_posts < 0:
        raise FerryError("--processes and --batch-topics must be at least 1, --single-posts at least 0")
    options = ControllerBenchOptions(
        sizes=sizes,
        processes=args.processes,
        batch_topics=args.batch_topics,
        single_posts=args.single_posts,
        steady_s=args.steady_s,
        failover_delay_s=args.failover_delay_s,
        rebalance_delay_s=args.rebalance_delay_s,
        timeout_s=args.timeout_s,
        session_timeout_s=args.session_timeout_s,
        worker_session_timeout_s=args.worker_session_timeout_s,
        keep=args.keep,
    )
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="ferry-bench-controller-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stack = devstack.stack_from_env()
    processes.up(stack)
    logging.getLogger("kazoo").setLevel(logging.WARNING)  # thousands of sessions' connection chatter
    results = []
    for size in sizes:
        print(f"== {size.partitions:,} partitions, {size.workers:,} workers", flush=True)
        results.append(run_size(size, options, stack, workdir, lambda line: print(f"   {line}", flush=True)))
    report = {
        "machine": machine(),
        "options": asdict(options),
        "results": results,
        "before": BEFORE_16K,
        "command": " ".join(sys.argv),
        "workdir": str(workdir),
    }
    print(render(results))
    print(f"logs and configs: {workdir}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0
