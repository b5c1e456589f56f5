"""Disaster-recovery drills with Kafka's own Java clients, run with docs/runbook.md's commands.

One pair of clusters of its own (``fosrc`` -> ``fodst``, and the reverse route for the failback),
shared by the module: the unplanned drills kill ``fosrc``'s broker with -9, which the shared stack's
clusters must never see. Each test has its own ZooKeeper root (its own Ferry) and its own topic
(one partition, so a record's offset says where it is, except the lagging-mirror drill's four)
and consumer group.

The routes write exactly once (the default: no ``delivery_guarantee`` key), so each destination
partition's offsets also hold transaction markers (and a killed writer's aborted copies): records
there are counted by reading them read_committed (:mod:`tests.harness.read_committed`), never from
log-end offsets, and the Java consumers read with ``isolation.level=read_committed``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from ferry.common.core import provenance
from ferry.common.core.offset_map import CHECKPOINT_TOPIC
from ferry.common.errors import DevStackError
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import committed_offset, create_topics, end_offsets
from tests.harness import java_clients, read_committed
from tests.harness.mirroring import warm_group_coordinator
from tests.harness.processes import FerryProcess, Fleet, wait_until

SRC, DST = "fosrc", "fodst"
FORWARD, REVERSE = f"{SRC}.{DST}", f"{DST}.{SRC}"
# Far from the other extra clusters' ports (and from test_least_privilege's 31092/31102).
PORTS = {SRC: 31292, DST: 31302}


@pytest.fixture(scope="module")
def pair(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """Clusters fosrc and fodst; stopped again if this module started them."""
    saved = {}
    for name, port in PORTS.items():
        env = "FERRY_DEV_PORT_" + name.upper()
        saved[env] = os.environ.get(env)
        os.environ[env] = saved[env] or str(port)
    stack = local_stack.with_clusters([SRC, DST])
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"clusters {SRC} and {DST} do not start: {exc}", pytrace=False)
    for name in (SRC, DST):
        warm_group_coordinator(stack, name)
    yield stack
    processes.up(stack, deadline_s=300)  # a drill that failed half way may have left fosrc down
    if started:
        processes.down(stack, names=started)
        devstack.forget_extra(started)
    for env, value in saved.items():
        if value is None:
            os.environ.pop(env, None)


def _bootstrap(stack: devstack.Stack, name: str) -> str:
    return stack.bootstrap(name)


def _configure(
    fleet: Fleet,
    pair: devstack.Stack,
    topic: str,
    group: str,
    partitions: int = 1,
    max_records_per_s: float | None = None,
    checkpoint_interval_s: float = 1,
    delivery_guarantee: str | None = None,
) -> None:
    """Routes both ways for ``topic`` and ``group``, with ``delivery_guarantee`` (None: no key, the default,
    exactly once); ``max_records_per_s``: the forward route's throttle."""
    common: dict[str, Any] = {"include": [topic], "groups": [group], "loop_prevention": True}
    if delivery_guarantee is not None:
        common["delivery_guarantee"] = delivery_guarantee
    forward = {"source": SRC, "destination": DST, **common}
    if max_records_per_s is not None:
        forward["max_records_per_s"] = max_records_per_s
    fleet.extra = {
        "clusters": {name: {"bootstrap.servers": pair.bootstrap(name)} for name in (SRC, DST)},
        "routes": [
            forward,
            {"source": DST, "destination": SRC, **common},
        ],
        "controller": {
            "checkpoint_interval_s": checkpoint_interval_s,
            "lag_interval_s": 1,
            "observer_interval_s": 1,
        },
    }
    fleet.write_config()
    create_topics(AdminClient({"bootstrap.servers": pair.bootstrap(SRC)}), [NewTopic(topic, partitions, 1)])


def _ferry(fleet: Fleet, *args: str, ok: bool = True) -> Any:
    """A runbook command, as a script runs it (stdin not a terminal); its JSON report (``ok``), or the
    failed run (not ``ok``)."""
    answer = _ferry_with_stderr(fleet, *args, ok=ok)
    return answer[0] if ok else answer


def _ferry_with_stderr(fleet: Fleet, *args: str, ok: bool = True) -> Any:
    """:func:`_ferry`'s JSON report and what the command printed on stderr (``ok``), or the failed run."""
    done = subprocess.run(
        [sys.executable, "-m", "ferry.cli", *args, "--config", str(fleet.config_path)],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    if not ok:
        assert done.returncode != 0, done.stdout[-2000:]
        return done
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), done.stderr


