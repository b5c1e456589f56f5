"""Moving over from MirrorMaker 2: Ferry continues a mirror the real MirrorMaker 2 ran, without copying it again.

MirrorMaker 2 (dedicated mode, from the local stack's jars, as `ferry bench` runs it) mirrors a
topic of two partitions and a consumer group from src to dst (default replication policy: the
copy is `<alias>.<topic>`), flushes its offsets, copies a few more records and is killed with -9
before its next flush. `ferry import-mm2 --takeover` converts its properties; a controller and a
worker continue. Every source record is on the destination once, except the ones MirrorMaker 2
copied after its last flush, which Ferry copied again and reported (per partition); the group
keeps its position on the destination and reads on from there without skipping a record.

The imported route has no ``delivery_guarantee`` (MirrorMaker 2 ran at least once): Ferry continues it
exactly once, its default, so its copies come with transaction markers that take destination offsets;
the destination's records are counted and read read_committed, to its end by the consumer's position.
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import requests
import yaml
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from ferry.common.kafka import clients as kafka_clients
from ferry.common.kafka.compacted import read_topic
from ferry.common.mm2 import records
from ferry.common.paths import jars_dir
from ferry.devstack import stack as devstack
from ferry.devstack.server_files import LOG4J2_CONFIG
from ferry.devstack.support import commit_offset, committed_offset, ferry_command, spawn, stop_all
from tests.harness import read_committed
from tests.harness.processes import HEADER_SEQ, Fleet, RecordLedger, wait_until

PARTITIONS = 2
GROUP_AT = 40  # the group's committed offset on each source partition


def _seqs(cluster: dict[str, str], topic: str, start: dict[int, int] | None = None) -> dict[int, list[int]]:
    """Partition -> the sequence numbers of ``topic`` on ``cluster`` from ``start`` (default: the beginning) to the
    end."""
    consumer = kafka_clients.consumer(cluster, f"mm2-takeover-read-{uuid.uuid4().hex[:6]}")
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        begin = start or {p: OFFSET_BEGINNING for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, begin[p]) for p in range(PARTITIONS)])
        found: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        position = {p: (begin[p] if begin[p] >= 0 else 0) for p in range(PARTITIONS)}

        def drained() -> bool:
            left = sum(max(0, ends[p] - position[p]) for p in range(PARTITIONS))  # consume() waits while it has fewer
            for message in consumer.consume(max(1, min(10_000, left)), 0.5):
                if message.error() is None and message.offset() < ends[message.partition()]:
                    found[message.partition()].append(int(dict(message.headers() or [])[HEADER_SEQ]))
            # The position, not the last record's offset: transaction markers take offsets too.
            for tp in consumer.position([TopicPartition(topic, p) for p in range(PARTITIONS)]):
                position[tp.partition] = max(position[tp.partition], tp.offset)
            return all(position[p] >= ends[p] for p in range(PARTITIONS))

        wait_until(drained, 60, f"{topic} read to its end")
        return found
    finally:
        consumer.close()


def _mm2_properties(stack: devstack.Stack, source: str, target: str, topic: str, group: str) -> dict[str, str]:
    return {
        "clusters": f"{source}, {target}",
        f"{source}.bootstrap.servers": stack.bootstrap("src"),
        f"{target}.bootstrap.servers": stack.bootstrap("dst"),
        f"{source}->{target}.enabled": "true",
        f"{source}->{target}.topics": topic,
        f"{source}->{target}.groups": group,
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "emit.checkpoints.interval.seconds": "1",
        "emit.heartbeats.enabled": "false",
        # Connect flushes the source offsets this often: the records copied after a flush are what a takeover copies
        # again.
        f"{target}.offset.flush.interval.ms": "3000",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "dedicated.mode.enable.internal.rest": "false",
    }


def _flushed(dst: dict[str, str], source: str, topic: str) -> dict[int, int]:
    """Partition -> the last source offset MirrorMaker 2 flushed to Connect's offsets topic."""
    last: dict[int, int] = {}
    for key, value in read_topic(dst, f"mm2-offsets.{source}.internal", "mm2-takeover-test"):
        offset_key = records.source_offset_key(key or b"")
        offset = records.source_offset_value(value)
        if offset_key and offset_key.topic == topic and offset is not None:
            last[offset_key.partition] = offset
    return last


def _recopied(worker_url: str, topic: str) -> dict[int, int] | None:
    """Partition -> what the worker reports it copied again, once it reports every partition."""
    text = requests.get(f"{worker_url}/metrics", timeout=5).text
    found = {}
    for line in text.splitlines():
        if line.startswith("ferry_worker_mm2_recopied_records{") and f'topic="{topic}"' in line:
            partition = int(line.split('partition="')[1].split('"')[0])
            found[partition] = int(float(line.rsplit(" ", 1)[1]))
    return found if len(found) == PARTITIONS else None


def _delete_mm2_topics(stack: devstack.Stack, token: str) -> None:
    """MirrorMaker 2's internal topics (Connect's offsets topic alone has 25 partitions) off the shared stack."""
    for cluster in ("src", "dst"):
        admin = kafka_clients.admin({"bootstrap.servers": stack.bootstrap(cluster)})
        mine = [t for t in admin.list_topics(timeout=10).topics if token in t and t.startswith("mm2-")]
        if mine:
            for future in admin.delete_topics(mine, operation_timeout=30).values():
                future.result(timeout=30)


