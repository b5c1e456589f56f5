"""Data loss said out loud, and where a new route starts: a real worker (in-process) against the local stack.

The test plays the controller, as in test_worker.py (whose fixtures it shares).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from ferry.common.config import FerryConfig
from ferry.common.kafka import clients as kafka_clients
from ferry.common.model import PartitionKey
from tests.integration import test_worker
from tests.integration.test_worker import GROUP, LAYOUT, ROUTE, Kafka, RunningWorker, records, wait_until

# The worker tests' fixtures, shared.
kafka = test_worker.kafka
make_config = test_worker.make_config
start_worker = test_worker.start_worker


def _delete_records(admin: AdminClient, topic: str, partition: int, before: int) -> None:
    futures = admin.delete_records([TopicPartition(topic, partition, before)], request_timeout=15)
    for future in futures.values():
        future.result(15)


def _commit(kafka: Kafka, topic: str, partition: int, offset: int) -> None:
    consumer = kafka_clients.consumer(kafka.conf("src"), GROUP)
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def _lost_metric(running: RunningWorker, topic: str) -> float:
    value = running.worker.metrics.registry.get_sample_value(
        "ferry_worker_records_lost_total", {"route": ROUTE, "topic": topic}
    )
    return value or 0.0


def test_records_deleted_before_they_were_copied_are_reported_as_the_exact_range_and_copying_goes_on(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("lost")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)  # the route's destination topic, as the stopped worker left it
    sent = records("old", 30)
    kafka.produce(topic, 0, sent)
    # A stopped worker had copied nothing past offset 10 (committed), then retention took [0, 25).
    _commit(kafka, topic, 0, 10)
    _delete_records(kafka_clients.admin(kafka.conf("src")), topic, 0, 25)

    running = start_worker()
    generation = running.assign(topic, [0])
    key = PartitionKey(ROUTE, topic, 0)
    status = running.wait_status(
        lambda s: s.generation == generation and key in s.partitions and bool(s.partitions[key].reason),
        "the lost range in the status",
    )
    entry = status.partitions[key]
    assert entry.state == "ONLINE"
    assert entry.reason is not None and "[10, 25) (15 records)" in entry.reason, entry.reason
    assert kafka.wait_arrived(topic, 0, 5) == sent[25:], "copying goes on from the log start"
    assert _lost_metric(running, topic) == 15
    kafka.wait_committed(topic, 0, 30)


def test_a_source_topic_shorter_than_what_was_copied_stops_its_partition_with_the_reason(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("recreated")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    kafka.produce(topic, 0, records("old", 5))
    # The route's group says 20 were copied: the source log (5 records) is shorter, as after a re-creation.
    _commit(kafka, topic, 0, 20)
    running = start_worker()
    generation = running.assign(topic, [0])
    key = PartitionKey(ROUTE, topic, 0)
    status = running.wait_status(
        lambda s: s.generation == generation and key in s.partitions and s.partitions[key].state == "ERROR",
        "the partition in ERROR",
    )
    reason = status.partitions[key].reason or ""
    assert "ends at offset 5, below Ferry's position 20" in reason and "re-created" in reason, reason
    assert kafka.end_offset("dst", topic, 0) == 0, "nothing of the new topic copied under the old offsets"


def test_start_latest_and_start_time_apply_to_a_partition_nothing_of_the_route_reached(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    latest, timed = topic_name("latest"), topic_name("timed")
    for topic in (latest, timed):
        create_topic("src", topic, 1)
    now_ms = int(time.time() * 1000)
    old = [(k, v, h, (ts_type, now_ms - 3_600_000 + i)) for i, (k, v, h, (ts_type, _)) in enumerate(records("old", 4))]
    new = [(k, v, h, (ts_type, now_ms + i)) for i, (k, v, h, (ts_type, _)) in enumerate(records("new", 3, start=4))]
    kafka.produce(latest, 0, old)
    kafka.produce(timed, 0, old + new)

    config = make_config()
    at = datetime.fromtimestamp((now_ms - 60_000) / 1000, tz=timezone.utc).isoformat()
    route_latest = config.routes[0].model_copy(update={"start": "latest"})
    running = start_worker(config.model_copy(update={"routes": [route_latest]}))
    running.wait_online(latest, [0], running.assign(latest, [0]))
    # The start at the log end resolves asynchronously: keep writing new records until the first arrives.
    written = []

    def one_more_arrived() -> bool:
        batch = records("new", 1, start=100 + len(written))
        kafka.produce(latest, 0, batch)
        written.extend(batch)
        return kafka.end_offset("dst", latest, 0) > 0

    wait_until(one_more_arrived, 15, "a record written after the start copied", interval=0.2)
    copied = kafka.wait_arrived(latest, 0, 1)
    assert copied and all(record in written for record in copied), "start=latest: nothing written before the start"
    running.leave()

    config = make_config()
    route_timed = config.routes[0].model_validate({**config.routes[0].model_dump(), "start": at})
    running = start_worker(config.model_copy(update={"routes": [route_timed]}))
    running.wait_online(timed, [0], running.assign(timed, [0]))
    assert kafka.wait_arrived(timed, 0, 3) == new, "start=<time>: from the first record at or after it"


def test_a_topics_own_start_stands_in_for_the_routes(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("ownstart")
    create_topic("src", topic, 1)
    now_ms = int(time.time() * 1000)
    old = [(k, v, h, (ts_type, now_ms - 3_600_000 + i)) for i, (k, v, h, (ts_type, _)) in enumerate(records("old", 4))]
    new = [(k, v, h, (ts_type, now_ms + i)) for i, (k, v, h, (ts_type, _)) in enumerate(records("new", 3, start=4))]
    kafka.produce(topic, 0, old + new)
    running = start_worker()  # the route has no start: worker.auto_offset_reset (earliest) would copy all 7
    # What POST /topics with {"start": <a minute ago>} leaves for the worker.
    running.zk.create(LAYOUT.topic_start(ROUTE, topic), json.dumps({"start": now_ms - 60_000}).encode(), makepath=True)
    running.wait_online(topic, [0], running.assign(topic, [0]))
    assert kafka.wait_arrived(topic, 0, 3) == new, "the topic's start: from the first record at or after it"


def test_translate_is_exact_both_ways_on_a_mirrored_partition(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    from ferry.controller.groups.translate import OffsetTranslator

    topic = topic_name("translate")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    producer = kafka_clients.producer(kafka.conf("dst"))
    for _ in range(3):  # records of someone else first: the copies land 3 offsets further
        producer.produce(topic, b"other", partition=0)
    assert producer.flush(15) == 0
    kafka.produce(topic, 0, records("copied", 10))
    config = make_config()
    running = start_worker(config)
    running.wait_online(topic, [0], running.assign(topic, [0]))
    kafka.wait_committed(topic, 0, 10)  # the map segments are written before the commit
    translator = OffsetTranslator(config, "test")
    try:
        forward = translator.translate_offset(ROUTE, topic, 0, 4)
        assert (forward.translated, forward.exact, forward.method) == (7, True, "exact")
        back = translator.translate_offset(ROUTE, topic, 0, 7, reverse=True)
        assert (back.translated, back.exact, back.direction) == (4, True, "reverse")
        assert translator.translate_offset(ROUTE, topic, 0, 10).translated == 13
    finally:
        translator.close()
    # The same from the command line, with no controller.
    path = tmp_path / "ferry.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": "127.0.0.1:1"},
                "clusters": {"src": kafka.conf("src"), "dst": kafka.conf("dst")},
                "routes": [{"source": "src", "destination": "dst"}],
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "offsets",
            "translate",
            "--config",
            str(path),
            "--topic",
            topic,
            "--partition",
            "0",
            "--offset",
            "7",
            "--reverse",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "route": ROUTE,
        "topic": topic,
        "destinationTopic": topic,
        "partition": 0,
        "direction": "reverse",
        "offset": 7,
        "translatedOffset": 4,
        "exact": True,
        "method": "exact",
    }
    unknown = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "offsets",
            "translate",
            "--config",
            str(path),
            "--topic",
            "no-such-topic-here",
            "--partition",
            "0",
            "--offset",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode == 2 and "does not exist" in unknown.stderr and "Traceback" not in unknown.stderr


def _recreate(admin: AdminClient, topic: str) -> None:
    from confluent_kafka.admin import NewTopic

    for future in admin.delete_topics([topic], operation_timeout=15).values():
        future.result(15)

    def created() -> bool:
        try:
            for future in admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=15).values():
                future.result(15)
            return True
        except Exception as exc:  # TOPIC_ALREADY_EXISTS while the deletion completes
            if "already exists" in str(exc).lower() or "marked for deletion" in str(exc).lower():
                return False
            raise

    wait_until(created, 30, f"{topic} created again", interval=0.3)


def test_a_source_topic_re_created_with_more_records_is_detected_and_its_partition_stops(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("recreated-longer")
    create_topic("src", topic, 1)
    running = _copied_and_released(start_worker(), kafka, topic)
    reason = _reason_of_error_once_re_created(running, kafka, topic)
    assert "the source topic was re-created" in reason and "offset 4" in reason, reason
    # Read, not the log end: on the default, exactly-once route a transaction marker takes an offset too.
    copied = kafka.read("dst", topic, 0)
    assert len(copied) == 5, "nothing of the new topic copied under the old offsets"


def _copied_and_released(running: RunningWorker, kafka: Kafka, topic: str) -> RunningWorker:
    """``running`` copies 5 records of ``topic`` (one partition), commits them, and releases the partition."""
    kafka.produce(topic, 0, records("old", 5))
    running.wait_online(topic, [0], running.assign(topic, [0]))
    kafka.wait_arrived(topic, 0, 5)
    kafka.wait_committed(topic, 0, 5)
    released = running.assign(topic, [])
    running.wait_status(lambda s: s.generation == released and not s.partitions, "the partition released")
    return running


def _reason_of_error_once_re_created(running: RunningWorker, kafka: Kafka, topic: str) -> str:
    """Re-creates ``topic`` at the source with 8 new records, gives ``running`` its partition again, and
    returns the reason of the ERROR it stops in."""
    _recreate(kafka_clients.admin(kafka.conf("src")), topic)
    wait_until(lambda: _produced(kafka, topic, records("new", 8)), 30, "records on the new topic", interval=0.5)
    generation = running.assign(topic, [0])
    key = PartitionKey(ROUTE, topic, 0)
    status = running.wait_status(
        lambda s: s.generation == generation and key in s.partitions and s.partitions[key].state == "ERROR",
        "the partition in ERROR",
    )
    return status.partitions[key].reason or ""


def _produced(kafka: Kafka, topic: str, batch: list[Any]) -> bool:
    try:
        kafka.produce(topic, 0, batch)
        return True
    except AssertionError:  # the new topic's leader not known yet
        return False


def test_a_destination_topic_deleted_under_ferry_is_copied_again_from_the_source_log_start(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("dst-deleted")
    create_topic("src", topic, 1)
    sent = records("old", 6)
    kafka.produce(topic, 0, sent)
    running = start_worker()
    running.wait_online(topic, [0], running.assign(topic, [0]))
    kafka.wait_arrived(topic, 0, 6)
    kafka.wait_committed(topic, 0, 6)
    released = running.assign(topic, [])
    running.wait_status(lambda s: s.generation == released and not s.partitions, "the partition released")
    admin = kafka_clients.admin(kafka.conf("dst"))
    for future in admin.delete_topics([topic], operation_timeout=15).values():
        future.result(15)
    wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, f"{topic} deleted on dst")

    generation = running.assign(topic, [0])
    key = PartitionKey(ROUTE, topic, 0)
    # A start right after the deletion may be deferred a moment (the new topic's leader not known yet).
    status = running.wait_status(
        lambda s: (
            s.generation == generation
            and key in s.partitions
            and "destination topic was deleted under Ferry" in (s.partitions[key].reason or "")
        ),
        "the re-creation in the status",
        timeout=40,
    )
    assert status.partitions[key].state == "ONLINE", status.partitions[key]
    assert kafka.wait_arrived(topic, 0, 6) == sent, "copied again from the source's log start"
