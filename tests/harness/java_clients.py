"""Kafka's own Java test clients, from the local stack's jars: ``VerifiableProducer`` and ``VerifiableConsumer``.

Both print one JSON event per line; these helpers run them to completion and return what they
acknowledged (producer) or read (consumer, ``--verbose``: every record with its offset and value).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from ferry.devstack.support import kafka_tool_command


def _run(tool: str, args: list[str], timeout: float) -> list[dict[str, Any]]:
    done = subprocess.run(kafka_tool_command(tool, *args), capture_output=True, text=True, timeout=timeout, check=False)
    events = []
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            events.append(json.loads(line))
    if done.returncode != 0:
        raise AssertionError(f"{tool} exited {done.returncode}: {done.stderr[-2000:]}")
    return events


def produce(bootstrap: str, topic: str, count: int, prefix: int, timeout: float = 90) -> list[tuple[int, str]]:
    """``count`` records ``<prefix>.<n>`` to ``topic`` (acks=all); returns the acknowledged (offset, value)s."""
    events = _run(
        "VerifiableProducer",
        [
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--max-messages",
            str(count),
            "--acks",
            "-1",
            "--value-prefix",
            str(prefix),
        ],
        timeout,
    )
    acked = [(int(e["offset"]), str(e["value"])) for e in events if e.get("name") == "producer_send_success"]
    assert len(acked) == count, f"{len(acked)} of {count} records acknowledged: {events[-3:]}"
    return acked


def consume(bootstrap: str, group: str, topic: str, count: int, timeout: float = 90) -> list[tuple[int, str]]:
    """A member of ``group`` reads ``count`` records of ``topic`` from the group's committed offset
    (earliest without one), commits, and leaves; returns the (offset, value)s read."""
    events = _run(
        "VerifiableConsumer",
        [
            "--bootstrap-server",
            bootstrap,
            "--group-id",
            group,
            "--topic",
            topic,
            "--max-messages",
            str(count),
            "--verbose",
            "--reset-policy",
            "earliest",
            "--session-timeout",
            "6000",
        ],
        timeout,
    )
    read = [(int(e["offset"]), str(e["value"])) for e in events if e.get("name") == "record_data"]
    committed = [e for e in events if e.get("name") == "offsets_committed"]
    assert committed and all(e.get("success") for e in committed), f"commits failed: {committed[-3:]}"
    return read