def _end(pair: devstack.Stack, cluster: str, topic: str) -> int:
    """The log-end offset of the topic's partition 0: its record count only where no transaction writes."""
    return end_offsets(AdminClient({"bootstrap.servers": pair.bootstrap(cluster)}), topic).get(0, 0)


def _count(pair: devstack.Stack, cluster: str, topic: str) -> int:
    """The records of the topic's partition 0 a read_committed reader gets (markers and aborted copies
    take offsets too)."""
    return read_committed.count({"bootstrap.servers": pair.bootstrap(cluster)}, topic)


def _read_all(pair: devstack.Stack, cluster: str, topic: str) -> list[str]:
    """Every value of the topic's partition, in offset order (a group of its own, from the start)."""
    count = _count(pair, cluster, topic)
    if count == 0:
        return []
    return [
        value
        for _, value in java_clients.consume(pair.bootstrap(cluster), f"check-{os.urandom(4).hex()}", topic, count)
    ]


def _copy_offsets(pair: devstack.Stack, topic: str) -> dict[int, int]:
    """Source offset -> destination offset of its newest copy, on the topic's partition 0 (one partition:
    the copies in source order, with the route's transaction markers between them)."""
    return {source: destination for destination, source in sorted(_copies(pair, topic).get(0, []))}


def _values(prefix: int, count: int, start: int = 0) -> list[str]:
    return [f"{prefix}.{n}" for n in range(start, start + count)]


