"""``ferry bench-failover``: how far a failed-over consumer group lands from where it was.

The same workload goes through Ferry and through MirrorMaker 2 (checkpoints and group sync on),
each on a topic of its own, one partition, ``records`` records whose value is their sequence
number. Then, for each lag L, a group commits at ``records - L`` on the source (L records behind
the mirror's head). Ferry translates with ``ferry groups sync``; MirrorMaker 2 with its checkpoint
connector and ``sync.group.offsets``. For each system and lag the command reads the record at the
group's destination offset and reports how many records a consumer starting there re-reads
(already processed at the source) or skips (never processed).

It also measures, in this process, the CPU cost per record of Ferry's provenance header
(:func:`common.core.provenance.stamp`) and of the offset map (:meth:`common.core.offset_map.OffsetMap.record`).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.bench.errors import BenchError
from ferry.bench.systems import FerryWorkers, MirrorMaker2
from ferry.common.core.offset_map import OffsetMap
from ferry.common.core.provenance import stamp
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.stack import Stack
from ferry.devstack.support import (
    WaitTimeout,
    commit_offset,
    committed_offset,
    end_offsets,
    ferry_command,
    poll_until,
    produce_blocking,
)

_WAIT_S = 300.0


class MirrorMaker2WithCheckpoints(MirrorMaker2):
    """MirrorMaker 2 as a failover setup runs it: offset syncs, checkpoints and group sync on, fast."""

    def __init__(self, *, stack: Stack, workdir: Path, slug: str, groups: str) -> None:
        super().__init__(stack=stack, workdir=workdir, partitions=1, slug=slug, tasks=1)
        self.groups = groups
        self.name, self.label = "mm2-checkpoints", "MirrorMaker 2, checkpoints + sync.group.offsets"

    def properties(self, topics: list[str]) -> dict[str, str]:
        props = super().properties(topics)
        s, d = self.src_alias, self.dst_alias
        props.pop("emit.offset-syncs.enabled", None)  # MM2 refuses offset-syncs.* settings when off
        props.update(
            {
                "emit.checkpoints.enabled": "true",
                "emit.checkpoints.interval.seconds": "1",
                "sync.group.offsets.enabled": "true",
                "sync.group.offsets.interval.seconds": "1",
                "refresh.groups.enabled": "true",
                "refresh.groups.interval.seconds": "2",
                "refresh.topics.interval.seconds": "2",
                f"{s}->{d}.groups": self.groups,
                "offset-syncs.topic.replication.factor": "1",
            }
        )
        return props


def _produce(cluster: dict[str, str], topic: str, records: int) -> None:
    admin = kafka_clients.admin(cluster)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = kafka_clients.producer(cluster, **{"linger.ms": 20})
    for seq in range(records):
        produce_blocking(producer, topic, value=str(seq).encode(), partition=0)
    if producer.flush(60):
        raise BenchError(f"the source did not take every record of {topic}")


def _end(cluster: dict[str, str], topic: str) -> int:
    """The log-end offset of ``topic``'s partition 0; -1 while it cannot be read."""
    try:
        return end_offsets(kafka_clients.admin(cluster), topic).get(0, -1)
    except KafkaException:
        return -1


def _wait(what: str, condition: Callable[[], bool], timeout: float = _WAIT_S) -> None:
    poll_until(condition, timeout, what, interval=0.5)


