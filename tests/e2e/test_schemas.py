"""Schema distribution with real `ferry controller`/`ferry worker` processes, real Kafka and the
two real registries: records stay readable on the destination, and a controller restart
mid-distribution leaves every subject in sync exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import requests
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from ferry.controller.schemas.registry import CCOMPAT
from ferry.devstack import stack as devstack
from tests.harness.processes import Fleet, wait_until
from tests.harness.registry import register, version, versions

ORDER = """{"type": "record", "name": "Order", "namespace": "ferry.test",
 "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}"""


def _schemas(stack: devstack.Stack, include: str) -> dict[str, Any]:
    return {
        "primary": "src",
        "include": [include],
        "interval_s": 1,
        "registries": {
            "src": {"url": stack.registry_url("src")},
            "dst": {
                "url": stack.registry_url("dst"),
                "subject_format": "{tenant}-{env}-{topic}-value",
                "subject_vars": {"tenant": "acme", "env": "prod"},
            },
        },
    }


def _schema_report(url: str) -> dict[str, Any]:
    answer = requests.get(f"{url}/schemas", timeout=30)
    answer.raise_for_status()
    report: dict[str, Any] = answer.json()
    return report


def test_avro_records_mirrored_by_ferry_decode_against_the_target_registry(
    fleet: Fleet, registry_stack: devstack.Stack, topic_name: Callable[[str], str], create_topic: Callable[..., None]
) -> None:
    topic = topic_name("orders")
    fleet.extra = {"schemas": _schemas(registry_stack, f"{topic}-value")}
    fleet.write_config()
    src_conf = {"bootstrap.servers": registry_stack.bootstrap("src")}
    create_topic("src", topic)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_stack.registry_url("src") + CCOMPAT}), ORDER)
    sent = [{"id": n, "item": f"item-{n}"} for n in range(20)]
    producer = Producer(src_conf)
    for record in sent:
        producer.produce(topic, serializer(record, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    src_id = (version(registry_stack.registry_url("src"), f"{topic}-value", 1) or {})["id"]

    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    fleet.wait_for_workers(controller, {"w1"})
    assert requests.post(f"{controller.url}/topics", json={"topic": topic}, timeout=10).status_code == 201
    report = wait_until(
        lambda: (r := _schema_report(controller.url))["inSync"] and r["subjects"] and r,
        30,
        "the subject in sync on dst",
    )
    assert report["subjects"][0]["targets"]["dst"] == {
        "subject": f"acme-prod-{topic}-value",
        "state": "in_sync",
        "syncedVersions": [1],
        "missingVersions": [],
        "conflict": None,
    }

    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_stack.registry_url("dst") + CCOMPAT}))
    consumer = Consumer(
        {
            "bootstrap.servers": registry_stack.bootstrap("dst"),
            "group.id": f"check-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    received: list[Any] = []
    try:

        def more() -> bool:
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                payload = message.value()
                assert int.from_bytes(payload[1:5], "big") == src_id  # the primary's ID, in the payload
                received.append(deserializer(payload, SerializationContext(topic, MessageField.VALUE)))
            return len(received) >= len(sent)

        wait_until(more, 60, "every record at the destination", interval=0)
    finally:
        consumer.close()
    assert received == sent

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "schemas",
            "--config",
            str(fleet.config_path),
            "--url",
            controller.url,
            "status",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    assert f"acme-prod-{topic}-value" in cli.stdout and "in_sync" in cli.stdout
    diff = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "schemas",
            "--config",
            str(fleet.config_path),
            "--url",
            controller.url,
            "diff",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert diff.returncode == 0 and "is in sync on dst" in diff.stdout, diff.stdout + diff.stderr


def test_a_controller_restart_mid_distribution_leaves_every_subject_in_sync_once(
    fleet: Fleet, registry_stack: devstack.Stack, topic_name: Callable[[str], str]
) -> None:
    base = topic_name("many")
    src, dst = registry_stack.registry_url("src"), registry_stack.registry_url("dst")
    subjects = [f"{base}.{n}-value" for n in range(25)]
    for n, subject in enumerate(subjects):
        register(src, subject, {"type": "record", "name": f"M{n}", "fields": [{"name": "a", "type": "int"}]})
        register(
            src,
            subject,
            {
                "type": "record",
                "name": f"M{n}",
                "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}],
            },
        )
    # Two versions per import request: 25 requests, each read back before the next.
    fleet.extra = {"schemas": {**_schemas(registry_stack, rf"{base}\..*-value"), "import_batch": 2}}
    fleet.write_config()

    first = fleet.start_controller("c1")
    fleet.wait_for_leader(first)
    # Kill it the moment the first subject landed, while it still has requests to make.
    wait_until(lambda: versions(dst, f"acme-prod-{subjects[0]}"), 60, "distribution to start", interval=0.02)
    first.signal(signal.SIGKILL)
    first.wait(10)
    landed_before = sum(len(versions(dst, f"acme-prod-{subject}")) for subject in subjects)
    print(f"SIGKILL after {landed_before} of {2 * len(subjects)} versions had landed")

    second = fleet.start_controller("c2")
    fleet.wait_for_leader(second)
    wait_until(lambda: _schema_report(second.url)["inSync"], 60, "every subject in sync after the restart")
    copied_after = requests.get(f"{second.url}/metrics", timeout=10).text
    print(
        "after the restart:",
        [
            line
            for line in copied_after.splitlines()
            if line.startswith("ferry_controller_schema_versions_copied_total")
        ],
    )
    sync = requests.post(f"{second.url}/schemas/sync", timeout=60).json()
    assert sync["copied"] == [] and sync["inSync"] and sync["outOfSync"] == {"dst": 0}
    assert len(sync["subjects"]) == len(subjects)
    for subject in subjects:
        translated = f"acme-prod-{subject}"
        assert versions(dst, translated) == [1, 2]  # each version once
        for number in (1, 2):
            assert (version(dst, translated, number) or {})["id"] == (version(src, subject, number) or {})["id"]
