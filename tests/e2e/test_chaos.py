"""Chaos: faults of every outside system, one after another, under a steady stream of records.

A producer writes about 2,500 records/s to an 8-partition source topic mirrored by two
controllers and three workers (real `ferry` processes), while the test, one after another:

1. kills the destination broker with ``kill -9`` and starts it again 15 s later;
2. kills ZooKeeper with ``kill -9`` and starts it again after longer than the session timeout;
3. stops a worker (SIGSTOP) past its session timeout, then lets it go on (SIGCONT);
4. kills the source broker with ``kill -9`` and starts it again 10 s later.

Between faults it waits until every partition is ONLINE again and the destination caught up
with what the source held when the fault was repaired. At the end: every record the producer
got an acknowledgement for is at the destination, in its partition, in source order; every
ferry process is alive; every partition is ONLINE; ``/validation`` is ok; and, as the route writes
exactly once, a read_committed consumer of the destination sees no record twice (duplicates would be
printed per fault, by the time their record was produced: run with ``-s``).

The servers it kills are the shared local stack's: it starts them again with ``processes.up``
(which waits until they answer), also when the test fails.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from confluent_kafka import KafkaError

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import produce_blocking
from tests.harness.processes import HEADER_SEQ, FerryProcess, Fleet, RecordLedger, wait_until

PARTITIONS = 8
RATE_PER_S = 2_500
SESSION_TIMEOUT_S = 4.0
DST_DOWN_S = 15.0
SRC_DOWN_S = 10.0
ZK_DOWN_S = SESSION_TIMEOUT_S + 3.0
WORKER_STOPPED_S = SESSION_TIMEOUT_S + 3.0
RECOVERY_TIMEOUT_S = 90.0


class AckedProducer:
    """Writes numbered records at a steady rate and remembers which ones the source acknowledged.

    Idempotent, ``acks=all``, and a message timeout far longer than any outage, so a broker that
    is down only delays records; a full local queue (BufferError) is waited out, never dropped.
    Record ``seq`` goes to partition ``seq % PARTITIONS``.
    """

    def __init__(self, stack: devstack.Stack, topic: str) -> None:
        self.topic = topic
        self._producer = kafka_clients.producer(
            {"bootstrap.servers": stack.bootstrap("src")},
            **{
                "linger.ms": 20,
                "message.timeout.ms": 300_000,
                "enable.idempotence": True,
                "acks": "all",
                # "Connection refused" every few ms while a broker is down is the point, not news.
                "log_level": 2,
            },
        )
        self._base_timestamp_ms = int(time.time() * 1000)
        self.produced_at: list[float] = []  # monotonic time each seq was handed to the producer
        self.acked: dict[int, int] = {}  # seq -> partition the source acknowledged it in
        self.failed: dict[int, str] = {}  # seq -> why the producer gave up on it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-producer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        seq = int(message.key()[len(b"key-") :])  # delivery reports carry the key, not the headers
        if error is None:
            self.acked[seq] = message.partition()
        else:
            self.failed[seq] = str(error)

    def _produce(self, seq: int) -> None:
        produce_blocking(
            self._producer,
            self.topic,
            partition=seq % PARTITIONS,
            key=f"key-{seq}".encode(),
            value=f"value-{seq}-".encode() * 3,
            timestamp=self._base_timestamp_ms + seq,
            headers=[(HEADER_SEQ, str(seq).encode()), ("origin", b"chaos")],
            on_delivery=self._on_delivery,
        )
        self.produced_at.append(time.monotonic())

    def _run(self) -> None:
        tick = 0.05
        per_tick = int(RATE_PER_S * tick)
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(per_tick):
                self._produce(len(self.produced_at))
            self._producer.poll(0)
            time.sleep(max(0.0, tick - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        remaining = self._producer.flush(120)
        assert remaining == 0, f"{remaining} records still unacknowledged by the source after 120 s"


@dataclass
class Phase:
    name: str
    started: float = 0.0
    repaired: float = 0.0
    recovered: float = 0.0
    notes: list[str] = field(default_factory=list)
    # The destination's log-end offsets when the fault began: a duplicate whose second copy lies
    # at or above them was written during this phase or later.
    dst_ends: dict[int, int] = field(default_factory=dict)


@pytest.fixture
def stack_restored(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The shared stack; whatever this test killed runs again (and answers) when it ends."""
    yield local_stack
    processes.up(local_stack, deadline_s=180)