def _seq_at(cluster: dict[str, str], topic: str, offset: int, records: int) -> int:
    """The sequence number of the destination record at ``offset`` (``records`` past the end)."""
    if offset >= _end(cluster, topic):
        return records
    consumer = kafka_clients.consumer(cluster, "ferry-bench-failover-read")
    consumer.assign([TopicPartition(topic, 0, offset)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                return int(message.value() or b"-1")
        raise BenchError(f"could not read {topic} at offset {offset}")
    finally:
        consumer.close()


def _outcome(system: str, lag: int, committed: int, destination: int | None, seq: int | None) -> dict[str, Any]:
    if destination is None or seq is None:
        return {
            "system": system,
            "lag": lag,
            "sourceOffset": committed,
            "destinationOffset": None,
            "reread": None,
            "skipped": None,
        }
    return {
        "system": system,
        "lag": lag,
        "sourceOffset": committed,
        "destinationOffset": destination,
        "reread": max(0, committed - seq),
        "skipped": max(0, seq - committed),
    }


def header_and_map_cost(records: int = 200_000) -> dict[str, float]:
    """CPU nanoseconds per record of stamping the provenance header and of extending the offset map."""
    headers = [("origin", b"bench"), ("trace", b"0123456789abcdef")]
    started = time.process_time()
    for offset in range(records):
        stamp(headers, "src", offset, source_topic="bench", destination_topic="bench")
    header_ns = (time.process_time() - started) / records * 1e9
    offsets = OffsetMap()
    started = time.process_time()
    for offset in range(records):
        offsets.record(offset, offset)
    map_ns = (time.process_time() - started) / records * 1e9
    return {"headerNsPerRecord": round(header_ns, 1), "mapNsPerRecord": round(map_ns, 1)}


def run_failover(stack: Stack, workdir: Path, records: int, lags: list[int], skip_mm2: bool = False) -> dict[str, Any]:
    slug = uuid.uuid4().hex[:8]
    source = {"bootstrap.servers": stack.bootstrap("src")}
    destination = {"bootstrap.servers": stack.bootstrap("dst")}
    results: list[dict[str, Any]] = []

    ferry_topic = f"fo-ferry-{slug}"
    _produce(source, ferry_topic, records)
    ferry = FerryWorkers(stack=stack, workdir=workdir, partitions=1, slug=f"fo{slug}", workers=1)
    try:
        ferry.start([ferry_topic])
        ferry.go([ferry_topic])
        _wait("Ferry to copy every record", lambda: _end(destination, ferry_topic) >= records)
        config = ferry.config()
        config["routes"][0]["groups"] = [f"fo-ferry-{slug}-.*"]
        config_path = workdir / f"{slug}-groups.yaml"
        config_path.write_text(yaml.safe_dump(config))
        for lag in lags:
            group, committed = f"fo-ferry-{slug}-lag{lag}", records - lag
            commit_offset(source, group, ferry_topic, committed)
            answer = subprocess.run(
                ferry_command(
                    "--log-level", "WARNING", "groups", "sync", group, "--config", str(config_path), "--json"
                ),
                capture_output=True,
                text=True,
                timeout=120,
            )
            if answer.returncode != 0:
                raise BenchError(f"ferry groups sync {group}: {answer.stderr.strip()[-500:]}")
            dest = committed_offset(destination, group, ferry_topic)
            seq = None if dest is None else _seq_at(destination, ferry_topic, dest, records)
            method = next((p["method"] for row in json.loads(answer.stdout) for p in row["partitions"]), None)
            results.append({**_outcome("ferry", lag, committed, dest, seq), "method": method})
    finally:
        ferry.stop()
        ferry.cleanup()

    if not skip_mm2:
        mm2_topic = f"fo-mm2-{slug}"
        _produce(source, mm2_topic, records)
        mm2 = MirrorMaker2WithCheckpoints(stack=stack, workdir=workdir, slug=f"fo{slug}", groups=f"fo-mm2-{slug}-.*")
        try:
            mm2.start([mm2_topic])
            _wait("MirrorMaker 2 to copy every record", lambda: _end(destination, mm2_topic) >= records)
            groups = {lag: f"fo-mm2-{slug}-lag{lag}" for lag in lags}
            for lag, group in groups.items():
                commit_offset(source, group, mm2_topic, records - lag)
            with contextlib.suppress(WaitTimeout):
                _wait(
                    "MirrorMaker 2 to sync every group",
                    lambda: all(committed_offset(destination, g, mm2_topic) is not None for g in groups.values()),
                    180,
                )
            for lag, group in groups.items():
                dest = committed_offset(destination, group, mm2_topic)
                seq = None if dest is None else _seq_at(destination, mm2_topic, dest, records)
                results.append({**_outcome("mm2", lag, records - lag, dest, seq), "method": "checkpoint"})
        finally:
            mm2.stop()
            mm2.cleanup()
    return {"records": records, "results": results, "cost": header_and_map_cost()}


def render(report: dict[str, Any]) -> None:
    print(f"failover of a consumer group, {report['records']:,} records in one partition")
    print(f"{'system':8} {'lag':>8} {'source':>9} {'dest':>9} {'method':>10} {'re-read':>8} {'skipped':>8}")
    for r in report["results"]:
        print(
            f"{r['system']:8} {r['lag']:>8} {r['sourceOffset']:>9} {r['destinationOffset']!s:>9} "
            f"{r['method']!s:>10} {r['reread']!s:>8} {r['skipped']!s:>8}"
        )
    cost = report["cost"]
    print(f"CPU per record: provenance header {cost['headerNsPerRecord']} ns, offset map {cost['mapNsPerRecord']} ns")
