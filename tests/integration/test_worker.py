"""A real :class:`worker.service.Worker`, in-process on a thread, against the local stack.

The test plays the controller: it writes ``assignments/<worker>`` and reads
``workers/state/<worker>`` in its own ZooKeeper chroot, produces on the ``src`` cluster and
reads what arrived on ``dst``. Every wait polls a real server with a deadline.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from prometheus_client.parser import text_string_to_metric_families

from ferry.common.config import FerryConfig, parse_config
from ferry.common.core import provenance
from ferry.common.core.offset_map import MAP_TOPIC, Segment, merge, parse_segment
from ferry.common.kafka import clients as kafka_clients
from ferry.common.model import PartitionKey, WorkerAssignment, WorkerStatus
from ferry.common.zk.layout import ZkLayout, make_client
from ferry.devstack.support import create_topics, end_offsets, free_port, poll_until
from ferry.worker.service import Worker

ROUTE = "src.dst"
GROUP = "ferry.src.dst"
LAYOUT = ZkLayout("/")  # the worker's config points at this test's chroot
# What worker/copying/committer.py logs when a copier releases partitions with records still unacknowledged.
UNACKED_AT_RELEASE = re.compile(r"(\d+) records still unacknowledged")
# key, value, headers, (timestamp type, timestamp)
Record = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], tuple[int, int]]


def wait_until(
    condition: Callable[[], Any], timeout: float, what: str | Callable[[], str], interval: float = 0.1
) -> Any:
    return poll_until(condition, timeout, what, interval=interval)


# -- Kafka side ------------------------------------------------------------------------------


class Kafka:
    """Produces on ``src``, reads ``dst``, and reads the route's committed offsets on ``src``."""

    def __init__(self, cluster_conf: Callable[[str], dict[str, str]]) -> None:
        self.conf = cluster_conf
        self._producer: Producer = kafka_clients.producer(cluster_conf("src"), **{"linger.ms": 0})
        self._group: Consumer = kafka_clients.consumer(cluster_conf("src"), GROUP)
        self._readers: dict[str, Consumer] = {}
        self._admins: dict[str, AdminClient] = {}

    def close(self) -> None:
        self._group.close()
        for reader in self._readers.values():
            reader.close()

    def produce(self, topic: str, partition: int, records: Sequence[Record]) -> None:
        """Produces ``records`` to one source partition, in order, and waits until all are acknowledged."""
        failures: list[str] = []

        def delivered(error: Any, _message: Any) -> None:
            if error is not None:
                failures.append(error.str())

        for key, value, headers, (_, timestamp) in records:
            self._producer.produce(
                topic, value, key, partition, timestamp=timestamp, headers=list(headers), on_delivery=delivered
            )
        assert self._producer.flush(30) == 0, "the source did not acknowledge every record"
        assert not failures, failures

    def _reader(self, cluster: str) -> Consumer:
        if cluster not in self._readers:
            self._readers[cluster] = kafka_clients.consumer(self.conf(cluster), f"ferry-test-reader-{uuid.uuid4().hex}")
        return self._readers[cluster]

    def end_offset(self, cluster: str, topic: str, partition: int) -> int:
        """The partition's log-end offset; 0 while the topic does not exist (or has no leader) yet."""
        if cluster not in self._admins:
            self._admins[cluster] = kafka_clients.admin(self.conf(cluster))
        try:
            return end_offsets(self._admins[cluster], topic).get(partition, 0)
        except KafkaException as exc:
            # Not there yet, or just created and its leader not known everywhere yet.
            if exc.args[0].code() in (
                KafkaError._UNKNOWN_PARTITION,
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError.NOT_LEADER_FOR_PARTITION,
                KafkaError.LEADER_NOT_AVAILABLE,
            ):
                return 0
            raise

    def read(self, cluster: str, topic: str, partition: int, own_header: bool = False) -> list[Record]:
        """Everything in one partition now, from the beginning up to the log-end offset.

        Ferry's provenance header is left out of each record's headers unless ``own_header``.
        """
        end = self.end_offset(cluster, topic, partition)
        if end <= 0:
            return []
        reader = self._reader(cluster)
        reader.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        records: list[Record] = []
        deadline = time.monotonic() + 20
        try:
            # To the log end by position: an exactly-once route's transaction markers (and aborted
            # copies) take offsets that this read_committed reader never returns.
            while time.monotonic() < deadline:
                for m in reader.consume(1000, 0.2):
                    assert m.error() is None, m.error()
                    headers: Any = m.headers() or () if own_header else provenance.split(m.headers())[0]
                    records.append((m.key(), m.value(), tuple(headers), m.timestamp()))
                if reader.position([TopicPartition(topic, partition)])[0].offset >= end:
                    return records
            raise AssertionError(f"{cluster} {topic}/{partition}: read {len(records)} records, not to offset {end}")
        finally:
            reader.unassign()

    def wait_arrived(self, topic: str, partition: int, count: int, timeout: float = 20) -> list[Record]:
        """Waits until the destination partition holds at least ``count`` records; returns them all."""

        def describe() -> str:
            seqs = [dict(headers).get("seq") for _, _, headers, _ in self.read("dst", topic, partition)]
            return f"{count} records at dst {topic}/{partition} (has {len(seqs)}, seq headers {seqs})"

        wait_until(
            lambda: (
                self.end_offset("dst", topic, partition) >= count and len(self.read("dst", topic, partition)) >= count
            ),
            timeout,
            describe,
        )
        return self.read("dst", topic, partition)

    def committed(self, topic: str, partition: int) -> int:
        """The route group's committed offset on the source; negative when none."""
        [tp] = self._group.committed([TopicPartition(topic, partition)], timeout=10)
        return int(tp.offset)

    def wait_committed(self, topic: str, partition: int, offset: int, timeout: float = 15) -> None:
        wait_until(
            lambda: self.committed(topic, partition) == offset,
            timeout,
            lambda: f"committed offset {offset} on src {topic}/{partition} (is {self.committed(topic, partition)})",
        )


