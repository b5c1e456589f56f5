"""Operations with real processes: auto-whitelisting, partition expansion, config following,
removed topics staying removed, lag endpoints and controller metrics."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest
import requests
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack.support import create_topics
from tests.harness.processes import Fleet, RecordLedger, wait_until


def test_observer_whitelists_expands_follows_configs_and_remembers_removals(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    topic, skipped = topic_name("auto"), topic_name("auto.skip")
    fleet.extra = {
        # Other tests' topics live on the same cluster: include only this test's two.
        "routes": [
            {
                "source": "src",
                "destination": "dst",
                "include": [re.escape(topic), re.escape(skipped)],
                "exclude": [r"auto\.skip\..*"],
                "config_exclude": ["max.message.bytes"],
            }
        ],
        "controller": {"observer_interval_s": 1, "lag_interval_s": 1, "noprogress_after_s": 2},
    }
    fleet.write_config()
    src_admin = kafka_clients.admin({"bootstrap.servers": fleet.stack.bootstrap("src")})
    dst_admin = kafka_clients.admin({"bootstrap.servers": fleet.stack.bootstrap("dst")})
    create_topics(
        src_admin,
        [
            NewTopic(topic, 2, 1, config={"retention.ms": "123456789", "max.message.bytes": "500000"}),
            NewTopic(skipped, 1, 1),
        ],
    )

    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1"})
    url = controller.url

    # Whitelisted by the observer, without a POST; the excluded one is not.
    wait_until(lambda: requests.get(f"{url}/topics/{topic}", timeout=2).status_code == 200, 15, "auto-whitelisting")
    assert requests.get(f"{url}/topics/{skipped}", timeout=2).status_code == 404

    ledger = RecordLedger(fleet.stack, topic, 2)
    ledger.produce(200)
    ledger.wait_for_destination(timeout=30)

    # Destination configs follow the source, except the excluded key.
    def destination_configs() -> dict[str, str]:
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        entries = dst_admin.describe_configs([resource])[resource].result(10)
        return {name: entry.value for name, entry in entries.items()}

    wait_until(
        lambda: destination_configs().get("retention.ms") == "123456789", 15, "retention.ms to follow the source"
    )
    assert destination_configs().get("max.message.bytes") != "500000"

    # Partitions added at the source are mirrored from their beginning.
    src_admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    wait_until(lambda: requests.get(f"{url}/topics/{topic}", timeout=2).json()["partitions"] == 4, 15, "the expansion")
    ledger.partitions = 4
    wait_until(
        lambda: len(ledger._producer.list_topics(topic, timeout=5).topics[topic].partitions) == 4,
        15,
        "the producer to see the new partitions",
    )
    ledger.produce(400)
    ledger.wait_for_destination(timeout=30)
    assert ledger.check(allow_duplicates=False)["records"] == 600

    # Lag endpoints.
    def caught_up() -> bool:
        body = requests.get(f"{url}/offset/{topic}", timeout=5).json()
        return len(body["offsets"]) == 4 and all(o["lag"] == 0 for o in body["offsets"])

    wait_until(caught_up, 15, "committed offsets to reach the log end")
    one = requests.get(f"{url}/offset/{topic}/3", timeout=5)
    assert one.status_code == 200 and one.json()["offsets"][0]["partitionId"] == 3
    assert requests.get(f"{url}/offset/{topic}/9", timeout=5).status_code == 404
    assert requests.get(f"{url}/offset/no-such-topic", timeout=5).status_code == 404
    assert requests.get(f"{url}/noprogress", timeout=5).json()["noprogress"] == []
    assert requests.get(f"{url}/validation/srcKafka", timeout=10).json()["ok"] is True
    assert "ferry_controller_partition_lag" in requests.get(f"{url}/metrics", timeout=5).text

    # A topic removed through the API stays removed until someone POSTs it again: the observer has
    # run twice since the removal (the first run counted may have started before it) and left it out.
    def observer_runs() -> float:
        text = requests.get(f"{url}/metrics", timeout=5).text
        found = re.search(r'^ferry_controller_job_runs_total\{job="observe"\} (\S+)$', text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    assert requests.delete(f"{url}/topics/{topic}", timeout=10).status_code == 200
    removed_after = observer_runs()
    wait_until(lambda: observer_runs() >= removed_after + 2, 15, "two observer runs after the removal")
    assert requests.get(f"{url}/topics/{topic}", timeout=2).status_code == 404
    assert requests.post(f"{url}/topics", json={"topic": topic}, timeout=10).status_code == 201


@pytest.mark.timeout(420)
def test_the_leader_runs_the_spark_validation_and_serves_its_result(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    fleet.extra = {"controller": {"validation_interval_s": 3}}
    fleet.write_config()
    topic = topic_name("validated")
    RecordLedger(fleet.stack, topic, 2).create_source_topic()
    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1"})
    assert requests.post(f"{controller.url}/topics", json={"topic": topic}, timeout=10).status_code == 201
    wait_until(lambda: len(fleet.online_by_worker(controller, topic)) == 2, 30, "both partitions ONLINE")

    def validated_after_online() -> dict | None:  # type: ignore[type-arg]
        spark = requests.get(f"{controller.url}/validation", timeout=5).json().get("spark")
        return spark if spark and spark.get("ok") else None

    # A first run can take minutes on a loaded machine: starting Spark's JVM is most of it.
    spark = wait_until(validated_after_online, 280, "a clean Spark validation result")
    assert spark["checkedAt"] > 0 and spark["problems"] == []
    assert "ferry_controller_validation_problems 0.0" in requests.get(f"{controller.url}/metrics", timeout=5).text
    assert requests.get(f"{controller.url}/validation/srcKafka", timeout=10).json()["spark"]["srcKafka"] == []


def test_a_rejected_record_shows_as_error_and_its_partition_makes_no_progress(
    fleet: Fleet, topic_name: Callable[[str], str]
) -> None:
    # At least once: on an exactly-once route the records before the rejected one share its transaction,
    # which is aborted; the partition stops in ERROR at the rejected record with those not copied yet
    # (committed below them, nothing lost), so its committed offset and lag differ from these.
    fleet.extra = {
        "controller": {"lag_interval_s": 1, "noprogress_after_s": 2},
        "routes": [{"source": "src", "destination": "dst", "delivery_guarantee": "at_least_once"}],
    }
    fleet.write_config()
    topic = topic_name("rejected")
    src = {"bootstrap.servers": fleet.stack.bootstrap("src")}
    dst_admin = kafka_clients.admin({"bootstrap.servers": fleet.stack.bootstrap("dst")})
    src_admin = kafka_clients.admin(src)  # kept referenced until the result arrives
    create_topics(src_admin, [NewTopic(topic, 2, 1)])
    # The destination takes smaller records than the source: the big one can never be copied (random
    # bytes: the route compresses, and 10,000 x's would fit once compressed).
    create_topics(dst_admin, [NewTopic(topic, 2, 1, config={"max.message.bytes": "2000"})])
    producer = kafka_clients.producer(src)
    for i in range(10):
        producer.produce(topic, value=os.urandom(10_000) if i == 5 else b"small", partition=0)
        producer.produce(topic, value=b"small", partition=1)
    assert producer.flush(30) == 0

    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1"})
    url = controller.url
    assert requests.post(f"{url}/topics", json={"topic": topic}, timeout=10).status_code == 201

    def error_reported() -> dict | None:  # type: ignore[type-arg]
        entry = requests.get(f"{url}/topics/{topic}", timeout=5).json()["externalView"].get("0", {})
        return entry if entry.get("state") == "ERROR" else None

    entry = wait_until(error_reported, 30, "partition 0 in ERROR")
    assert "offset 5" in entry["reason"] and entry["worker"] == "w1"
    validation = requests.get(f"{url}/validation", timeout=5).json()
    assert validation["ok"] is False and validation["summary"]["error"] == 1
    [mismatch] = validation["mismatches"]
    assert mismatch["problem"] == "error" and "offset 5" in mismatch["reason"]

    def stalled() -> list | None:  # type: ignore[type-arg]
        rows = requests.get(f"{url}/noprogress", timeout=5).json()["noprogress"]
        return rows or None

    [row] = wait_until(stalled, 30, "partition 0 in /noprogress")
    assert (row["partitionId"], row["committed"], row["lag"]) == (0, 5, 5)
    partition_1 = requests.get(f"{url}/offset/{topic}/1", timeout=5).json()["offsets"][0]
    assert partition_1["lag"] == 0  # the other partition copied everything
