"""Kafka's own Java test clients, from the local stack's jars: ``VerifiableProducer`` and ``VerifiableConsumer``.

Both print one JSON event per line; :func:`produce` and :func:`consume` run them to completion and return
what they acknowledged (producer) or read (consumer, ``--verbose``: every record with its offset and value);
:func:`start_member` runs a consumer group member in the background and follows its events as they come.
Consumers read with ``isolation.level=read_committed`` unless asked otherwise: a route writes its
destination in transactions (exactly once, the default), and its readers set it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import IO, Any

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


def consume(
    bootstrap: str, group: str, topic: str, count: int, timeout: float = 90, read_committed: bool = True
) -> list[tuple[int, str]]:
    """A member of ``group`` reads ``count`` records of ``topic`` from the group's committed offset
    (earliest without one), commits, and leaves; returns the (offset, value)s read.

    ``read_committed``: ``isolation.level=read_committed``, what a reader of a route's destination sets
    (a route writes exactly once by default, in transactions); on a topic no transaction writes it reads
    the same as Java's default, ``read_uncommitted``, which ``read_committed=False`` asks for."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as properties:
        events = _run(
            "VerifiableConsumer",
            [
                *_consumer_args(bootstrap, group, topic, properties, read_committed),
                "--max-messages",
                str(count),
                "--verbose",
            ],
            timeout,
        )
    read = [(int(e["offset"]), str(e["value"])) for e in events if e.get("name") == "record_data"]
    committed = [e for e in events if e.get("name") == "offsets_committed"]
    assert committed and all(e.get("success") for e in committed), f"commits failed: {committed[-3:]}"
    return read


def _consumer_args(
    bootstrap: str, group: str, topic: str, properties: IO[str], read_committed: bool = True
) -> list[str]:
    """A ``VerifiableConsumer`` member of ``group`` on ``topic``, from its committed offsets (earliest without),
    with its isolation level written to ``properties`` (a file that lives as long as the member)."""
    properties.write(f"isolation.level={'read_committed' if read_committed else 'read_uncommitted'}\n")
    properties.flush()
    return [
        "--consumer.config",
        properties.name,
        "--bootstrap-server",
        bootstrap,
        "--group-id",
        group,
        "--topic",
        topic,
        "--reset-policy",
        "earliest",
        "--session-timeout",
        "6000",
    ]


class GroupMember:
    """A ``VerifiableConsumer`` member of ``group`` reading ``topic`` in the background until it is killed.

    It commits after every batch it reads (the tool's default, auto-commit off). Its JSON events are
    read as they come and kept with the time they arrived (``time.time()``), so a test can ask what
    the member had read by a moment: ``records_consumed`` (per partition the lowest and highest
    offset of a batch) and ``offsets_committed``.

    States: ``running`` (:func:`start_member`) --:meth:`kill`--> ``killed`` (its output read to the end;
    what it printed is all it read). Use it as a context manager so a failing test kills it too.
    """

    def __init__(
        self, process: subprocess.Popen[str], clock: Callable[[], float] = time.time, properties: IO[str] | None = None
    ) -> None:
        self._process = process
        self._properties = properties  # its consumer config, removed once it is killed
        self._clock = clock
        self._lock = threading.Lock()
        self._events: list[tuple[float, dict[str, Any]]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith("{"):
                event = json.loads(line)
                with self._lock:
                    self._events.append((self._clock(), event))

    def events(self, name: str) -> list[tuple[float, dict[str, Any]]]:
        """The events called ``name`` so far, with the time each arrived."""
        with self._lock:
            return [(at, e) for at, e in self._events if e.get("name") == name]

    def read_end(self, before: float | None = None) -> dict[int, int]:
        """Partition -> one past the highest offset the member read (by time ``before``, when given)."""
        ends: dict[int, int] = {}
        for at, event in self.events("records_consumed"):
            if before is not None and at > before:
                break
            for batch in event.get("partitions", []):
                partition = int(batch["partition"])
                ends[partition] = max(ends.get(partition, 0), int(batch["maxOffset"]) + 1)
        return ends

    def committed(self) -> dict[int, int]:
        """Partition -> the last offset the member committed successfully."""
        out: dict[int, int] = {}
        for _, event in self.events("offsets_committed"):
            if event.get("success"):
                for row in event.get("offsets", []):
                    out[int(row["partition"])] = int(row["offset"])
        return out

    def kill(self, timeout: float = 30) -> None:
        """Kills the member at once (-9: no last commit, no leaving the group) and reads the rest of its output."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait(timeout)
        self._reader.join(timeout)
        if self._properties is not None:
            self._properties.close()

    def __enter__(self) -> GroupMember:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def start_member(bootstrap: str, group: str, topic: str, read_committed: bool = True) -> GroupMember:
    """A ``VerifiableConsumer`` member of ``group`` on ``topic``, reading from the group's committed offsets
    (earliest without one) until killed; ``read_committed`` as for :func:`consume`."""
    properties = tempfile.NamedTemporaryFile("w", suffix=".properties")  # noqa: SIM115 - the member's lifetime
    command = kafka_tool_command(
        "VerifiableConsumer", *_consumer_args(bootstrap, group, topic, properties, read_committed)
    )
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return GroupMember(process, properties=properties)