def records(tag: str, count: int, start: int = 0, partition: int = 0) -> list[Record]:
    """Numbered records with a key, two headers (one repeated name) and a CreateTime an hour ago.

    Every fifth record (the first included) has no key; the last one of a batch of more than two
    is a tombstone (value None).
    """
    base_ts = int(time.time() * 1000) - 3_600_000
    result: list[Record] = []
    for i in range(start, start + count):
        key = None if i % 5 == 0 else f"key-{partition}-{i}".encode()
        value: bytes | None = f"{tag}-{partition}-{i}".encode() * 4
        if count > 2 and i == start + count - 1:
            value = None
        headers = (("seq", str(i).encode()), ("origin", tag.encode()), ("seq", b"again"))
        result.append((key, value, headers, (TIMESTAMP_CREATE_TIME, base_ts + i)))
    return result


def recopied_count(arrived: list[Record], sent: list[Record]) -> int:
    """``arrived`` is ``sent[:a] + sent[b:]`` with ``b <= a``: nothing lost, nothing reordered,
    and the only duplicates are one contiguous re-read from an earlier offset. Returns ``a - b``."""
    for cut in range(len(sent) + 1):
        head, tail = arrived[:cut], arrived[cut:]
        if head != sent[:cut]:
            break
        start = len(sent) - len(tail)
        if 0 <= start <= cut and tail == sent[start:]:
            return cut - start
    raise AssertionError(
        f"destination is not a prefix plus a re-read suffix of the source ({len(arrived)} arrived, {len(sent)} sent)"
    )


def expire_session(client: KazooClient, servers: str, timeout: float = 30) -> None:
    """Expires ``client``'s ZooKeeper session: another connection takes the session over and closes it.

    ``client`` may reconnect and take its session back before the other connection closed it;
    then this tries again, until ``client`` is connected under a new session.
    """
    session = client.client_id
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        thief = KazooClient(hosts=servers, client_id=session)  # no chroot: nothing to check at start
        with contextlib.suppress(KazooException, KazooTimeoutError):
            thief.start(timeout=5)
        thief.stop()  # closes the session, if this connection still holds it
        thief.close()
        attempt_over = time.monotonic() + 5
        while time.monotonic() < attempt_over:
            current = client.client_id
            if client.connected and current is not None and current[0] != session[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"the ZooKeeper session {session[0]:#x} did not expire within {timeout:.0f}s")


# -- the worker ------------------------------------------------------------------------------


@dataclass
class RunningWorker:
    """A worker on a thread, and the test's controller-side view of it."""

    worker: Worker
    zk: KazooClient  # the test's chrooted client
    thread: threading.Thread
    result: list[int | BaseException] = field(default_factory=list)
    generation: int = 0

    @property
    def id(self) -> str:
        return self.worker.worker_id

    def assign(self, topic: str, partitions: Sequence[int]) -> int:
        """Writes a new generation of this worker's assignment; returns the generation."""
        self.generation += 1
        data = WorkerAssignment(
            self.generation, frozenset(PartitionKey(ROUTE, topic, p) for p in partitions)
        ).to_bytes()
        path = LAYOUT.assignment(self.id)
        if self.zk.exists(path):
            self.zk.set(path, data)
        else:
            self.zk.create(path, data, makepath=True)
        return self.generation

    def status(self) -> WorkerStatus | None:
        try:
            data, _ = self.zk.get(LAYOUT.worker_state(self.id))
        except NoNodeError:
            return None
        return WorkerStatus.from_bytes(data)

    def wait_status(self, condition: Callable[[WorkerStatus], bool], what: str, timeout: float = 20) -> WorkerStatus:
        def check() -> WorkerStatus | None:
            status = self.status()
            return status if status is not None and condition(status) else None

        status: WorkerStatus = wait_until(check, timeout, lambda: f"{what} (status: {self.status()})")
        return status

    def wait_online(self, topic: str, partitions: Sequence[int], generation: int, timeout: float = 20) -> WorkerStatus:
        wanted = {PartitionKey(ROUTE, topic, p) for p in partitions}
        return self.wait_status(
            lambda s: (
                s.generation == generation
                and set(s.partitions) == wanted
                and all(v.state == "ONLINE" for v in s.partitions.values())
            ),
            f"generation {generation} applied with {sorted(partitions)} ONLINE",
            timeout,
        )

    def leave(self, timeout: float = 30) -> int | BaseException:
        """Stops the worker as SIGTERM does, and empties its assignment once it says it is leaving."""
        self.worker.stop()
        self.wait_status(lambda s: s.leaving, "status with leaving=true")
        self.generation += 1
        self.zk.set(LAYOUT.assignment(self.id), WorkerAssignment(self.generation).to_bytes())
        return self.join(timeout)

    def join(self, timeout: float = 30) -> int | BaseException:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "worker.run() did not return after stop()"
        return self.result[0]


