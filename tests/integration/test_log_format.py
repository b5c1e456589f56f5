"""``ferry worker`` as a real process, with Kafka clusters that refuse connections, so that librdkafka
complains: its messages come out in the chosen log format, and nothing else reaches stderr.

The test plays the controller: it writes the worker's assignment in its own ZooKeeper chroot, so
the worker builds a route's Kafka clients, and empties it before SIGTERM, so the worker drains at once.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kazoo.client import KazooClient

from ferry.common.model import PartitionKey, WorkerAssignment
from ferry.common.zk.layout import ZkLayout
from ferry.devstack.support import ferry_command, free_port, poll_until, spawn

ROUTE = "src.dst"
LAYOUT = ZkLayout("/")  # the worker's config points at this test's chroot
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")
RAW_LIBRDKAFKA_LINE = re.compile(r"^%\d\|")


def _write_config(path: Path, zk_chroot: str, config_format: str) -> None:
    closed = f"127.0.0.1:{free_port()}"  # nothing listens there: every connection is refused
    path.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": zk_chroot, "root": "/"},
                "clusters": {"src": {"bootstrap.servers": closed}, "dst": {"bootstrap.servers": closed}},
                "routes": [{"source": "src", "destination": "dst"}],
                "worker": {"metrics_port": 0},
                "logging": {"format": config_format},
            }
        )
    )


def _json_lines(text: str) -> list[dict[str, Any]]:
    records = []
    for line in text.splitlines():
        record = json.loads(line)  # every line one JSON object: anything else fails here
        assert isinstance(record, dict), line
        records.append(record)
    return records


def _librdkafka_records(log: Path) -> list[dict[str, Any]]:
    try:
        records = [json.loads(line) for line in log.read_text().splitlines()]
    except ValueError:
        return []  # a line being written; the final check reads the whole file again
    return [r for r in records if r.get("logger") == "librdkafka"]


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_librdkafka_messages_come_out_in_the_log_format(log_format: str, zk_chroot: str, tmp_path: Path) -> None:
    config = tmp_path / "ferry.yaml"
    # The flag wins over the config's logging.format.
    _write_config(config, zk_chroot, config_format="text" if log_format == "json" else "json")
    worker_id = f"w-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    zk = KazooClient(hosts=zk_chroot)
    zk.start(timeout=15)
    # Both places of the flag: after the subcommand (json), before it (text).
    flag = ["--log-format", log_format]
    command = (["worker", *flag] if log_format == "json" else [*flag, "worker"]) + [
        "--config",
        str(config),
        "--id",
        worker_id,
    ]
    worker = spawn("worker", ferry_command(*command), log)
    try:
        assignment = WorkerAssignment(1, frozenset({PartitionKey(ROUTE, f"orders-{worker_id}", 0)}))
        zk.create(LAYOUT.assignment(worker_id), assignment.to_bytes(), makepath=True)
        if log_format == "json":
            poll_until(
                lambda: _librdkafka_records(log), 60, lambda: f"librdkafka's messages as JSON:\n{worker.log_tail()}"
            )
        else:
            poll_until(
                lambda: " librdkafka: " in log.read_text(), 60, lambda: f"librdkafka's messages:\n{worker.log_tail()}"
            )
        zk.set(LAYOUT.assignment(worker_id), WorkerAssignment(2).to_bytes())  # the controller's part of a drain
        worker.stop(timeout=60)
    finally:
        worker.kill()
        zk.stop()
        zk.close()
    assert worker.returncode == 0, worker.log_tail()
    text = log.read_text()
    assert not [line for line in text.splitlines() if RAW_LIBRDKAFKA_LINE.match(line)], (
        "librdkafka wrote to stderr itself"
    )
    if log_format == "text":
        assert all(TEXT_LINE.match(line) for line in text.splitlines()), text
        return
    records = _json_lines(text)
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    librdkafka = [r for r in records if r["logger"] == "librdkafka"]
    # Connection refused: librdkafka's FAIL at its level 3, ERROR here, from the route's clients.
    failed = [r for r in librdkafka if r.get("kafka_facility") == "FAIL"]
    assert failed, librdkafka
    assert all(r["level"] == "ERROR" and "Connection refused" in r["message"] for r in failed)
    assert all(r.get("route") == ROUTE and r.get("worker") == worker_id for r in librdkafka), librdkafka
    assert any(r["message"] == f"worker {worker_id} stopped" for r in records)
    assert all(r.get("worker") == worker_id for r in records), "every thread's lines (kazoo's too) name the worker"
    deferred = [r for r in records if "not started yet" in r["message"]]
    assert all((r["route"], r["topic"], r["partition"]) == (ROUTE, f"orders-{worker_id}", 0) for r in deferred)