def test_planned_switchover_moves_producer_and_group_with_every_record_read_once(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("planned"), f"app-{topic_name('g')[-12:]}"
    _configure(fleet, pair, topic, group)
    produced = [v for _, v in java_clients.produce(pair.bootstrap(SRC), topic, 300, 1)]
    controller, _ = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    wait_until(lambda: _count(pair, DST, topic) >= 300, 120, "300 records on the destination")
    read_src = java_clients.consume(pair.bootstrap(SRC), group, topic, 200)

    report = _ferry(fleet, "failover", "--route", FORWARD, "--planned", "--groups", group, "--quiet-s", "2")
    assert report["state"] == "FAILED_OVER"
    assert [(p["sourceEnd"], p["committed"], p["lag"]) for p in report["report"]["partitions"]] == [(300, 300, 0)]
    (synced,) = report["report"]["groups"]
    copies = _copy_offsets(pair, topic)
    assert sorted(copies) == list(range(300))
    after_read = copies[199] + 1  # right after the copy of the last record the group read
    assert [(p["sourceOffset"], p["destinationOffset"], p["lag"]) for p in synced["partitions"]] == [
        (200, after_read, 100)
    ]
    assert committed_offset({"bootstrap.servers": pair.bootstrap(DST)}, group, topic) == after_read
    routes = {r["route"]: r["state"] for r in requests.get(f"{controller.url}/routes", timeout=5).json()["routes"]}
    assert routes[FORWARD] == "FAILED_OVER"
    assert requests.get(f"{controller.url}/validation", timeout=5).json()["failover"] == {FORWARD: "FAILED_OVER"}
    metrics = requests.get(f"{controller.url}/metrics", timeout=5).text
    assert f'ferry_controller_route_failover_state{{route="{FORWARD}",state="FAILED_OVER"}} 1.0' in metrics
    shown = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "zk", "get", f"failover/{FORWARD}", "--config", str(fleet.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0 and "FAILED_OVER" in shown.stdout, shown.stderr
    wait_until(
        lambda: (
            not any(t["route"] == FORWARD for t in requests.get(f"{controller.url}/topics", timeout=5).json()["topics"])
        ),
        30,
        "the leader to stop copying the failed-over route",
    )
    again = _ferry(fleet, "failover", "--route", FORWARD, "--planned", ok=False)
    assert "already FAILED_OVER" in again.stderr
    assert (
        requests.post(f"{controller.url}/routes/{FORWARD}/failover", json={"planned": True}, timeout=30).status_code
        == 409
    )

    produced += [v for _, v in java_clients.produce(pair.bootstrap(DST), topic, 100, 2)]
    read_dst = java_clients.consume(pair.bootstrap(DST), group, topic, 200)
    assert [o for o, _ in read_dst[:100]] == [copies[s] for s in range(200, 300)]  # from the translated position
    read = [v for _, v in read_src] + [v for _, v in read_dst]
    assert read == produced  # every record once, in order, across both clusters


def test_a_planned_switchover_of_an_exactly_once_route_gives_read_committed_java_consumers_every_record_once(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    """An exactly-once route whose first worker is killed with -9 between two batches: the destination's
    offsets hold transaction markers (and the killed writer's aborted tail, if any), so they are not the
    source's. Kafka's Java consumer with ``isolation.level=read_committed`` reads, from the group's
    translated offset, exactly the records the group had not read on the source."""
    topic, group = topic_name("eosplanned"), f"app-{topic_name('g')[-12:]}"
    _configure(fleet, pair, topic, group)
    produced = [v for _, v in java_clients.produce(pair.bootstrap(SRC), topic, 300, 1)]
    controller, worker = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    wait_until(lambda: _count(pair, DST, topic) >= 300, 120, "300 records committed on the destination")
    worker.signal(signal.SIGKILL)
    fleet.start_worker("w2")
    produced += [v for _, v in java_clients.produce(pair.bootstrap(SRC), topic, 300, 2)]
    read_src = java_clients.consume(pair.bootstrap(SRC), group, topic, 500)

    report = _ferry(fleet, "failover", "--route", FORWARD, "--planned", "--groups", group, "--quiet-s", "2")
    assert report["state"] == "FAILED_OVER"
    assert [(p["sourceEnd"], p["committed"], p["lag"]) for p in report["report"]["partitions"]] == [(600, 600, 0)]
    (synced,) = report["report"]["groups"]
    ((source_offset, destination_offset, lag),) = [
        (p["sourceOffset"], p["destinationOffset"], p["lag"]) for p in synced["partitions"]
    ]
    assert (source_offset, lag) == (500, 100)
    copies = _copy_offsets(pair, topic)
    assert sorted(copies) == list(range(600))
    assert destination_offset == copies[499] + 1 > 500, synced  # the markers before it took offsets of their own
    assert committed_offset({"bootstrap.servers": pair.bootstrap(DST)}, group, topic) == destination_offset

    produced += [v for _, v in java_clients.produce(pair.bootstrap(DST), topic, 100, 3)]
    read_dst = java_clients.consume(pair.bootstrap(DST), group, topic, 200)
    assert [v for _, v in read_src] + [v for _, v in read_dst] == produced  # every record once, in order
    whole = java_clients.consume(pair.bootstrap(DST), f"check-{os.urandom(4).hex()}", topic, 700)
    assert [v for _, v in whole] == produced  # the destination holds each copy once


def _source_end_seen(fleet: Fleet, pair: devstack.Stack, topic: str) -> int | None:
    client = KazooClient(hosts=pair.zookeeper.address)
    client.start(timeout=10)
    try:
        data, _ = client.get(f"{fleet.zk_root}/source_ends/{FORWARD}")
        end: int | None = json.loads(data)["ends"].get(f"{topic}/0")
        return end
    except Exception:
        return None
    finally:
        client.stop()
        client.close()


def test_unplanned_failover_reports_the_rpo_and_failback_brings_back_only_what_the_destination_got(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("unplanned"), f"app-{topic_name('g')[-12:]}"
    src_conf, dst_conf = {"bootstrap.servers": pair.bootstrap(SRC)}, {"bootstrap.servers": pair.bootstrap(DST)}
    _configure(fleet, pair, topic, group)
    java_clients.produce(pair.bootstrap(SRC), topic, 300, 1)
    controller, worker = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    wait_until(lambda: _count(pair, DST, topic) >= 300, 120, "300 records on the destination")
    read_src = java_clients.consume(pair.bootstrap(SRC), group, topic, 200)
    after_read = _copy_offsets(pair, topic)[199] + 1  # right after the copy of the last record the group read
    wait_until(
        lambda: committed_offset(dst_conf, group, topic) == after_read, 60, "the checkpoint job to sync the group"
    )

    # The worker dies, the source takes 50 more records that never reach the destination, then dies too.
    worker.signal(signal.SIGKILL)
    java_clients.produce(pair.bootstrap(SRC), topic, 50, 3)
    wait_until(lambda: _source_end_seen(fleet, pair, topic) == 350, 60, "the leader to see the source's log end")
    never_copied = 350 - _count(pair, DST, topic)
    pid = processes.pid_of(pair.cluster(SRC))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)

    report, said = _ferry_with_stderr(fleet, "failover", "--route", FORWARD, "--yes")
    assert report["state"] == "FAILED_OVER"
    (rpo,) = report["report"]["rpo"]
    assert (rpo["sourceEnd"], rpo["copied"], rpo["notCopied"]) == (350, 300, never_copied) == (350, 300, 50)
    # Nothing was produced after the leader's last look: the upper estimate only adds the last rate's worth.
    assert rpo["notCopiedUpperEstimate"] >= rpo["notCopied"] and rpo["produceRate"] is not None, rpo
    assert report["report"]["notCopied"] == 50 and report["report"]["rpoNote"] is None
    upper = report["report"]["notCopiedUpperEstimate"]
    assert f"route {FORWARD}: RPO: between 50 and about {upper} records not copied" in said, said
    assert committed_offset(dst_conf, group, topic) == after_read

    # Producer and group continue on the destination, from the group's translated position.
    java_clients.produce(pair.bootstrap(DST), topic, 80, 4)
    read_dst = java_clients.consume(pair.bootstrap(DST), group, topic, 180)
    assert [v for _, v in read_src + read_dst] == _values(1, 300) + _values(4, 80)  # nothing read twice or skipped

    # Failback: the old source is back; only what the destination got since goes back, once.
    processes.up(pair, deadline_s=300)
    fleet.start_worker("w2")
    back = _ferry(fleet, "failback", "--route", FORWARD)
    assert back["state"] == "FAILING_BACK"
    assert [r["notCopied"] for r in back["failback"]["rpoKeptAtSource"]] == [50]
    wait_until(lambda: _count(pair, SRC, topic) >= 430, 60, "the records written on the destination at the source")
    assert _read_all(pair, SRC, topic) == _values(1, 300) + _values(3, 50) + _values(4, 80)

    # Switch back, restore the original direction; the group continues on the source exactly.
    switched = _ferry(fleet, "failover", "--route", REVERSE, "--planned", "--groups", group, "--quiet-s", "2")
    assert switched["state"] == "FAILED_OVER"
    # The reverse route wrote its copies at the source in transactions: the group goes on right after
    # the copy of the last record it read on the destination.
    copied_back = _copies(pair, topic, cluster=SRC, origin=DST).get(0, [])
    assert len(copied_back) == len({origin for _, origin in copied_back}) == 80, copied_back  # each once
    assert committed_offset(src_conf, group, topic) == max(offset for offset, _ in copied_back) + 1
    restored = _ferry(fleet, "failback", "--route", FORWARD, "--restore")
    assert restored["state"] == "ACTIVE"
    java_clients.produce(pair.bootstrap(SRC), topic, 40, 5)
    assert [v for _, v in java_clients.consume(pair.bootstrap(SRC), group, topic, 40)] == _values(5, 40)
    wait_until(lambda: _count(pair, DST, topic) >= 420, 60, "the restored route to copy the new records")
    assert _read_all(pair, DST, topic) == _values(1, 300) + _values(4, 80) + _values(
        5, 40
    )  # the RPO records stay at the source


def test_a_group_ahead_of_the_mirror_is_checkpointed_at_the_copys_end_and_skips_nothing_after_failover(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("ahead"), f"app-{topic_name('g')[-12:]}"
    dst_conf = {"bootstrap.servers": pair.bootstrap(DST)}
    _configure(fleet, pair, topic, group)
    java_clients.produce(pair.bootstrap(SRC), topic, 300, 1)
    controller, worker = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    src_conf = {"bootstrap.servers": pair.bootstrap(SRC)}
    # The route commits only what its offset map describes: then the map covers all 300 copies.
    wait_until(lambda: committed_offset(src_conf, f"ferry.{FORWARD}", topic) == 300, 120, "the route's commit of 300")

    # The mirror stops at 300; the group, never checkpointed before, reads on at the source past the copy.
    worker.signal(signal.SIGKILL)
    java_clients.produce(pair.bootstrap(SRC), topic, 50, 3)
    read_src = java_clients.consume(pair.bootstrap(SRC), group, topic, 330)
    assert [o for o, _ in read_src] == list(range(330))
    copies = _copy_offsets(pair, topic)
    assert sorted(copies) == list(range(300))
    copy_end = copies[299] + 1  # right after the newest copy, before its transaction's marker
    wait_until(
        lambda: committed_offset(dst_conf, group, topic) == copy_end, 60, "the group checkpointed at the copy's end"
    )
    # The route back reports the group too once it is checkpointed on the destination: read the forward row.
    rows = requests.get(f"{controller.url}/groups/{group}", timeout=10).json()["groups"][0]["partitions"]
    (row,) = [r for r in rows if r["route"] == FORWARD]
    assert (row["sourceOffset"], row["destinationOffset"], row["method"]) == (330, copy_end, "ahead")

    report = _ferry(fleet, "failover", "--route", FORWARD, "--groups", group, "--yes")
    assert report["state"] == "FAILED_OVER"
    assert committed_offset(dst_conf, group, topic) == copy_end

    # On the destination the group goes on with the next record written there: nothing skipped.
    java_clients.produce(pair.bootstrap(DST), topic, 20, 4)
    assert [v for _, v in java_clients.consume(pair.bootstrap(DST), group, topic, 20)] == _values(4, 20)


def _read_to_end(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` now, in (partition, offset) order (assign()-only: no group, no commits)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{os.urandom(4).hex()}", "enable.auto.commit": False}
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        tps = [TopicPartition(topic, p) for p in metadata.partitions]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in tps}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        out: list[Any] = []

        def at_end() -> bool:
            out.extend(m for m in consumer.consume(1000, 0.5) if m.error() is None)
            return all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in consumer.position(tps))

        wait_until(at_end, 60, f"{topic} read to its end")
        return sorted(out, key=lambda m: (m.partition(), m.offset()))
    finally:
        consumer.close()


def _last_checkpoints(pair: devstack.Stack, group: str, topic: str) -> dict[int, dict[str, Any]]:
    """Per partition of ``topic``, the group's last checkpoint written on the destination by the forward
    route (the ``__ferry_checkpoints`` record an unplanned failover commits)."""
    last = {}
    for message in _read_to_end(pair.bootstrap(DST), CHECKPOINT_TOPIC):
        row = json.loads(message.value() or b"null")
        if row and (row["route"], row["group"], row["topic"]) == (FORWARD, group, topic):
            last[int(row["partition"])] = row
    return last


def _copies(
    pair: devstack.Stack, topic: str, cluster: str = DST, origin: str = SRC
) -> dict[int, list[tuple[int, int]]]:
    """Per partition of ``topic`` on ``cluster``, (offset there, source offset) of each record copied
    there from ``origin``, from its provenance header (read read_committed: the committed copies)."""
    out: dict[int, list[tuple[int, int]]] = {}
    # An exactly-once route's header says no source offset: the source record with the same content does.
    contents: dict[int, dict[tuple[Any, Any, int], int]] | None = None
    for message in _read_to_end(pair.bootstrap(cluster), topic):
        found = provenance.read(message.headers())
        if found is None or found.source != origin:
            continue
        source_offset = found.source_offset
        if source_offset is None:
            if contents is None:
                by_partition: dict[int, list[Any]] = {}
                for record in _read_to_end(pair.bootstrap(origin), topic):
                    by_partition.setdefault(record.partition(), []).append(record)
                contents = {p: read_committed.source_offsets_by_content(r) for p, r in by_partition.items()}
            source_offset = contents[message.partition()][read_committed.content(message)]
        out.setdefault(message.partition(), []).append((message.offset(), source_offset))
    return out


def _produce_steadily(
    bootstrap: str, topic: str, partitions: list[int], per_partition_per_s: int
) -> Callable[[], None]:
    """Writes ``per_partition_per_s`` records a second to each of ``partitions`` until the returned
    function is called (records not delivered by then are dropped: the cluster may be dead)."""
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 10_000})

    def run() -> None:
        n = 0
        while not stop.wait(1 / per_partition_per_s):  # paces the writes
            for partition in partitions:
                producer.produce(topic, f"{partition}.{n}".encode(), partition=partition)
            producer.poll(0)
            n += 1

    writer = threading.Thread(target=run, daemon=True)
    writer.start()

    def halt() -> None:
        if not stop.is_set():
            stop.set()
            writer.join(10)
            producer.purge()
            producer.flush(0)

    return halt


def _group_ahead_of_the_lagging_mirror(controller: FerryProcess, group: str, lead: int) -> bool:
    """The leader's last checkpoints of ``group``: ahead of the mirror by at least ``lead`` records on
    partitions 0 and 1, exact (at the mirror's end) on partitions 2 and 3."""
    answer = requests.get(f"{controller.url}/groups/{group}", timeout=10)
    if answer.status_code != 200:
        return False  # not checkpointed yet
    rows = {row["partition"]: row for row in answer.json()["groups"][0]["partitions"]}
    if sorted(rows) != [0, 1, 2, 3]:
        return False
    ahead = all(
        rows[p]["method"] == "ahead" and rows[p]["sourceOffset"] - rows[p]["destinationOffset"] >= lead for p in (0, 1)
    )
    return ahead and all(rows[p]["method"] == "exact" for p in (2, 3))


def test_an_unplanned_failover_with_a_lagging_mirror_commits_every_partition_and_rereads_only_the_last_interval(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("lagging"), f"app-{topic_name('g')[-12:]}"
    src_conf = {"bootstrap.servers": pair.bootstrap(SRC)}
    # A backlog of 300 records on each partition, copied with the throttle lifted, which the group reads
    # whole: a group put back far behind its checkpoint would re-read hundreds of them.
    # Then the route's throttle, 10 records a second: the producer writes 50 a second to each of
    # partitions 0 and 1, so the mirror falls further behind there while the group reads at the source's
    # head; on partitions 2 and 3 nothing more comes, and the group stays at the mirror's end.
    # At least once: an exactly-once worker commits its source offsets without waiting for the source,
    # so after the source dies it copies on, for about 10 s, records it had fetched and the group had
    # already read; the failover translates from the last checkpoint before that, and the group re-reads
    # them. Translating again once the route stopped would close that (not done yet).
    _configure(
        fleet,
        pair,
        topic,
        group,
        partitions=4,
        max_records_per_s=10,
        checkpoint_interval_s=2,
        delivery_guarantee="at_least_once",
    )
    backlog = Producer(src_conf)
    for partition in range(4):
        for n in range(300):
            backlog.produce(topic, f"{partition}.b{n}".encode(), partition=partition)
    assert backlog.flush(30) == 0
    del backlog  # no reconnecting to the source once it is killed
    controller, _ = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    throttle = f"{controller.url}/routes/{FORWARD}/throttle"
    assert requests.put(throttle, json={"max_records_per_s": 100_000}, timeout=10).status_code == 200
    dst_conf = {"bootstrap.servers": pair.bootstrap(DST)}
    wait_until(lambda: sorted(read_committed.counts(dst_conf, topic).values()) == [300] * 4, 120, "the backlog copied")
    assert requests.put(throttle, json={}, timeout=10).status_code == 200  # back to the config's throttle

    stop_producing = _produce_steadily(pair.bootstrap(SRC), topic, [0, 1], per_partition_per_s=50)
    try:
        with java_clients.start_member(pair.bootstrap(SRC), group, topic) as member:
            wait_until(
                lambda: _group_ahead_of_the_lagging_mirror(controller, group, lead=50),
                90,
                "the group checkpointed ahead of the lagging mirror",
            )
            pid = processes.pid_of(pair.cluster(SRC))
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            member.kill()  # what it printed is all it read; it never reads again from this cluster
        stop_producing()

        report = _ferry(fleet, "failover", "--route", FORWARD, "--groups", group, "--yes")
        assert report["state"] == "FAILED_OVER"
        rpo_rows = {r["partition"]: r for r in report["report"]["rpo"]}

        # Every partition of the group has a committed offset on the destination: the last checkpoint's.
        committed = {p: offset for (t, p), offset in _committed_groups(pair, DST)[group].items() if t == topic}
        checkpoints = _last_checkpoints(pair, group, topic)
        assert sorted(p for p, offset in committed.items() if offset >= 0) == [0, 1, 2, 3], committed
        assert {p: row["destinationOffset"] for p, row in checkpoints.items()} == committed

        # What the group re-reads on the destination, per partition. ``read_end``: one past the highest
        # source offset it read before the outage. From its committed offset on, it re-reads every copy
        # of a record it had read (source offset below ``read_end``); the records it read that never
        # reached the destination are the RPO's, lost to it rather than re-read, and counted apart.
        # The last checkpoint before the outage holds the group's committed source offset at that pass
        # (``sourceOffset``): what it read below that offset the checkpoint covers, so what it read in
        # the last checkpoint interval is ``read_end - sourceOffset``, the bound. Where the group was
        # exact, it re-reads exactly those of them that were copied. Where it was ahead of the mirror, the
        # checkpoint holds the copy's end instead, and the group re-reads only what the mirror copied
        # after the map the checkpoint saw: records it read while ahead, fewer than it read in the same
        # time because the throttled mirror copies slower than the group reads. The outage comes as soon
        # as the leader's checkpoints show the lead, moments after a checkpoint: the shortest interval.
        copies, read_end = _copies(pair, topic), member.read_end()
        reported = {r["partition"]: r["notCopied"] for r in report["report"]["rpo"]}  # from the source ends last seen
        rows = {}
        for partition in range(4):
            last, at, end = checkpoints[partition], committed[partition], read_end.get(partition, 0)
            copied = copies.get(partition, [])
            rows[partition] = {
                "method": last["method"],
                "checkpoint": (last["sourceOffset"], last["destinationOffset"]),
                "readEnd": end,
                "reread": sum(1 for d, s in copied if d >= at and s < end),
                "readInLastInterval": end - last["sourceOffset"],
                "readSinceLastCheckpointWritten": end - member.read_end(before=last["at"] / 1000).get(partition, 0),
                "lostToRpo": end - sum(1 for _, s in copied if s < end),
                "rpoReported": reported.get(partition),
                "skipped": sum(1 for d, s in copied if d < at and s >= end),
            }
        shown = "\n".join(f"partition {p}: {row}" for p, row in rows.items())
        assert [rows[p]["method"] for p in range(4)] == ["ahead", "ahead", "exact", "exact"], shown
        assert all(r["lostToRpo"] > 0 for r in (rows[0], rows[1])), shown  # the mirror lagged: the RPO is real
        assert all(r["skipped"] == 0 for r in rows.values()), shown
        assert all(r["reread"] <= r["readInLastInterval"] for r in rows.values()), shown

        # The RPO's range against what is really missing, counted on the source once it is back: the
        # producer wrote until the kill, after the leader's last look, so the lower bound falls short
        # on partitions 0 and 1; the upper estimate adds the last rate until the report, after the kill.
        processes.up(pair, deadline_s=300)
        source_ends = end_offsets(AdminClient(src_conf), topic)
        missing = {p: source_ends[p] - rpo_rows[p]["copied"] for p in range(4)}
        ranges = "\n".join(
            f"partition {p}: missing {missing[p]}, reported between {rpo_rows[p]['notCopied']} and about "
            f"{rpo_rows[p]['notCopiedUpperEstimate']} ({rpo_rows[p]['produceRate']} records/s)"
            for p in range(4)
        )
        assert all(rpo_rows[p]["notCopied"] <= missing[p] for p in range(4)), ranges
        assert all(missing[p] <= rpo_rows[p]["notCopiedUpperEstimate"] for p in range(4)), ranges
        assert [missing[p] - rpo_rows[p]["notCopied"] for p in (2, 3)] == [0, 0], ranges  # nothing produced there
    finally:
        stop_producing()
        processes.up(pair, deadline_s=300)  # the later drills of this module need fosrc


def _zookeeper_tree(pair: devstack.Stack, root: str) -> dict[str, tuple[bytes, int]]:
    """Every node under ``root``: its data and version."""
    client = KazooClient(hosts=pair.zookeeper.address)
    client.start(timeout=10)
    try:
        nodes: dict[str, tuple[bytes, int]] = {}
        todo = [root]
        while todo:
            path = todo.pop()
            data, stat = client.get(path)
            nodes[path] = (data, stat.version)
            todo += [f"{path}/{child}" for child in client.get_children(path)]
        return nodes
    finally:
        client.stop()
        client.close()


def _committed_groups(pair: devstack.Stack, cluster: str) -> dict[str, dict[tuple[str, int], int]]:
    """Every consumer group of ``cluster`` with its committed offsets."""
    admin = AdminClient({"bootstrap.servers": pair.bootstrap(cluster)})
    listed = admin.list_consumer_groups(request_timeout=10).result(10)
    assert not listed.errors, listed.errors
    out = {}
    for listing in listed.valid:
        group = listing.group_id
        answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
        out[group] = {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or []}
    return out


def test_a_dry_run_and_an_unconfirmed_unplanned_failover_change_nothing(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("dryrun"), f"app-{topic_name('g')[-12:]}"
    src_conf, dst_conf = {"bootstrap.servers": pair.bootstrap(SRC)}, {"bootstrap.servers": pair.bootstrap(DST)}
    _configure(fleet, pair, topic, group)
    java_clients.produce(pair.bootstrap(SRC), topic, 300, 1)
    controller, worker = fleet.start_controller("c1"), fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    wait_until(lambda: committed_offset(src_conf, f"ferry.{FORWARD}", topic) == 300, 120, "the route's commit of 300")
    java_clients.consume(pair.bootstrap(SRC), group, topic, 200)
    after_read = _copy_offsets(pair, topic)[199] + 1  # right after the copy of the last record the group read
    wait_until(
        lambda: committed_offset(dst_conf, group, topic) == after_read, 60, "the checkpoint job to sync the group"
    )

    # The route stops at 300 of 350 records; then Ferry stops altogether, so nothing else writes its tree.
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    java_clients.produce(pair.bootstrap(SRC), topic, 50, 3)
    wait_until(lambda: _source_end_seen(fleet, pair, topic) == 350, 60, "the leader to see the source's log end")
    controller.signal(signal.SIGTERM)
    assert controller.wait(60) == 0
    before = _zookeeper_tree(pair, fleet.zk_root), _committed_groups(pair, DST)

    unplanned = _ferry(fleet, "failover", "--route", FORWARD, "--dry-run")
    planned = _ferry(fleet, "failover", "--route", FORWARD, "--planned", "--dry-run")
    refused = _ferry(fleet, "failover", "--route", FORWARD, ok=False)

    assert (_zookeeper_tree(pair, fleet.zk_root), _committed_groups(pair, DST)) == before
    assert refused.returncode == 2
    assert [line for line in refused.stderr.splitlines() if line.startswith("ferry")] == [
        "ferry: the unplanned failover needs --yes when not run on a terminal"
    ]
    assert (unplanned["dryRun"], unplanned["state"], unplanned["partitions"]) == (True, "ACTIVE", {topic: 1})
    assert unplanned["phases"] == ["REQUESTED", "SYNCING", "FAILED_OVER"]
    (rpo,) = unplanned["plan"]["rpo"]
    assert (rpo["sourceEnd"], rpo["copied"], rpo["notCopied"]) == (350, 300, 50)
    assert unplanned["plan"]["notCopiedUpperEstimate"] >= unplanned["plan"]["notCopied"] == 50
    (synced,) = unplanned["plan"]["groups"]
    assert synced["group"] == group
    assert [(p["topic"], p["destinationOffset"], p["committed"]) for p in synced["partitions"]] == [
        (topic, after_read, after_read)
    ]
    assert planned["phases"] == ["REQUESTED", "DRAINING", "SYNCING", "FAILED_OVER"]
    assert [(p["sourceEnd"], p["committed"], p["lag"]) for p in planned["plan"]["partitions"]] == [(350, 300, 50)]
    (translated,) = planned["plan"]["groups"]
    assert [(p["sourceOffset"], p["destinationOffset"], p["method"]) for p in translated["partitions"]] == [
        (200, after_read, "exact")
    ]


def test_a_failover_whose_leader_dies_halfway_completes_when_retried(
    fleet: Fleet,
    pair: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic, group = topic_name("retried"), f"app-{topic_name('g')[-12:]}"
    _configure(fleet, pair, topic, group)
    java_clients.produce(pair.bootstrap(SRC), topic, 100, 1)
    first, second = fleet.start_controller("c1"), fleet.start_controller("c2")
    fleet.start_worker("w1")
    leader = fleet.wait_for_leader(first, second)
    standby = second if leader is first else first
    wait_until(lambda: _count(pair, DST, topic) >= 100, 120, "100 records on the destination")

    stop = threading.Event()
    producer = Producer({"bootstrap.servers": pair.bootstrap(SRC)})

    def keep_producing() -> None:  # the source is not quiet: the failover waits in DRAINING
        while not stop.wait(0.05):
            producer.produce(topic, b"x")
            producer.poll(0)
        producer.flush(10)

    writer = threading.Thread(target=keep_producing, daemon=True)
    writer.start()
    # Through the standby: it forwards the write to the leader, which runs the failover.
    request = threading.Thread(
        target=lambda: requests.post(
            f"{standby.url}/routes/{FORWARD}/failover", json={"planned": True, "quietS": 2, "timeoutS": 60}, timeout=90
        ),
        daemon=True,
    )
    request.start()
    wait_until(
        lambda: requests.get(f"{standby.url}/routes/{FORWARD}", timeout=5).json()["state"] == "DRAINING",
        30,
        "the failover to drain",
    )
    leader.signal(signal.SIGKILL)
    stop.set()
    writer.join(15)
    total = _end(pair, SRC, topic)  # no transaction writes the source here: its log end is its record count

    fleet.wait_for_leader(standby, timeout=60)
    answer = requests.post(
        f"{standby.url}/routes/{FORWARD}/failover", json={"planned": True, "quietS": 2, "timeoutS": 120}, timeout=180
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["state"] == "FAILED_OVER"
    assert [(p["sourceEnd"], p["committed"], p["lag"]) for p in body["report"]["partitions"]] == [(total, total, 0)]
    assert _count(pair, DST, topic) == total  # every record once
    conflict = requests.post(f"{standby.url}/routes/{FORWARD}/failover", json={"planned": True}, timeout=30)
    assert conflict.status_code == 409 and "FAILED_OVER" in conflict.json()["error"]


def test_the_runbook_commands_have_help() -> None:
    for command in ("failover", "failback"):
        done = subprocess.run(
            [sys.executable, "-m", "ferry.cli", command, "--help"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "--route" in done.stdout, done.stderr