@pytest.fixture
def kafka(cluster_conf: Callable[[str], dict[str, str]]) -> Iterator[Kafka]:
    tool = Kafka(cluster_conf)
    yield tool
    tool.close()


@pytest.fixture
def make_config(zk_chroot: str, cluster_conf: Callable[[str], dict[str, str]]) -> Callable[..., FerryConfig]:
    def make(delivery_guarantee: str | None = None, **worker: Any) -> FerryConfig:
        """The route as README's (no ``delivery_guarantee``: exactly once) unless one is given."""
        route = {"source": "src", "destination": "dst"}
        if delivery_guarantee is not None:
            route["delivery_guarantee"] = delivery_guarantee
        return parse_config(
            {
                "zookeeper": {"connect": zk_chroot, "root": "/"},
                "clusters": {"src": cluster_conf("src"), "dst": cluster_conf("dst")},
                "routes": [route],
                "worker": {"commit_interval_s": 0.2, "metrics_port": 0, **worker},
            }
        )

    return make


@pytest.fixture
def start_worker(zk: KazooClient, make_config: Callable[..., FerryConfig]) -> Iterator[Callable[..., RunningWorker]]:
    started: list[RunningWorker] = []
    clients: list[KazooClient] = []
    # The test plays the leading controller: a draining worker waits for it to move its partitions.
    zk.create(LAYOUT.leader, b'{"id": "test"}', makepath=True)

    def start(
        config: FerryConfig | None = None, zk_client: KazooClient | None = None, metrics_port: int | None = None
    ) -> RunningWorker:
        """Runs a worker on a thread; with ``zk_client``, starts that client for it (and closes it at the end)."""
        if zk_client is not None:
            clients.append(zk_client)
            zk_client.start(timeout=15)
        worker = Worker(
            config=config or make_config(),
            worker_id=f"w-{uuid.uuid4().hex[:8]}",
            metrics_port=metrics_port,
            zk=zk_client,
        )
        result: list[int | BaseException] = []

        def run() -> None:
            try:
                result.append(worker.run())
            except BaseException as exc:  # reported by join() and by this fixture's teardown
                result.append(exc)

        running = RunningWorker(
            worker, zk, threading.Thread(target=run, name=f"worker-{worker.worker_id}", daemon=True), result
        )
        started.append(running)
        running.thread.start()
        wait_until(
            lambda: zk.exists(LAYOUT.live_worker(worker.worker_id)) or result,
            20,
            f"worker {worker.worker_id} registered",
        )
        assert not result, f"worker.run() ended early: {result}"
        return running

    yield start
    for running in started:
        if running.thread.is_alive():
            running.worker.stop()
            # An empty assignment ends the drain's wait for the leader at once.
            with contextlib.suppress(NoNodeError):
                zk.delete(LAYOUT.assignment(running.id))
            running.thread.join(30)
    for client in clients:  # only once the workers using them stopped
        client.stop()
        client.close()
    for running in started:
        assert not running.thread.is_alive(), f"worker {running.id} did not stop"
        assert running.result and not isinstance(running.result[0], BaseException), running.result


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_copies_records_identically_and_commits_to_the_end(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    guarantee: str,
    copy_core: str,
) -> None:
    topic = topic_name(f"copy-{guarantee[:3]}-{copy_core[:3]}")
    create_topic("src", topic, 3)
    sent = {p: records("one", 12, partition=p) for p in range(3)}
    for p, batch in sent.items():
        kafka.produce(topic, p, batch)

    running = start_worker(make_config(delivery_guarantee=guarantee, copy_core=copy_core))
    generation = running.assign(topic, [0, 1, 2])

    for p in range(3):
        assert kafka.wait_arrived(topic, p, len(sent[p])) == sent[p]
        # Each copy names where it came from: the source cluster and its offset there.
        copies = kafka.read("dst", topic, p, own_header=True)
        assert [provenance.read(headers) for _, _, headers, _ in copies] == [
            provenance.Provenance(("src",), 0, offset, provenance.topic_tag(topic)) for offset in range(len(sent[p]))
        ]
    meta = kafka_clients.admin(kafka.conf("dst")).list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None and len(meta.partitions) == 3
    running.wait_online(topic, [0, 1, 2], generation)
    for p in range(3):
        kafka.wait_committed(topic, p, kafka.end_offset("src", topic, p))


