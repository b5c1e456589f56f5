"""Support code for what runs Ferry from outside: the local stack, the bench, the demo and the tests.

One module, because its callers are the same four and each piece is a few lines; nothing in the
controller or the worker uses it.

* processes: :func:`spawn` starts a command with its output appended to a log file and returns a
  :class:`Spawned` (``alive``, ``signal``, ``stop``, ``kill``, ``log_tail``); :func:`stop_all`
  stops several at once; :func:`tail` reads the end of any log; :func:`ferry_command` is the
  command line of ``ferry <args>`` run by this interpreter; :func:`free_port` a port for its HTTP;
  :func:`kafka_tool_command` the command line of one of Kafka's own Java tools (``VerifiableProducer``).
* waiting: :func:`poll_until`, in the spirit of kazoo's test ``Wait``: polls a condition until it
  is truthy or a deadline passes (clock and sleep injectable), then raises :class:`WaitTimeout`;
  :data:`QUIET`, the logger of clients that probe a server still starting (it says nothing).
* Kafka data: :func:`produce_blocking` (a full local queue is waited out, never dropped),
  :func:`end_offsets` (each partition's log-end offset) and :func:`records_in` (their sum, for
  progress), :func:`commit_offset` and :func:`committed_offset` (a consumer group's, as an
  application commits it).
* :func:`fleet_config`: the config of a controller + workers fleet on the local stack.

The jar folder is resolved by :func:`ferry.common.paths.jars_dir` (``FERRY_JARS_DIR``), next to the
stack's other folders.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ferry.common.errors import FerryError
from ferry.common.paths import jars_dir

if TYPE_CHECKING:  # confluent_kafka is imported where used: `ferry dev` imports this module
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

T = TypeVar("T")

# Probing a server that is still starting fails many times on purpose; say nothing about it.
QUIET = logging.getLogger("ferry.devstack.probe")
QUIET.setLevel(logging.CRITICAL + 1)
QUIET.propagate = False


# --- processes -----------------------------------------------------------------------------


def tail(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of the file at ``path``, or ``(no log)`` when it cannot be read."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# Every port free_port() returned in this process. A child binds its port only once it has
# started (a controller after it reached ZooKeeper), so until then the kernel may offer the same
# port again: the next child would get it too, and one of the two could not serve.
_handed_out: set[int] = set()


def _kernel_offer() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def free_port(offer: Callable[[], int] = _kernel_offer) -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now (for a child's HTTP server), never
    one this process was given before. ``offer``: where candidate ports come from (the kernel)."""
    while True:
        port = offer()
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def ferry_command(*args: str) -> list[str]:
    """``ferry <args>`` as this interpreter runs it (the same venv, no installed script needed)."""
    return [sys.executable, "-m", "ferry.cli", *args]


def kafka_tool_command(tool: str, *args: str) -> list[str]:
    """The command line of Kafka's own ``org.apache.kafka.tools.<tool>`` (``VerifiableProducer``,
    ``VerifiableConsumer``), from the local stack's jars, with a small heap."""
    return ["java", "-Xmx256m", "-cp", f"{jars_dir('kafka')}/*", f"org.apache.kafka.tools.{tool}", *args]


@dataclass
class Spawned:
    """A child process started by :func:`spawn`, with the log file its output goes to.

    States: RUNNING (``alive()``) until it exits by itself or through ``signal``/``stop``/``kill``;
    then EXITED with ``returncode``.
    """

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.poll()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        """Sends ``sig`` while the process runs (no error once it exited)."""
        if self.alive():
            self.popen.send_signal(sig)

    def wait(self, timeout: float) -> int:
        """The exit status once it exited; ``subprocess.TimeoutExpired`` after ``timeout`` s."""
        return self.popen.wait(timeout=timeout)

    def kill(self, timeout: float = 30.0) -> None:
        """SIGKILL, and reap it."""
        self.signal(signal.SIGKILL)
        self.popen.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM; SIGKILL when it did not exit within ``timeout`` s."""
        stop_all([self], timeout)

    def log_tail(self, lines: int = 30) -> str:
        return tail(self.log, lines)


def spawn(
    name: str,
    command: list[str],
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    new_session: bool = False,
) -> Spawned:
    """Starts ``command`` with stdout and stderr appended to ``log`` and no stdin.

    The environment is this process's plus ``PYTHONUNBUFFERED=1`` (a Python child's log is
    complete when it is killed) plus ``env``. ``new_session``: the child outlives this process's
    terminal and ignores its Ctrl-C (servers of the local stack).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the child keeps its own copy of the descriptor
        popen = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            start_new_session=new_session,
        )
    return Spawned(name, popen, log)


def stop_all(processes: Iterable[Spawned], timeout: float = 30.0) -> None:
    """SIGTERM to every process first (they stop in parallel), then waits for each; one that did
    not exit within ``timeout`` s of its turn is killed."""
    processes = list(processes)
    for process in processes:
        process.signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()


# --- waiting -------------------------------------------------------------------------------


class WaitTimeout(FerryError, TimeoutError):
    """:func:`poll_until`'s condition did not hold before its deadline; the message says what was awaited."""