def test_chaos_loses_nothing_and_every_partition_ends_online(
    fleet: Fleet, stack_restored: devstack.Stack, topic_name: Callable[[str], str]
) -> None:
    stack = stack_restored
    began = time.monotonic()
    topic = topic_name("chaos")
    fleet.session_timeout_s = SESSION_TIMEOUT_S
    fleet.extra = {
        "controller": {"lag_interval_s": 1},
        "routes": [{"source": "src", "destination": "dst"}],  # no delivery_guarantee: exactly once, the default
    }
    fleet.write_config()
    ledger = RecordLedger(stack, topic, PARTITIONS, transactional_destination=True)
    ledger.create_source_topic()
    controllers = [fleet.start_controller("c1"), fleet.start_controller("c2")]
    workers = [fleet.start_worker(f"w{i}") for i in (1, 2, 3)]
    leader = fleet.wait_for_leader(*controllers)
    fleet.wait_for_workers(leader, {w.name for w in workers})
    response = requests.post(f"{leader.url}/topics", json={"topic": topic, "numPartitions": PARTITIONS}, timeout=10)
    assert response.status_code == 201, response.text
    wait_until(lambda: len(fleet.online_by_worker(leader, topic)) == PARTITIONS, 60, "all partitions ONLINE")

    producer = AckedProducer(stack, topic)
    producer.start()
    wait_until(lambda: ledger.destination_count() >= RATE_PER_S, 30, "records flowing to the destination")
    phases: list[Phase] = []

    def source_total() -> int:
        return sum(ledger.end_offsets(ledger.src).values())

    def recover(phase: Phase) -> None:
        """Every partition ONLINE on its ideal worker; the destination holds what the source held."""
        phase.repaired = time.monotonic()
        # A broker restarted a moment ago may answer "not leader" for a while: ask until it knows.
        target = wait_until(source_total, RECOVERY_TIMEOUT_S, "the source's log-end offsets")

        def recovered() -> bool:
            current = _leader(controllers)
            return (
                current is not None
                and len(fleet.online_by_worker(current, topic)) == PARTITIONS
                and ledger.destination_count() >= target
            )

        wait_until(recovered, RECOVERY_TIMEOUT_S, f"recovery after: {phase.name}", interval=0.5)
        phase.recovered = time.monotonic()

    def kill_server(server: devstack.Server, down_s: float, name: str) -> None:
        phase = Phase(name, started=time.monotonic(), dst_ends=ledger.end_offsets(ledger.dst))
        phases.append(phase)
        pid = processes.pid_of(server)
        assert pid is not None, f"{server.name} is not running"
        os.kill(pid, signal.SIGKILL)
        time.sleep(down_s)  # the outage itself, not a wait for logic
        processes.up(stack, deadline_s=180)
        recover(phase)

    try:
        kill_server(stack.dst, DST_DOWN_S, "kill -9 destination broker, down 15 s")
        kill_server(stack.zookeeper, ZK_DOWN_S, f"kill -9 ZooKeeper, down {ZK_DOWN_S:.0f} s")

        victim = _busiest_worker(fleet, controllers, topic, workers)
        phase = Phase(
            f"SIGSTOP worker {victim.name} for {WORKER_STOPPED_S:.0f} s",
            started=time.monotonic(),
            dst_ends=ledger.end_offsets(ledger.dst),
        )
        phases.append(phase)
        victim.signal(signal.SIGSTOP)
        try:
            time.sleep(WORKER_STOPPED_S)  # the outage itself
        finally:
            victim.signal(signal.SIGCONT)
        recover(phase)

        kill_server(stack.src, SRC_DOWN_S, "kill -9 source broker, down 10 s")
        phases.append(Phase("after the faults", dst_ends=ledger.end_offsets(ledger.dst)))
    finally:
        producer.stop()

    # Everything copied: every partition's committed offset at the log end.
    leader = fleet.wait_for_leader(*controllers)

    def caught_up() -> bool:
        offsets = requests.get(f"{leader.url}/offset/{topic}", timeout=5).json()["offsets"]
        return len(offsets) == PARTITIONS and all(o["lag"] == 0 for o in offsets)

    wait_until(caught_up, RECOVERY_TIMEOUT_S, "every committed offset at the log end")

    dead = [f"{p.name}:\n{p.log_tail()}" for p in fleet.processes if not p.alive()]
    assert not dead, "ferry processes died:\n" + "\n".join(dead)
    assert len(fleet.online_by_worker(leader, topic)) == PARTITIONS
    validation = requests.get(f"{leader.url}/validation", timeout=10).json()
    assert validation["ok"] is True, validation

    report = _check_destination(ledger, producer, phases)
    elapsed = time.monotonic() - began
    print(
        f"\nchaos: {report['records']} source records, {len(producer.acked)} acknowledged, "
        f"{report['duplicates']} duplicates at the destination, {elapsed:.0f} s in all"
    )
    for phase in phases[:-1]:
        print(
            f"  {phase.name}: repaired after {phase.repaired - phase.started:.1f} s, "
            f"recovered {phase.recovered - phase.repaired:.1f} s later, "
            f"{report['by_phase'].get(phase.name, 0)} duplicates written during it"
        )
    if report["by_phase"].get("before the faults"):
        print(f"  before the faults: {report['by_phase']['before the faults']} duplicates")
    if report["by_phase"].get("after the faults"):
        print(f"  after the faults: {report['by_phase']['after the faults']} duplicates")
    assert report["duplicates"] == 0, f"an exactly-once route wrote duplicates: {dict(report['by_phase'])}"