@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_copies_of_copies_get_the_stampers_header(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    copy_core: str,
) -> None:
    """Records that came to the source from other clusters (their provenance headers: tagged for this topic,
    for another topic, of either version, malformed), mixed with local ones: each copy carries exactly the
    header the stamper writes for it, and a malformed header stops its partition at that offset."""
    topic = topic_name(f"hops-{copy_core[:3]}")
    create_topic("src", topic, 2)
    tag = provenance.topic_tag(topic).decode()
    hop_v2 = f"2|far|0|{tag}|".encode()
    previous = [
        None,
        ("ferry.provenance", hop_v2 + b"17"),
        ("ferry.provenance", f"3|far|0|{tag}".encode()),
        ("ferry.provenance", f"2|far|0|{provenance.topic_tag('other').decode()}|5".encode()),  # local here
        ("ferry.provenance", hop_v2 + b"18"),
    ]
    base = records("hop", 40)
    sent = []
    for i, (key, value, headers, timestamp) in enumerate(base):
        extra = previous[i % len(previous)]
        sent.append((key, value, (*headers, extra) if extra else headers, timestamp))
    kafka.produce(topic, 0, sent)
    broken = records("broken", 3, partition=1)
    broken[1] = (broken[1][0], broken[1][1], (("ferry.provenance", hop_v2 + b"x"),), broken[1][3])
    kafka.produce(topic, 1, broken)

    running = start_worker(make_config(copy_core=copy_core))
    running.assign(topic, [0, 1])

    stamp = provenance.Stamper("src").for_topic(topic, topic).stamp
    expected = [stamp(list(headers), offset) for offset, (_, _, headers, _) in enumerate(sent)]
    copies = kafka.wait_arrived(topic, 0, len(sent))
    assert [record[:2] for record in copies] == [record[:2] for record in sent]
    assert [list(h) for _, _, h, _ in kafka.read("dst", topic, 0, own_header=True)] == expected
    stopped = PartitionKey(ROUTE, topic, 1)
    status = running.wait_status(lambda s: stopped in s.partitions and s.partitions[stopped].state == "ERROR", "ERROR")
    assert "offset 1" in (status.partitions[stopped].reason or "")
    assert kafka.read("dst", topic, 1) == broken[:1]


@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_small_producer_batches_make_a_hot_partition_wait_for_its_window_and_every_record_arrives_once(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    copy_core: str,
) -> None:
    """With ``batch.size`` 1024 a delivery run holds about twenty of these records, and the backlog of the
    route's only busy partition fills its window of two batches again and again: each next run waits for
    the destination's reports. Every record arrives once and in order, each copy names its source offset,
    and the commit reaches the end."""
    topic = topic_name("window")
    create_topic("src", topic, 1)
    count = 3000
    sent = records("window", count)
    kafka.produce(topic, 0, sent)

    running = start_worker(make_config(producer={"batch.size": 1024}, copy_core=copy_core))
    generation = running.assign(topic, [0])

    assert kafka.wait_arrived(topic, 0, count, timeout=60) == sent
    copies = kafka.read("dst", topic, 0, own_header=True)
    assert [provenance.read(headers) for _, _, headers, _ in copies] == [
        provenance.Provenance(("src",), 0, offset, provenance.topic_tag(topic)) for offset in range(count)
    ]
    running.wait_online(topic, [0], generation)
    kafka.wait_committed(topic, 0, count)


@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_unassigned_partition_is_committed_and_resumes_without_duplicates(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    copy_core: str,
) -> None:
    topic = topic_name("move")
    create_topic("src", topic, 3)
    first = {p: records("first", 10, partition=p) for p in range(3)}
    for p, batch in first.items():
        kafka.produce(topic, p, batch)
    running = start_worker(make_config(copy_core=copy_core))
    running.wait_online(topic, [0, 1, 2], running.assign(topic, [0, 1, 2]))
    for p in range(3):
        kafka.wait_arrived(topic, p, 10)

    generation = running.assign(topic, [0, 2])
    running.wait_online(topic, [0, 2], generation)
    assert kafka.committed(topic, 1) == 10, "the release commits everything the destination acknowledged"

    second = {p: records("second", 7, start=10, partition=p) for p in range(3)}
    for p, batch in second.items():
        kafka.produce(topic, p, batch)
    for p in (0, 2):
        assert kafka.wait_arrived(topic, p, 17) == first[p] + second[p]
    assert len(kafka.read("dst", topic, 1)) == 10, "an unassigned partition is not copied"

    generation = running.assign(topic, [0, 1, 2])
    running.wait_online(topic, [0, 1, 2], generation)
    assert kafka.wait_arrived(topic, 1, 17) == first[1] + second[1]
    for p in range(3):
        kafka.wait_committed(topic, p, 17)
    assert kafka.read("dst", topic, 1) == first[1] + second[1], "nothing copied twice"


def _copied_by_an_earlier_owner(kafka: Kafka, topic: str, sent: list[Record], bound: bool) -> None:
    """Writes copies of ``sent`` (source offsets from 0) to ``topic`` on dst as an earlier owner of the route
    did, with their provenance headers (version 2, or with ``bound`` False version 1)."""
    copier = kafka_clients.producer(kafka.conf("dst"), **{"linger.ms": 0})
    for offset, (key, value, headers, (_, timestamp)) in enumerate(sent):
        own = provenance.encode(("src",), 0, offset, topic if bound else None)
        copier.produce(topic, value, key, 0, timestamp=timestamp, headers=[*headers, (provenance.HEADER, own)])
    assert copier.flush(30) == 0