def test_ferry_continues_a_mirrormaker2_mirror_copying_again_only_what_it_reports(
    fleet: Fleet, local_stack: devstack.Stack, tmp_path: Path
) -> None:
    token = uuid.uuid4().hex[:8]
    try:
        _takeover(fleet, local_stack, tmp_path, token)
    finally:
        _delete_mm2_topics(local_stack, token)


def _takeover(fleet: Fleet, local_stack: devstack.Stack, tmp_path: Path, token: str) -> None:
    began = time.monotonic()
    source, target = f"s{token}", f"d{token}"
    topic, group = f"mm2-takeover-{token}", f"mm2-takeover-group-{token}"
    mirrored = f"{source}.{topic}"  # MirrorMaker 2's default replication policy
    src = {"bootstrap.servers": local_stack.bootstrap("src")}
    dst = {"bootstrap.servers": local_stack.bootstrap("dst")}
    ledger = RecordLedger(local_stack, topic, PARTITIONS)
    ledger.create_source_topic()
    ledger.produce(200)
    for partition in range(PARTITIONS):
        commit_offset(src, group, topic, GROUP_AT, partition)

    properties = tmp_path / "mm2.properties"
    properties.write_text(
        "".join(f"{k} = {v}\n" for k, v in _mm2_properties(local_stack, source, target, topic, group).items())
    )
    mm2 = spawn(
        "mm2",
        [
            "java",
            "-Xmx512m",
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dferry.log.file={tmp_path / 'mm2.log'}",
            "-cp",
            f"{jars_dir('kafka')}/*",
            "org.apache.kafka.connect.mirror.MirrorMaker",
            str(properties),
        ],
        tmp_path / "mm2-stdout.log",
    )

    def copied(count: int) -> bool:
        return sum(read_committed.counts(dst, mirrored).values()) >= count

    try:
        wait_until(lambda: copied(200), 120, "MirrorMaker 2 to copy the first 200 records")
        wait_until(
            lambda: all(committed_offset(dst, group, mirrored, p) is not None for p in range(PARTITIONS)),
            60,
            "MirrorMaker 2 to sync the group's offsets to the destination",
        )
        wait_until(lambda: _flushed(dst, source, topic) == {0: 99, 1: 99}, 60, "MirrorMaker 2 to flush its offsets")
        ledger.produce(50)  # copied by MirrorMaker 2, maybe not flushed before it dies
        wait_until(lambda: copied(250), 60, "MirrorMaker 2 to copy 250 records")
    finally:
        mm2.signal(signal.SIGKILL)
        stop_all([mm2], timeout=10)
    group_on_destination = {p: committed_offset(dst, group, mirrored, p) for p in range(PARTITIONS)}

    converted = subprocess.run(
        ferry_command("import-mm2", "--takeover", str(properties)), capture_output=True, text=True, timeout=60
    )
    assert converted.returncode == 0, converted.stderr
    # Connect's own storage topics have no equivalent in Ferry: said, not dropped silently.
    assert "ferry import-mm2: not converted: config.storage.replication.factor=1 (" in converted.stderr
    imported: dict[str, Any] = yaml.safe_load(converted.stdout)
    assert imported["routes"][0]["replication_factor"] == 1
    assert (
        imported["routes"][0]["naming"] == "prefix" and imported["routes"][0]["mirrormaker2"]["source_alias"] == source
    )
    fleet.extra = {
        "clusters": imported["clusters"],
        "routes": imported["routes"],
        "controller": {**imported["controller"], "observer_interval_s": 1.0, "checkpoint_interval_s": 1.0},
    }
    fleet.write_config()
    controller = fleet.start_controller("c1")
    worker = fleet.start_worker("w1")
    fleet.wait_for_leader(controller)

    ledger.produce(50)  # after the takeover: Ferry's alone
    recopied: dict[int, int] = wait_until(
        lambda: _recopied(worker.url, topic), 60, "the worker to report what it copies again"
    )
    wait_until(lambda: copied(300 + sum(recopied.values())), 60, "Ferry to copy the rest")

    on_source = _seqs(src, topic)
    on_destination = _seqs(dst, mirrored)
    for partition in range(PARTITIONS):
        by_mm2 = 125  # MirrorMaker 2 copied 250 records, the first 250 of the 300, half in each partition
        ferry_start = by_mm2 - recopied[partition]
        assert 0 <= recopied[partition] <= 25  # at most what it copied after its flush at 100 per partition
        # MirrorMaker 2's copies, then Ferry's from where MirrorMaker 2 last flushed: each record once but the
        # reported ones.
        assert on_destination[partition] == on_source[partition][:by_mm2] + on_source[partition][ferry_start:]

    def seeded() -> bool:
        answer = requests.get(f"{controller.url}/groups/{group}", timeout=5).json()
        methods = {t["partition"]: (t["method"], t["destinationOffset"]) for t in answer["groups"][0]["partitions"]}
        return methods == {p: ("mirrormaker2", group_on_destination[p]) for p in range(PARTITIONS)}

    wait_until(seeded, 30, "the checkpoint job to translate the group by MirrorMaker 2's checkpoints")
    assert {p: committed_offset(dst, group, mirrored, p) for p in range(PARTITIONS)} == group_on_destination
    read_on = _seqs(dst, mirrored, start={p: int(group_on_destination[p] or 0) for p in range(PARTITIONS)})
    for partition in range(PARTITIONS):
        assert set(on_source[partition][GROUP_AT:]) <= set(read_on[partition]), (
            "the group skipped records on the destination"
        )
    print(f"MirrorMaker 2 takeover: re-copied {recopied}, {time.monotonic() - began:.1f} s")