def poll_until(
    condition: Callable[[], T],
    timeout: float,
    what: str | Callable[[], str],
    *,
    interval: float = 0.1,
    ignoring: tuple[type[BaseException], ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Calls ``condition`` every ``interval`` s until it returns something truthy, and returns that.

    ``condition`` is called at least once, and once more at the deadline. Exceptions of the
    ``ignoring`` types count as "not yet" (a server still starting). The timeout's message names
    the last error, or the last falsy result other than None and False (``[]``, ``0``). After
    ``timeout`` s: :class:`WaitTimeout` naming ``what`` (a callable is called then, so the message
    can show the state that was not reached).
    """
    deadline = clock() + timeout
    last: str | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
            last = None if result is None or result is False else f"last: {result!r}"[:200]
        except ignoring as exc:
            last = f"last error: {exc}"
        if clock() >= deadline:
            described = what() if callable(what) else what
            raise WaitTimeout(f"timed out after {timeout:g}s waiting for {described}" + (f" ({last})" if last else ""))
        sleep(max(0.0, min(interval, deadline - clock())))


# --- Kafka data ----------------------------------------------------------------------------


def create_topics(admin: AdminClient, topics: list[Any], timeout: float = 30.0) -> None:
    """Creates ``topics`` (``NewTopic``) and waits until the cluster serves each with all its partitions.

    A KRaft controller acknowledges CreateTopics once it has committed the topic; the broker
    answers for it only once it has applied that record. A broker that has just started (and
    loads thousands of logs) took 2.8 s to do so in one test run, and a controller asked to
    mirror the topic in between answered, rightly, that it did not exist.
    """
    for future in admin.create_topics(topics).values():
        future.result(timeout)

    def served() -> bool:
        listed = admin.list_topics(timeout=10).topics
        return all(
            (meta := listed.get(t.topic)) is not None
            and meta.error is None
            and len(meta.partitions) == t.num_partitions
            for t in topics
        )

    poll_until(served, timeout, lambda: f"topics {[t.topic for t in topics]} to be served", interval=0.05)


def produce_blocking(producer: Producer, topic: str, *args: Any, wait_s: float = 0.05, **kwargs: Any) -> None:
    """``producer.produce(topic, ...)``; while the local queue is full (``BufferError``), serves
    delivery reports for ``wait_s`` and tries again. Bounded: queued records leave the queue
    acknowledged, or failed after the producer's ``message.timeout.ms``."""
    while True:
        try:
            producer.produce(topic, *args, **kwargs)
            return
        except BufferError:
            producer.poll(wait_s)


def end_offsets(admin: AdminClient, topic: str, timeout: float = 10.0) -> dict[int, int]:
    """Partition -> log-end offset of ``topic``; empty when the topic does not exist (yet).

    A topic created a moment ago may have partitions without a known leader for a while: that
    raises ``KafkaException``, which a caller polling for a count ignores (see :func:`poll_until`).
    """
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    metadata = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        return {}
    request = {TopicPartition(topic, p): OffsetSpec.latest() for p in metadata.partitions}
    futures = admin.list_offsets(request, request_timeout=timeout)
    return {tp.partition: int(future.result().offset) for tp, future in futures.items()}


def records_in(admin: AdminClient, topic: str) -> int:
    """How many records ``topic`` holds (sum of its log-end offsets, on a fresh topic); 0 while it
    does not exist or a partition has no leader yet. For progress counters."""
    from confluent_kafka import KafkaException

    try:
        return sum(end_offsets(admin, topic).values())
    except KafkaException:
        return 0


def commit_offset(cluster: Mapping[str, Any], group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commits ``offset`` for ``group`` on ``topic``/``partition`` of ``cluster`` (as an application would)."""
    from confluent_kafka import TopicPartition

    from ferry.common.kafka import clients as kafka_clients

    consumer = kafka_clients.consumer(cluster, group)
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed_offset(cluster: Mapping[str, Any], group: str, topic: str, partition: int = 0) -> int | None:
    """``group``'s committed offset on ``topic``/``partition`` of ``cluster``; None when it has none."""
    from confluent_kafka import TopicPartition

    from ferry.common.kafka import clients as kafka_clients

    consumer = kafka_clients.consumer(cluster, group)
    try:
        offset = consumer.committed([TopicPartition(topic, partition)], timeout=10)[0].offset
        return int(offset) if offset >= 0 else None
    finally:
        consumer.close()


# --- fleets --------------------------------------------------------------------------------


class _Addressed(Protocol):
    @property
    def address(self) -> str: ...


class StackAddresses(Protocol):
    """What :func:`fleet_config` reads of a local stack (:class:`devstack.stack.Stack` has it): its ZooKeeper's
    address and each cluster's bootstrap servers."""

    @property
    def zookeeper(self) -> _Addressed: ...

    def bootstrap(self, cluster: str) -> str: ...


def fleet_config(stack: StackAddresses, zk_root: str, *overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The config of a controller + workers fleet on ``stack``: its ZooKeeper under ``zk_root``,
    clusters ``src`` and ``dst`` (PLAINTEXT listeners) and the route ``src`` -> ``dst``.

    Each of ``overrides`` (in order) is merged one level deep: a section given as a mapping
    updates the section of that name (``{"controller": {"rest_port": 9000}}``), anything else
    replaces it.
    """
    config: dict[str, Any] = {
        "zookeeper": {"connect": stack.zookeeper.address, "root": zk_root},
        "clusters": {name: {"bootstrap.servers": stack.bootstrap(name)} for name in ("src", "dst")},
        "routes": [{"source": "src", "destination": "dst"}],
    }
    for layer in overrides:
        for section, values in layer.items():
            current = config.get(section)
            if isinstance(values, Mapping) and isinstance(current, dict):
                config[section] = {**current, **values}
            else:
                config[section] = values
    return config