def test_an_exactly_once_route_taking_an_at_least_once_routes_partition_skips_its_copies_past_the_commit(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    """The route's guarantee was changed: an at-least-once owner copied source offsets 0-9 (provenance
    version 2, with their offsets) and committed 5. The exactly-once owner starts at 5, skips 5-9, which
    their headers say are there, and copies only 10-14; the look-back reads past the version 2 copies."""
    topic = topic_name("switched")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    sent = records("switched", 15)
    kafka.produce(topic, 0, sent)
    _copied_by_an_earlier_owner(kafka, topic, sent[:10], bound=True)
    group = kafka_clients.consumer(kafka.conf("src"), GROUP)
    group.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    group.close()

    running = start_worker()
    running.wait_online(topic, [0], running.assign(topic, [0]))
    kafka.wait_committed(topic, 0, 15)
    copies = kafka.read("dst", topic, 0)
    assert [(k, v) for k, v, _, _ in copies] == [(k, v) for k, v, _, _ in sent], "each record once, in order"


def test_a_partition_whose_copies_are_all_on_the_destination_and_never_committed_commits_its_start(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    """A former owner copied everything and stopped before its first commit: the new owner resumes
    past the copies it reads back, copies nothing again, and commits where it starts, so the
    partition shows no lag while no new record comes. At least once: an exactly-once route commits
    such a start with its next transaction, whose map segments it must not precede."""
    topic = topic_name("uncommitted")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    sent = records("before", 10)
    kafka.produce(topic, 0, sent)
    _copied_by_an_earlier_owner(kafka, topic, sent, bound=False)
    assert kafka.committed(topic, 0) < 0  # nothing committed

    running = start_worker(make_config(delivery_guarantee="at_least_once"))
    running.wait_online(topic, [0], running.assign(topic, [0]))
    kafka.wait_committed(topic, 0, 10)
    assert kafka.end_offset("dst", topic, 0) == 10, "nothing copied twice"


def test_a_fresh_group_on_a_new_topic_copies_with_no_coordinator_warm_up(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    cluster_conf: Callable[[str], dict[str, str]],
) -> None:
    # librdkafka#5586: an assign() without an offset whose committed-offset fetch is answered
    # NOT_COORDINATOR is never fetched. The worker reads committed offsets itself and assigns
    # explicit offsets (worker/position/start_offsets.py). Nothing warms the coordinator here: a group id
    # never used, a topic never read, nothing committed or copied, so the partitions start at
    # the reset policy's explicit offset (earliest).
    topic = topic_name("fresh")
    create_topic("src", topic, 2)
    sent = {p: records("fresh", 6, partition=p) for p in range(2)}
    for p, batch in sent.items():
        kafka.produce(topic, p, batch)
    group = f"ferry.fresh-{uuid.uuid4().hex[:8]}"
    running = start_worker(make_config(consumer={"group.id": group}))
    running.wait_online(topic, [0, 1], running.assign(topic, [0, 1]))
    for p in range(2):
        assert kafka.wait_arrived(topic, p, 6) == sent[p]

    more = records("more", 4, start=6, partition=1)
    kafka.produce(topic, 1, more)
    assert kafka.wait_arrived(topic, 1, 10) == sent[1] + more
    reader = kafka_clients.consumer(cluster_conf("src"), group)
    try:
        wait_until(
            lambda: (
                [tp.offset for tp in reader.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)]
                == [6, 10]
            ),
            15,
            f"the fresh group {group} committed 6 and 10",
        )
    finally:
        reader.close()


@pytest.mark.parametrize(
    ("producer_limit", "copy_small_first", "delivery_guarantee"),
    [
        # worker.producer message.max.bytes below the record's size: produce() itself refuses it.
        pytest.param(4000, False, None, id="refused-by-produce"),
        # The destination broker rejects it; the small records before it were copied earlier.
        pytest.param(None, True, None, id="rejected-by-broker"),
        # Produced together with the small records before it: batches fit the topic limit, so only it fails.
        # At least once: on an exactly-once route the records before it share its transaction, which is
        # aborted, and they are copied when the partition is started again (nothing lost, nothing before).
        pytest.param(None, False, "at_least_once", id="rejected-by-broker-in-one-batch"),
    ],
)
@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_record_too_large_for_the_destination_stops_only_its_partition(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    producer_limit: int | None,
    copy_small_first: bool,
    delivery_guarantee: str | None,
    copy_core: str,
) -> None:
    topic = topic_name("large")
    create_topic("src", topic, 3)
    admin = kafka_clients.admin(kafka.conf("dst"))
    create_topics(admin, [NewTopic(topic, 3, 1, config={"max.message.bytes": "2000"})])
    small_before = records("small", 5, partition=0)
    # Random bytes: the route compresses (lz4), and 10,000 x's would fit the limit once compressed.
    big: Record = (b"big", os.urandom(10_000), (), (TIMESTAMP_CREATE_TIME, small_before[-1][3][1] + 1))
    small_after = records("after", 5, start=6, partition=0)
    others = {p: records("other", 8, partition=p) for p in (1, 2)}
    for p, batch in others.items():
        kafka.produce(topic, p, batch)
    kafka.produce(topic, 0, small_before)
    if not copy_small_first:
        kafka.produce(topic, 0, [big, *small_after])

    producer = {} if producer_limit is None else {"message.max.bytes": producer_limit}
    running = start_worker(make_config(delivery_guarantee=delivery_guarantee, producer=producer, copy_core=copy_core))
    running.assign(topic, [0, 1, 2])
    if copy_small_first:
        assert kafka.wait_arrived(topic, 0, 5) == small_before
        kafka.produce(topic, 0, [big, *small_after])
    key = PartitionKey(ROUTE, topic, 0)
    status = running.wait_status(
        lambda s: key in s.partitions and s.partitions[key].state == "ERROR", "partition 0 in ERROR"
    )
    reason = status.partitions[key].reason or ""
    assert "offset 5" in reason, reason
    assert kafka.wait_arrived(topic, 0, 5)[:5] == small_before
    for p, batch in others.items():
        assert kafka.wait_arrived(topic, p, 8) == batch
    kafka.wait_committed(topic, 0, 5)

    # The other partitions keep copying while partition 0 stays stopped.
    more = {p: records("more", 4, start=8, partition=p) for p in (1, 2)}
    for p, batch in more.items():
        kafka.produce(topic, p, batch)
    for p in (1, 2):
        assert kafka.wait_arrived(topic, p, 12) == others[p] + more[p]
        kafka.wait_committed(topic, p, 12)
    assert kafka.committed(topic, 0) == 5, "never committed past the rejected record"
    assert big not in kafka.read("dst", topic, 0)
    final = running.status()
    assert final is not None and final.partitions[key].state == "ERROR"
    assert {final.partitions[PartitionKey(ROUTE, topic, p)].state for p in (1, 2)} == {"ONLINE"}


def test_stop_drains_commits_and_leaves(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    zk: KazooClient,
) -> None:
    topic = topic_name("stop")
    create_topic("src", topic, 3)
    sent = {p: records("stop", 300, partition=p) for p in range(3)}
    for p, batch in sent.items():
        kafka.produce(topic, p, batch)
    running = start_worker()
    generation = running.assign(topic, [0, 1, 2])
    running.wait_online(topic, [0, 1, 2], generation)

    # Stop as soon as every partition has started copying, so some may still be on their way.
    wait_until(lambda: all(kafka.end_offset("dst", topic, p) > 0 for p in range(3)), 20, "copying started everywhere")
    running.worker.stop()
    status = running.wait_status(lambda s: s.leaving, "status with leaving=true")
    assert not status.partitions or {v.state for v in status.partitions.values()} == {"OFFLINE"}, status
    for p in range(3):
        arrived = kafka.read("dst", topic, p)
        assert arrived == sent[p][: len(arrived)]
        assert kafka.committed(topic, p) == len(arrived), "drained: everything that arrived is committed"
    # The controller's part: it moves the partitions away, which ends the drain.
    running.assign(topic, [])
    assert running.join() == 0
    assert zk.exists(LAYOUT.live_worker(running.id)) is None
    assert zk.exists(LAYOUT.worker_state(running.id)) is None


def test_stop_while_no_controller_leads_does_not_wait_for_one(
    start_worker: Callable[..., RunningWorker],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    zk: KazooClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="ferry.worker.service")
    topic = topic_name("leaderless")
    create_topic("src", topic, 2)
    running = start_worker()
    running.wait_online(topic, [0, 1], running.assign(topic, [0, 1]))
    zk.delete(LAYOUT.leader)  # the whole fleet stops: the controllers went first
    running.worker.stop()
    assert running.join() == 0  # its assignment still names both partitions: nobody emptied it
    assert "no controller leads, so not waiting for the partitions to move" in caplog.text
    assert zk.exists(LAYOUT.live_worker(running.id)) is None


def test_session_expiry_releases_registers_again_and_resumes(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    zk_chroot: str,
    zk: KazooClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="worker")
    topic = topic_name("expire")
    create_topic("src", topic, 3)
    sent = {p: records("before", 10, partition=p) for p in range(3)}
    for p, batch in sent.items():
        kafka.produce(topic, p, batch)
    config = make_config()
    # The test's own client for the worker, to know (and steal) its session; the fixture closes it.
    worker_zk = make_client(config.zookeeper)
    running = start_worker(config, zk_client=worker_zk)
    generation = running.assign(topic, [0, 1, 2])
    running.wait_online(topic, [0, 1, 2], generation)
    for p in range(3):
        kafka.wait_arrived(topic, p, 10)
    old_session = worker_zk.client_id[0]

    # Keep records flowing through the expiry, so some are in flight when it happens.
    stop_producing = threading.Event()
    during: dict[int, list[Record]] = {p: [] for p in range(3)}

    def produce_steadily() -> None:
        i = 10
        while not stop_producing.is_set():
            for p in range(3):
                batch = records("during", 1, start=i, partition=p)
                kafka.produce(topic, p, batch)
                during[p].extend(batch)
            i += 1

    producer = threading.Thread(target=produce_steadily, daemon=True)
    producer.start()
    try:
        expire_session(worker_zk, zk_chroot.split("/", 1)[0])

        def registered_again() -> bool:
            stat = zk.exists(LAYOUT.live_worker(running.id))
            return stat is not None and stat.owner_session_id not in (old_session, None)

        wait_until(registered_again, 30, "the live node under a new session")
        running.wait_online(topic, [0, 1, 2], generation)
    finally:
        stop_producing.set()
        producer.join(10)

    assert worker_zk.client_id[0] != old_session
    messages = [r.getMessage() for r in caplog.records]
    assert any("session lost: at-least-once routes release their partitions" in m for m in messages), messages
    assert any("registered again" in m for m in messages), messages
    # Releasing flushes before it commits, so only what the destination had not acknowledged
    # by then (the copier logs how many) may be copied twice.
    in_flight_bound = sum(int(m.group(1)) for m in map(UNACKED_AT_RELEASE.search, messages) if m)
    for p in range(3):
        expected = sent[p] + during[p]
        kafka.wait_committed(topic, p, len(expected), timeout=20)
        arrived = kafka.read("dst", topic, p)
        recopied = recopied_count(arrived, expected)
        assert recopied <= in_flight_bound, f"partition {p}: {recopied} records copied twice"
    # The assignment watch survived the new session: a new generation still applies.
    running.wait_online(topic, [0, 1], running.assign(topic, [0, 1]))
    assert running.leave() == 0


def test_a_worker_whose_nodes_are_deleted_under_it_registers_again_and_takes_a_new_assignment(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    zk: KazooClient,
) -> None:
    topic = topic_name("wiped")
    create_topic("src", topic, 2)
    config = make_config()
    worker_zk = make_client(config.zookeeper)
    running = start_worker(config, zk_client=worker_zk)
    running.wait_online(topic, [0, 1], running.assign(topic, [0, 1]))

    # Ferry's root deleted under a running fleet: the worker's folders, its nodes and its assignment go.
    zk.delete("/workers", recursive=True)
    zk.delete(LAYOUT.assignments, recursive=True)

    def registered_again() -> bool:
        stat = zk.exists(LAYOUT.live_worker(running.id))
        return stat is not None and stat.owner_session_id == worker_zk.client_id[0]

    wait_until(registered_again, 20, "the live node back under the same session")
    running.wait_status(lambda s: not s.partitions, "every partition released (its assignment is gone)")
    # A new leader starts its generations again: the worker takes them.
    running.generation = 0
    running.wait_online(topic, [0, 1], running.assign(topic, [0, 1]))
    assert running.leave() == 0


def test_health_and_metrics_endpoints(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("metrics")
    create_topic("src", topic, 3)
    for p in range(3):
        kafka.produce(topic, p, records("m", 5, partition=p))
    port = free_port()
    running = start_worker(metrics_port=port)
    running.wait_online(topic, [0, 1, 2], running.assign(topic, [0, 1, 2]))
    for p in range(3):
        kafka.wait_arrived(topic, p, 5)

    def get(path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return str(response.read().decode())

    def health_online() -> dict[str, Any] | None:
        body: dict[str, Any] = json.loads(get("/health"))
        return body if body.get("partitions", {}).get("ONLINE") == 3 else None

    health = wait_until(health_online, 10, "/health with 3 partitions ONLINE")
    assert health["worker"] == running.id
    assert health["status"] == "RUNNING"
    assert health["partitions"] == {"ONLINE": 3, "ERROR": 0, "OFFLINE": 0, "PAUSED": 0}
    # Copying: registered, its session held, its assignment applied, its copy loop passing.
    assert health["ready"] is True and health["reasons"] == []
    assert json.loads(get("/health/ready")) == health
    live = json.loads(get("/health/live"))
    assert live["live"] is True and live["reasons"] == [] and live["status"] == "RUNNING"
    line = f'ferry_worker_records_copied_total{{route="{ROUTE}"}} 15.0'
    wait_until(lambda: line in get("/metrics"), 10, f"{line!r} in /metrics")

    # The record age: one observation per run of a partition's records acknowledged together (at
    # least one per partition), of acknowledgement time minus CreateTime, an hour ago here.
    def record_ages() -> dict[tuple[str, str | None], float] | None:
        samples = {
            (s.name, s.labels.get("le")): s.value
            for family in text_string_to_metric_families(get("/metrics"))
            if family.name == "ferry_worker_record_age_seconds"
            for s in family.samples
            if s.labels.get("route") == ROUTE
        }
        return samples if samples.get(("ferry_worker_record_age_seconds_count", None), 0) >= 3 else None

    ages = wait_until(record_ages, 10, "a record age per partition in /metrics")
    count = ages[("ferry_worker_record_age_seconds_count", None)]
    assert count <= 15
    assert 3600 <= ages[("ferry_worker_record_age_seconds_sum", None)] / count < 3700
    assert ages[("ferry_worker_record_age_seconds_bucket", "900.0")] == 0
    assert ages[("ferry_worker_record_age_seconds_bucket", "3600.0")] == 0
    assert ages[("ferry_worker_record_age_seconds_bucket", "+Inf")] == count


def test_a_worker_that_cannot_reach_zookeeper_is_live_but_not_ready() -> None:
    # ZooKeeper at a closed port: the worker keeps trying (until zookeeper.retry_deadline_s) and
    # serves its probes meanwhile; the shared ZooKeeper is never touched.
    config = parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:1", "retry_deadline_s": 120},
            "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
            "routes": [{"source": "src", "destination": "dst"}],
        }
    )
    port = free_port()
    worker = Worker(config=config, worker_id="w-unreachable", metrics_port=port)
    result: list[int | BaseException] = []

    def run() -> None:
        try:
            result.append(worker.run())
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=run, name="worker-unreachable", daemon=True)
    thread.start()

    def probe(path: str) -> tuple[int, dict[str, Any]] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())
        except OSError:  # not listening yet
            return None

    try:
        status, body = wait_until(lambda: probe("/health/ready"), 10, "the worker's readiness probe")
        assert status == 503
        assert body["status"] == "STARTING" and body["worker"] == "w-unreachable" and body["ready"] is False
        assert body["reasons"] == ["not registered in ZooKeeper yet"]
        assert probe("/health") == (status, body)
        assert probe("/health/live") == (
            200,
            {"status": "STARTING", "worker": "w-unreachable", "live": True, "reasons": []},
        )
    finally:
        worker.stop()  # while connecting: ends at once, status 0
        thread.join(15)
    assert result == [0]