def _leader(controllers: list[FerryProcess]) -> FerryProcess | None:
    for controller in controllers:
        if controller.alive() and requests.get(f"{controller.url}/health", timeout=2).json().get("leader"):
            return controller
    return None


def _busiest_worker(
    fleet: Fleet, controllers: list[FerryProcess], topic: str, workers: list[FerryProcess]
) -> FerryProcess:
    owners = Counter(fleet.online_by_worker(fleet.wait_for_leader(*controllers), topic).values())
    name = owners.most_common(1)[0][0]
    return next(w for w in workers if w.name == name)


def _check_destination(ledger: RecordLedger, producer: AckedProducer, phases: list[Phase]) -> dict[str, Any]:
    """Acknowledged records all at the destination, in their partition, in source order; duplicates.

    A duplicate counts for the phase during which its second copy was written (its destination
    offset against each phase's starting log-end offsets), not by when its record was produced:
    a worker lagging behind the stream copies, during one fault, records produced before the
    previous one recovered (the paused worker's writes were once counted for the ZooKeeper outage).
    """
    assert not producer.failed, (
        f"the source refused {len(producer.failed)} records: {list(producer.failed.items())[:3]}"
    )
    source = ledger.read(ledger.src)
    destination = ledger.read(ledger.dst)
    duplicates_by_phase: Counter[str] = Counter()
    duplicates = 0
    for partition in range(PARTITIONS):
        src_seqs = [_seq(record) for record in source.get(partition, [])]
        dst_seqs: list[int] = []
        seen: set[int] = set()
        for offset, record in enumerate(destination.get(partition, [])):  # a new topic: offsets from 0
            seq = _seq(record)
            if seq in seen:
                duplicates += 1
                written_in = [phase.name for phase in phases if phase.dst_ends.get(partition, 0) <= offset]
                duplicates_by_phase[written_in[-1] if written_in else "before the faults"] += 1
                continue
            seen.add(seq)
            dst_seqs.append(seq)
        acked_here = {seq for seq, p in producer.acked.items() if p == partition}
        missing = acked_here - seen
        assert not missing, (
            f"partition {partition}: {len(missing)} acknowledged records missing, e.g. {sorted(missing)[:5]}"
        )
        assert acked_here <= set(src_seqs), f"partition {partition}: acknowledged records missing at the source"
        assert dst_seqs == src_seqs, f"partition {partition}: destination order differs from the source"
        # The same records, not only the same numbers: key, value, headers and timestamp.
        assert set(destination.get(partition, [])) == set(source.get(partition, [])), (
            f"partition {partition}: records differ"
        )
    return {"records": sum(len(r) for r in source.values()), "duplicates": duplicates, "by_phase": duplicates_by_phase}


def _seq(record: tuple[Any, ...]) -> int:
    return int(dict(record[2])[HEADER_SEQ])
