"""`make demo`: Ferry end to end on the local stack.

Starts ZooKeeper and the two Kafka clusters, waits until both hand idempotent producers their
producer ids, starts a controller and two workers (real `ferry` processes), creates a topic on
`src`, whitelists it through the REST API, produces records with keys, headers and timestamps,
shows a progress bar until `dst` caught up, checks every record arrived in order, and prints
what was mirrored. The stack keeps running afterwards; the controller and workers stop.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

import requests
import yaml
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ferry.common import logs
from ferry.common.core import provenance
from ferry.common.errors import FerryError
from ferry.common.kafka import clients as kafka_clients
from ferry.common.paths import dev_dir
from ferry.devstack import stack as devstack
from ferry.devstack.processes import up as stack_up
from ferry.devstack.support import (
    Spawned,
    end_offsets,
    ferry_command,
    fleet_config,
    poll_until,
    produce_blocking,
    spawn,
    stop_all,
)

RECORDS = 50_000
PARTITIONS = 8
REST_PORT = int(os.environ.get("FERRY_DEMO_REST_PORT", "9000"))
# Two workers' metrics ports, e.g. FERRY_DEMO_METRICS_PORTS=9201,9202 beside another demo.
METRICS_PORTS = tuple(int(p) for p in os.environ.get("FERRY_DEMO_METRICS_PORTS", "9101,9102").split(","))[:2]
console = Console()

# librdkafka's own lines while the readiness probe waits (its retries of a refused producer id
# request): the probe says what it waits for, the retries are expected.
_PROBE_LOG = logging.getLogger("ferry.demo.readiness")
_PROBE_LOG.setLevel(logging.CRITICAL + 1)
_PROBE_LOG.propagate = False


def wait_for(what: str, condition: Callable[[], Any], timeout: float = 60.0) -> Any:
    return poll_until(condition, timeout, what, interval=0.3, ignoring=(requests.RequestException,))


def wait_for_producer_ids(cluster: dict[str, str], name: str, timeout: float = 60.0) -> None:
    """Waits until an idempotent producer of ``cluster`` holds its producer id; writes nothing.

    A broker that has just started answers an idempotent producer's id request with "Coordinator
    load in progress" until the KRaft controller gave it a block of ids; librdkafka retries and
    warns on each retry (``GETPID``). The producer's statistics say when it holds an id
    (``eos.idemp_state`` ``Assigned``); its log lines go nowhere.
    """
    idempotence: dict[str, Any] = {}
    producer = kafka_clients.producer(
        cluster,
        logger=_PROBE_LOG,
        stats_cb=lambda stats: idempotence.update(json.loads(stats).get("eos", {})),
        **{"statistics.interval.ms": 100},
    )

    def assigned() -> bool:
        producer.poll(0.1)
        return idempotence.get("idemp_state") == "Assigned"

    wait_for(f"{name} to give an idempotent producer its producer id", assigned, timeout)


def read_all(cluster: dict[str, str], admin: AdminClient, topic: str) -> dict[int, list[tuple]]:  # type: ignore[type-arg]
    """Every record of ``topic`` up to its log ends, per partition, read ``read_committed`` to the end by
    position: on an exactly-once route (the default) transaction markers take offsets that no consumer
    ever receives."""
    ends = end_offsets(admin, topic)
    consumer = kafka_clients.consumer(cluster, group_id="ferry-demo-reader", **{"isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    out: dict[int, list[tuple]] = {p: [] for p in ends}  # type: ignore[type-arg]
    unread = {p for p, end in ends.items() if end > 0}
    deadline = time.monotonic() + 120
    try:
        while unread and time.monotonic() < deadline:
            for m in consumer.consume(10_000, timeout=0.5):
                if m.error() is None:
                    out[m.partition()].append((m.key(), m.value(), provenance.split(m.headers())[0], m.timestamp()))
            positions = consumer.position([TopicPartition(topic, p) for p in unread])
            unread -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    finally:
        consumer.close()
    if unread:
        raise FerryError(f"{topic}: partitions {sorted(unread)} not read to their end within 120 s")
    return out


class CopiedCount:
    """How many records the destination topic holds for a ``read_committed`` reader, read as they come
    (its log-end offsets also count transaction markers)."""

    def __init__(self, cluster: dict[str, str], admin: AdminClient, topic: str) -> None:
        self._cluster, self._admin, self._topic = cluster, admin, topic
        self._consumer: Any = None
        self.count = 0

    def __call__(self) -> int:
        if self._consumer is None:
            try:
                partitions = end_offsets(self._admin, self._topic)
            except KafkaException:  # not there yet, or its leaders not elected yet
                return 0
            if len(partitions) < PARTITIONS:
                return 0  # the workers have not created it yet
            self._consumer = kafka_clients.consumer(
                self._cluster, group_id="ferry-demo-counter", **{"isolation.level": "read_committed"}
            )
            self._consumer.assign([TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions])
        while batch := self._consumer.consume(10_000, timeout=0.1):
            self.count += sum(1 for m in batch if m.error() is None)
        return self.count

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()


def main() -> int:
    # This process's own Kafka clients log through Python logging too (common.kafka_clients).
    logs.configure("WARNING", "text")
    stack = devstack.stack_from_env(registries=False)  # the demo uses no schema registry
    console.rule("[bold]Ferry demo")
    console.print("starting the local stack (ZooKeeper, Kafka [cyan]src[/], Kafka [cyan]dst[/]) ...")
    stack_up(stack, echo=lambda line: console.print(f"  {line}"))
    # The demo and the workers write with idempotent producers: both clusters must hand out ids.
    for name in ("src", "dst"):
        wait_for_producer_ids({"bootstrap.servers": stack.bootstrap(name)}, name)
    console.print("  [cyan]src[/] and [cyan]dst[/] are ready for idempotent producers")

    workdir = dev_dir() / "demo"
    workdir.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:6]
    config = fleet_config(
        stack,
        f"/ferry/demo-{run_id}",
        {
            "controller": {
                "rest_host": "127.0.0.1",
                "rest_port": REST_PORT,
                "rebalance_delay_s": 30,
                "failover_delay_s": 5,
            },
            "worker": {"commit_interval_s": 0.5},
        },
    )
    config_path = workdir / "ferry.yaml"
    config_path.write_text(yaml.safe_dump(config))
    processes: list[Spawned] = []

    def start(name: str, *args: str) -> None:
        log = workdir / f"{name}.log"
        log.unlink(missing_ok=True)  # this run's output only
        process = spawn(name, ferry_command(*args, "--config", str(config_path)), log)
        processes.append(process)
        console.print(f"  started {name} (pid {process.pid}), log {log}")

    try:
        console.print("starting a controller and two workers ...")
        start("controller", "controller", "--id", "controller-1", "--rest-port", str(REST_PORT))
        for i, port in enumerate(METRICS_PORTS, 1):
            start(f"worker-{i}", "worker", "--id", f"worker-{i}", "--metrics-port", str(port))
        api = f"http://127.0.0.1:{REST_PORT}"
        wait_for("the controller to lead", lambda: requests.get(f"{api}/health", timeout=2).json().get("leader"))
        wait_for("both workers", lambda: len(requests.get(f"{api}/instances", timeout=2).json()["instances"]) == 2)

        topic = f"demo.orders.{run_id}"
        src = {"bootstrap.servers": stack.bootstrap("src")}
        dst = {"bootstrap.servers": stack.bootstrap("dst")}
        dst_admin = kafka_clients.admin(dst)
        admin = kafka_clients.admin(src)
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
        console.print(f"created topic [cyan]{topic}[/] ({PARTITIONS} partitions) on src")

        response = requests.post(f"{api}/topics", json={"topic": topic}, timeout=10)
        console.print(
            f'POST /topics {{"topic": "{topic}"}} -> {response.status_code}, '
            f"workers -> partitions {response.json().get('workers')}"
        )
        if response.status_code != 201:
            return 1

        producer = kafka_clients.producer(src, **{"linger.ms": 20})
        now_ms = int(time.time() * 1000)
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            produced = progress.add_task("produced on src   ", total=RECORDS)
            copied = progress.add_task("mirrored to dst   ", total=RECORDS)
            copied_count = CopiedCount(dst, dst_admin, topic)
            for i in range(RECORDS):
                produce_blocking(
                    producer,
                    topic,
                    key=f"customer-{i % 977}".encode(),
                    value=f'{{"order": {i}}}'.encode(),
                    headers=[("source", b"demo"), ("seq", str(i).encode())],
                    timestamp=now_ms + i,
                    partition=i % PARTITIONS,
                )
                if i % 5000 == 4999:
                    producer.poll(0)
                    progress.update(produced, completed=i + 1)
                    progress.update(copied, completed=copied_count())
            producer.flush(60)
            progress.update(produced, completed=RECORDS)
            deadline = time.monotonic() + 180
            while (done := copied_count()) < RECORDS and time.monotonic() < deadline:
                progress.update(copied, completed=done)
                time.sleep(0.3)
            progress.update(copied, completed=done)
            copied_count.close()

        source, destination = read_all(src, admin, topic), read_all(dst, dst_admin, topic)
        view = requests.get(f"{api}/topics/{topic}", timeout=5).json()
        table = Table(title=f"mirrored {topic}: src -> dst")
        for column in ("partition", "worker", "state", "src records", "dst records", "identical, in order"):
            table.add_column(column)
        identical = True
        for p in sorted(source):
            same = source[p] == destination.get(p)
            identical &= same
            entry = view["externalView"].get(str(p), {})
            table.add_row(
                str(p),
                entry.get("worker", "-"),
                entry.get("state", "-"),
                str(len(source[p])),
                str(len(destination.get(p, []))),
                "yes" if same else "[red]NO[/]",
            )
        console.print(table)
        validation = requests.get(f"{api}/validation", timeout=5).json()
        mismatches = len(validation.get("mismatches", []))
        console.print(f"GET /validation -> summary {validation.get('summary')}, mismatches: {mismatches}")
        if not identical:
            console.print("[red]the destination differs from the source[/]")
            return 1
        console.print(
            f"[green]all {RECORDS} records mirrored with keys, headers and timestamps, in order per partition[/]"
        )
        console.print(
            f"REST API: {api} (GET /topics, /instances, /validation); metrics: "
            + ", ".join(f"http://127.0.0.1:{p}/metrics" for p in METRICS_PORTS)
        )
        return 0
    finally:
        stop_all(processes, timeout=30)
        console.print("controller and workers stopped; the stack keeps running (`make down` stops it)")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except FerryError as exc:  # the stack did not start, or something did not happen in time
        sys.exit(f"demo: {exc}")