class ForeignWriter:
    """Another writer on a destination partition (an application of an active-active pair), producing
    records without Ferry's header on a thread until stopped or ``most`` records were written."""

    def __init__(self, cluster: dict[str, str], topic: str, partition: int, most: int = 20_000) -> None:
        self._producer: Producer = kafka_clients.producer(cluster, **{"linger.ms": 1})
        self._topic, self._partition, self._most = topic, partition, most
        self._stop = threading.Event()
        self.written = 0
        self._thread = threading.Thread(target=self._run, name="foreign-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set() and self.written < self._most:
            try:
                self._producer.produce(self._topic, f"foreign-{self.written}".encode(), None, self._partition)
            except BufferError:
                self._producer.poll(0.01)
                continue
            self.written += 1
            self._producer.poll(0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(30) == 0


def _offset_map(kafka: Kafka, topic: str, partition: int) -> list[Segment]:
    """The route's offset map of ``topic``/``partition`` as stored on the destination (newest value per key)."""
    latest: dict[bytes, Segment | None] = {}
    for key, value, _, _ in kafka.read("dst", MAP_TOPIC, 0, own_header=True):
        assert key is not None
        (route, map_topic, map_partition), _, segment = parse_segment(key, value)
        if (route, map_topic, map_partition) == (ROUTE, topic, partition):
            latest[key] = segment
    return merge(segment for segment in latest.values() if segment is not None)


@pytest.mark.parametrize("copy_core", ["native", "python"])
def test_another_writer_on_the_destination_partition_keeps_the_copy_and_the_offset_map_exact(
    start_worker: Callable[..., RunningWorker],
    make_config: Callable[..., FerryConfig],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
    copy_core: str,
) -> None:
    """While Ferry copies, another producer writes to the same destination partition: its records land
    among Ferry's, also among the records of one of Ferry's runs (one record per produce request makes
    that all but certain). Every source record arrives once, the committed offset reaches the end, and
    every offset-map entry names the destination offset holding that very source record. An
    at-least-once route's concern: its runs are proved by delivery reports, while an exactly-once route's
    copies and map segments commit in one transaction."""
    topic = topic_name("shared")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    running = start_worker(
        make_config(
            delivery_guarantee="at_least_once",
            producer={"batch.num.messages": 1, "linger.ms": 0},
            copy_core=copy_core,
        )
    )
    running.wait_online(topic, [0], running.assign(topic, [0]))
    foreign = ForeignWriter(kafka.conf("dst"), topic, 0)
    try:
        total = 0
        for burst in range(8):
            kafka.produce(topic, 0, records(f"burst{burst}", 400, start=total))
            total += 400
        kafka.wait_committed(topic, 0, total, timeout=90)
    finally:
        foreign.stop()
    assert foreign.written > 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("another writer interleaved" in m for m in messages), "a run of Ferry's was interleaved"
    copies = kafka.read("dst", topic, 0, own_header=True)
    source_offsets = [p.source_offset for p in (provenance.read(h) for _, _, h, _ in copies) if p is not None]
    assert sorted(source_offsets) == list(range(total)), "every source record once, none lost"
    assert len(copies) > total, "the other writer's records landed on the same partition"
    segments = _offset_map(kafka, topic, 0)
    assert segments, "the offset map describes the copies"
    for segment in segments:
        for source_offset in range(segment.src_start, segment.src_end):
            destination = segment.destination_of(source_offset)
            assert destination is not None
            found = provenance.read(copies[destination][2])
            assert found is not None and found.source_offset == source_offset, (source_offset, destination)
    assert max(segment.src_end for segment in segments) == total


def test_a_partition_whose_destination_holds_another_writers_open_transaction_starts_only_once_it_ends(
    start_worker: Callable[..., RunningWorker],
    kafka: Kafka,
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    """Another transactional writer has a transaction open on the destination partition: a read_committed
    look-back sees nothing past its first record, so the worker does not start the partition below it.
    It waits, counts the wait, and defers the partition with the reason (nothing copied, nothing
    committed) until the transaction commits; then it copies every record once, after it."""
    topic = topic_name("open-txn")
    create_topic("src", topic, 1)
    create_topic("dst", topic, 1)
    sent = records("open", 5)
    kafka.produce(topic, 0, sent)
    other = kafka_clients.producer(kafka.conf("dst"), **{"transactional.id": f"other.{topic}", "linger.ms": 0})
    other.init_transactions(30)
    other.begin_transaction()
    other.produce(topic, b"the other writer's", None, 0)
    assert other.flush(30) == 0

    running = start_worker()
    generation = running.assign(topic, [0])
    key = PartitionKey(ROUTE, topic, 0)

    def waits() -> float:
        value = running.worker.metrics.registry.get_sample_value(
            "ferry_worker_lookback_open_transaction_waits_total", {"route": ROUTE}
        )
        return value or 0.0

    status = running.wait_status(
        lambda s: key in s.partitions and "open transaction" in (s.partitions[key].reason or ""),
        "the partition deferred for the open transaction",
        timeout=60,
    )
    assert status.partitions[key].state == "OFFLINE" and waits() >= 1
    assert kafka.end_offset("dst", topic, 0) == 1 and kafka.committed(topic, 0) < 0  # nothing copied or committed

    other.commit_transaction(30)
    arrived = kafka.wait_arrived(topic, 0, 1 + len(sent), timeout=60)
    assert arrived[0][1] == b"the other writer's" and arrived[1:] == sent
    running.wait_online(topic, [0], generation, timeout=30)
    kafka.wait_committed(topic, 0, len(sent))
