"""``ferry audit`` on real Spark (local mode, Spark's Kafka source) against the local stack.

Each test produces records to a source topic and copies them to the destination itself (the
way Ferry's worker does: same partition, key, value, headers and timestamp), then tampers with
the copy and checks that the audit counts exactly what was done.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Message

from ferry import cli
from ferry.common.config import FerryConfig, parse_config
from ferry.common.kafka import clients as kafka_clients
from ferry.pipeline.audit import classify, compare_identities, run_audit
from ferry.pipeline.spark import get_session

PARTITIONS = 2
RECORDS = 20
BUCKET_S = 10


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # Shared with test_validate when run in one process (getOrCreate); ends with the process.
    yield get_session("local[2]", app_name="ferry-tests")


@pytest.fixture
def config_data(zk_chroot: str, cluster_conf: Callable[[str], dict[str, str]]) -> dict[str, Any]:
    return {
        "zookeeper": {"connect": zk_chroot, "root": "/"},
        "clusters": {"src": cluster_conf("src"), "dst": cluster_conf("dst")},
        "routes": [{"source": "src", "destination": "dst"}],
    }


@pytest.fixture
def config(config_data: dict[str, Any]) -> FerryConfig:
    return parse_config(config_data)


def base_ms() -> int:
    # Aligned to a bucket and well in the past, so the records' buckets are predictable.
    now = int(time.time() * 1000) - 3_600_000
    return now - now % (BUCKET_S * 1000)


def produce_source(cluster: dict[str, str], topic: str, base: int) -> None:
    """RECORDS records, one a second from ``base``, spread over the partitions, some with headers."""
    producer = kafka_clients.producer(cluster)
    for i in range(RECORDS):
        headers = [("trace", f"t{i}".encode()), ("empty", b"")] if i % 3 == 0 else None
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"value {i}".encode(),
            partition=i % PARTITIONS,
            timestamp=base + i * 1000,
            headers=headers,
        )
    assert producer.flush(30) == 0


def read_all(cluster: dict[str, str], topic: str, count: int) -> list[Message]:
    """Every record of ``topic`` (``count`` of them), polling until a deadline."""
    from confluent_kafka import TopicPartition

    consumer = kafka_clients.consumer(cluster, group_id=f"audit-test-{topic}")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    records: list[Message] = []
    deadline = time.monotonic() + 30
    try:
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=count, timeout=1.0):
                assert message.error() is None, message.error()
                records.append(message)
    finally:
        consumer.close()
    assert len(records) == count
    return sorted(records, key=lambda m: m.timestamp()[1])


def copy(destination: dict[str, str], topic: str, records: list[Message]) -> None:
    producer = kafka_clients.producer(destination)
    for message in records:
        producer.produce(
            topic,
            key=message.key(),
            value=message.value(),
            partition=message.partition(),
            timestamp=message.timestamp()[1],
            headers=message.headers(),
        )
    assert producer.flush(30) == 0


@pytest.fixture
def mirrored(
    cluster_conf: Callable[[str], dict[str, str]],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> Callable[[], tuple[str, int, list[Message]]]:
    """Makes a topic on both clusters with RECORDS source records; returns (topic, base_ms, records)."""

    def make() -> tuple[str, int, list[Message]]:
        topic = topic_name("audit")
        create_topic("src", topic, PARTITIONS)
        create_topic("dst", topic, PARTITIONS)
        base = base_ms()
        produce_source(cluster_conf("src"), topic, base)
        return topic, base, read_all(cluster_conf("src"), topic, RECORDS)

    return make


def test_a_faithful_copy_is_ok(
    spark: Any,
    config: FerryConfig,
    cluster_conf: Callable[[str], dict[str, str]],
    mirrored: Callable[[], tuple[str, int, list[Message]]],
) -> None:
    topic, base, records = mirrored()
    copy(cluster_conf("dst"), topic, records)

    report = run_audit(config, topic, bucket_s=BUCKET_S, spark=spark)

    assert report["ok"] is True
    assert (report["source"], report["destination"]) == (RECORDS, RECORDS)
    assert (report["missing"], report["duplicated"], report["extra"]) == (0, 0, 0)
    assert [(p["partition"], p["source"], p["destination"]) for p in report["partitions"]] == [
        (p, RECORDS // PARTITIONS, RECORDS // PARTITIONS) for p in range(PARTITIONS)
    ]
    # One record a second from a bucket boundary: 10 per 10-second bucket.
    assert [(b["startMs"], b["source"], b["destination"]) for b in report["buckets"]] == [
        (base, 10, 10),
        (base + 10_000, 10, 10),
    ]


def test_missing_duplicated_and_extra_records_are_counted(
    spark: Any,
    config: FerryConfig,
    config_data: dict[str, Any],
    tmp_path: Path,
    cluster_conf: Callable[[str], dict[str, str]],
    mirrored: Callable[[], tuple[str, int, list[Message]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    topic, base, records = mirrored()
    dst = cluster_conf("dst")
    # Record 0 is lost, record 5 is copied twice, and one record never on the source shows up.
    copy(dst, topic, [*records[1:], records[5]])
    producer = kafka_clients.producer(dst)
    producer.produce(topic, key=b"stranger", value=b"?", partition=1, timestamp=base + 15_500)
    assert producer.flush(30) == 0

    report = run_audit(config, topic, bucket_s=BUCKET_S, spark=spark)

    assert report["ok"] is False
    assert (report["source"], report["destination"]) == (RECORDS, RECORDS + 1)
    assert (report["missing"], report["duplicated"], report["extra"]) == (1, 1, 1)
    by_partition = {p["partition"]: p for p in report["partitions"]}
    assert by_partition[records[0].partition()]["missing"] == 1
    assert by_partition[records[5].partition()]["duplicated"] == 1
    assert by_partition[1]["extra"] == 1
    buckets = {b["startMs"]: b for b in report["buckets"]}
    assert (buckets[base]["missing"], buckets[base]["duplicated"], buckets[base]["extra"]) == (1, 1, 0)
    assert (buckets[base + 10_000]["missing"], buckets[base + 10_000]["extra"]) == (0, 1)

    # The window [6 s, 15 s) leaves out record 0 (missing), record 5 (duplicated) and the extra
    # record (15.5 s): what is left is a faithful copy.
    window = run_audit(config, topic, bucket_s=BUCKET_S, start_ms=base + 6_000, end_ms=base + 15_000, spark=spark)
    assert window["ok"] is True and window["source"] == window["destination"] == 9

    # The CLI, in-process (same JVM): JSON, exit 1, and a chart.
    config_file, chart = tmp_path / "ferry.yaml", tmp_path / "audit.png"
    config_file.write_text(yaml.safe_dump(config_data))
    status = cli.main(
        [
            "audit",
            "--config",
            str(config_file),
            "--topic",
            topic,
            "--bucket",
            str(BUCKET_S),
            "--json",
            "--chart",
            str(chart),
        ]
    )
    assert status == 1
    printed = json.loads(capsys.readouterr().out)
    assert {k: printed[k] for k in ("topic", "source", "destination", "missing", "duplicated", "extra", "ok")} == {
        "topic": topic,
        "source": RECORDS,
        "destination": RECORDS + 1,
        "missing": 1,
        "duplicated": 1,
        "extra": 1,
        "ok": False,
    }
    assert chart.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and chart.stat().st_size > 1000


def test_a_topic_never_created_on_the_destination_is_all_missing(
    spark: Any,
    config: FerryConfig,
    cluster_conf: Callable[[str], dict[str, str]],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("uncopied")
    create_topic("src", topic, PARTITIONS)
    produce_source(cluster_conf("src"), topic, base_ms())

    report = run_audit(config, topic, spark=spark)

    assert (report["source"], report["destination"], report["missing"], report["ok"]) == (RECORDS, 0, RECORDS, False)


def test_the_spark_rule_is_classify(spark: Any) -> None:
    counts = [(s, d) for s in range(4) for d in range(4) if s or d]
    source = [(0, f"id{s}-{d}", 1000) for s, d in counts for _ in range(s)]
    destination = [(0, f"id{s}-{d}", 1000) for s, d in counts for _ in range(d)]
    schema = "partition int, record_id string, ts_ms long"
    compared = compare_identities(
        spark.createDataFrame(source, schema), spark.createDataFrame(destination, schema), BUCKET_S
    ).collect()
    found = {
        r["record_id"]: (r["source"], r["destination"], r["missing"], r["duplicated"], r["extra"]) for r in compared
    }
    assert found == {
        f"id{s}-{d}": (s, d, *(classify(s, d)[k] for k in ("missing", "duplicated", "extra"))) for s, d in counts
    }


def test_identity_active_active_counts_only_the_routes_own_copies(
    spark: Any,
    config_data: dict[str, Any],
    cluster_conf: Callable[[str], dict[str, str]],
    mirrored: Callable[[], tuple[str, int, list[Message]]],
) -> None:
    # Active-active: routes src -> dst and dst -> src share the topic `t` on both sides. The audit of
    # src.dst compares the source's own records with the copies src.dst wrote (provenance path
    # ending at src); records produced on dst, dst's records copied to src, and a copy another
    # route (from c) wrote are reported apart, not as extra or missing; a record an application on dst
    # derived with a forwarded header (bound to another topic) is local to dst.
    from ferry.common.core import provenance

    looped = {
        **config_data,
        "routes": [
            {"source": "src", "destination": "dst", "loop_prevention": True},
            {"source": "dst", "destination": "src", "loop_prevention": True},
        ],
    }
    config = parse_config(looped)
    topic, base, src_records = mirrored()
    src, dst = cluster_conf("src"), cluster_conf("dst")
    local = [(f"dst-local {i}".encode(), i % PARTITIONS, base + 500 + i * 1000) for i in range(5)]
    producer = kafka_clients.producer(dst)
    for value, partition, ts in local:
        producer.produce(topic, value=value, partition=partition, timestamp=ts)
    # src.dst's copies, stamped as the worker stamps them (half as an at-least-once route does, with the
    # source offset, half as an exactly-once route does, without); record 0 is lost on the way.
    for offset, message in enumerate(src_records[1:], start=1):
        producer.produce(
            topic,
            key=message.key(),
            value=message.value(),
            partition=message.partition(),
            timestamp=message.timestamp()[1],
            headers=provenance.stamp(
                message.headers(), "src", offset if offset % 2 else None, source_topic=topic, destination_topic=topic
            ),
        )
    producer.produce(
        topic,
        value=b"from c",
        partition=0,
        timestamp=base + 700,
        headers=[(provenance.HEADER, provenance.encode(("c",), 0, 3))],
    )
    # An application on dst derived a record from a copy of another topic, headers forwarded: local to dst.
    producer.produce(
        topic,
        value=b"derived on dst",
        partition=1,
        timestamp=base + 800,
        headers=provenance.stamp(None, "src", 3, source_topic="elsewhere", destination_topic="elsewhere"),
    )
    assert producer.flush(30) == 0
    # dst.src's copies of dst's local records, on src: src.dst must skip them.
    producer = kafka_clients.producer(src)
    for offset, (value, partition, ts) in enumerate(local):
        producer.produce(
            topic,
            value=value,
            partition=partition,
            timestamp=ts,
            headers=provenance.stamp(
                None, "dst", offset if offset % 2 else None, source_topic=topic, destination_topic=topic
            ),
        )
    assert producer.flush(30) == 0

    report = run_audit(config, topic, route="src.dst", bucket_s=BUCKET_S, spark=spark)

    assert (report["source"], report["destination"]) == (RECORDS, RECORDS - 1)
    assert (report["missing"], report["duplicated"], report["extra"], report["ok"]) == (1, 0, 0, False)
    assert (report["sourceSkipped"], report["destinationLocal"], report["otherRoutes"]) == (5, 6, 1)
    assert sum(p["destinationLocal"] for p in report["partitions"]) == 6
