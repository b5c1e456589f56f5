"""The real Controller in-process, against the local stack's ZooKeeper and Kafka.

Each controller and each fake worker gets its own KazooClient on this test's chroot, so the
config's ``zookeeper.root`` is ``/``. Fake workers only register (``workers/live/<id>``) and, where
a test says so, write a status; they copy nothing, so no handoff ever waits on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from ferry.common.config import FerryConfig, parse_config, start_position
from ferry.common.model import (
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
    decode,
)
from ferry.common.zk.layout import ZkLayout
from ferry.controller.api.rest import create_app
from ferry.controller.api.rest_json import deleted_json, health_json, topic_json, topics_json
from ferry.controller.errors import BadRequest, Conflict, NotFound, NotLeader
from ferry.controller.lead.store import Op
from ferry.controller.service import LEADING, Controller
from ferry.controller.topics.spec import TopicSpec
from ferry.devstack.stack import Stack
from ferry.devstack.support import poll_until

ROUTE = "src.dst"
SESSION_TIMEOUT_S = 4.0
LAYOUT = ZkLayout("/")


def wait_for(condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
    return poll_until(condition, timeout_s, what, interval=0.05)


def connect(hosts: str, **kwargs: Any) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT_S, **kwargs)
    client.start(timeout=15)
    return client


def close(client: KazooClient) -> None:
    client.stop()
    client.close()


class Cluster:
    """Starts controllers and fake workers on one chroot and stops them all at the end."""

    def __init__(self, chroot: str, stack: Stack) -> None:
        self.chroot = chroot
        self.stack = stack
        self.controllers: list[Controller] = []
        self.clients: list[KazooClient] = []
        self.admin = connect(chroot)
        self.clients.append(self.admin)

    def config(self, failover_delay_s: float = 1.5, naming: str = "identity") -> FerryConfig:
        return parse_config(
            {
                "zookeeper": {"connect": self.chroot, "root": "/", "session_timeout_s": SESSION_TIMEOUT_S},
                "clusters": {name: {"bootstrap.servers": self.stack.bootstrap(name)} for name in ("src", "dst")},
                "routes": [{"source": "src", "destination": "dst", "naming": naming}],
                # Rebalance is tested in the planner; here it must not move anything by itself.
                "controller": {"failover_delay_s": failover_delay_s, "rebalance_delay_s": 600},
            }
        )

    def controller(
        self, controller_id: str, failover_delay_s: float = 1.5, naming: str = "identity"
    ) -> tuple[Controller, KazooClient]:
        zk = connect(self.chroot)
        self.clients.append(zk)
        controller = Controller(
            config=self.config(failover_delay_s, naming),
            controller_id=controller_id,
            rest_url=f"http://{controller_id}.invalid:9000",
            zk=zk,
        )
        self.controllers.append(controller)
        controller.start()
        return controller, zk

    def leader(self, controller_id: str = "c1", failover_delay_s: float = 1.5, naming: str = "identity") -> Controller:
        controller, _ = self.controller(controller_id, failover_delay_s, naming)
        wait_for(controller.leadership.is_leader, 15, f"{controller_id} to lead")
        return controller

    def worker(self, worker_id: str) -> KazooClient:
        zk = connect(self.chroot)
        self.clients.append(zk)
        zk.create(LAYOUT.live_worker(worker_id), WorkerInfo(worker_id, "host", 1).to_bytes(), ephemeral=True)
        return zk

    def ideal(self, topic: str) -> IdealState | None:
        got = self.admin.exists(LAYOUT.topic(ROUTE, topic))
        return IdealState.from_bytes(self.admin.get(LAYOUT.topic(ROUTE, topic))[0]) if got else None

    def assignment(self, worker_id: str) -> WorkerAssignment | None:
        if not self.admin.exists(LAYOUT.assignment(worker_id)):
            return None
        return WorkerAssignment.from_bytes(self.admin.get(LAYOUT.assignment(worker_id))[0])

    def stop(self) -> None:
        for controller in self.controllers:
            controller.stop()
        for client in self.clients:
            close(client)


@pytest.fixture
def cluster(zk_chroot: str, local_stack: Stack) -> Iterator[Cluster]:
    running = Cluster(zk_chroot, local_stack)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def source_topic(create_topic: Callable[..., None], topic_name: Callable[[str], str]) -> Callable[[int], str]:
    """Creates a topic with ``n`` partitions on the source cluster; returns its name."""

    def make(partitions: int) -> str:
        name = topic_name("ctl")
        create_topic("src", name, partitions)
        return name

    return make


def keys(topic: str, partitions: range | list[int]) -> frozenset[PartitionKey]:
    return frozenset(PartitionKey(ROUTE, topic, p) for p in partitions)


def test_a_single_controller_leads_and_publishes_the_leader_node(cluster: Cluster) -> None:
    controller = cluster.leader("c1")
    assert controller.leadership.state == LEADING
    assert decode(cluster.admin.get(LAYOUT.leader)[0]) == {"id": "c1", "rest_url": "http://c1.invalid:9000"}
    assert controller.leadership.leader() == {"id": "c1", "rest_url": "http://c1.invalid:9000"}
    read = controller.reads.health()
    health = health_json(read, read.readiness())
    assert health["leader"] is True and health["leaderId"] == "c1" and health["status"] == "ok"
    for path in LAYOUT.persistent_paths():
        assert cluster.admin.exists(path), path


def test_topic_requests_are_checked_against_the_source_and_the_ideal_state(
    cluster: Cluster, source_topic: Callable[[int], str], topic_name: Callable[[str], str]
) -> None:
    controller = cluster.leader()
    with pytest.raises(NotFound, match="does not exist on the source"):
        controller.topics.add_topic(TopicSpec(topic_name("missing")))
    with pytest.raises(BadRequest, match="internal topic"):
        controller.topics.add_topic(TopicSpec("__consumer_offsets"))
    topic = source_topic(4)
    with pytest.raises(BadRequest, match="listed twice"):
        controller.topics.add_topics([TopicSpec(topic), TopicSpec(topic, 2)])
    with pytest.raises(BadRequest, match="exceeds"):
        controller.topics.add_topic(TopicSpec(topic, 5))
    with pytest.raises(BadRequest, match="unknown route"):
        controller.topics.add_topic(TopicSpec(topic), route="dst.src")
    assert cluster.ideal(topic) is None  # nothing above wrote anything

    view = topic_json(controller.topics.add_topic(TopicSpec(topic, 3)))
    assert view["topic"] == topic and view["partitions"] == 3
    with pytest.raises(Conflict):
        controller.topics.add_topic(TopicSpec(topic))
    with pytest.raises(BadRequest, match="shrink"):
        controller.topics.expand_topic(topic, 2)
    with pytest.raises(BadRequest, match="exceeds"):
        controller.topics.expand_topic(topic, 5)
    with pytest.raises(NotFound):
        controller.topics.expand_topic(topic_name("unknown"), 2)
    with pytest.raises(NotFound):
        controller.topics.delete_topic(topic_name("unknown"))
    assert topics_json(controller.reads.list_topics()) == {
        "topics": [{"topic": topic, "route": ROUTE, "partitions": 3}]
    }

    assert deleted_json(controller.topics.delete_topic(topic)) == {"topic": topic, "deleted": True}
    assert cluster.ideal(topic) is None
    with pytest.raises(NotFound):
        controller.reads.topic_view(topic)


def test_a_topic_added_with_a_start_keeps_it_for_the_workers_until_it_is_deleted(
    cluster: Cluster, create_topic: Callable[..., None], topic_name: Callable[[str], str]
) -> None:
    controller = cluster.leader()
    topic, other = topic_name("one"), topic_name("other")
    for name in (topic, other):
        create_topic("src", name, 2)
    controller.topics.add_topic(TopicSpec(topic, start=start_position("2026-01-31T12:00:00Z")))
    assert decode(cluster.admin.get(LAYOUT.topic_start(ROUTE, topic))[0]) == {"start": 1769860800000}
    controller.topics.add_topics([TopicSpec(other, start="latest")])
    assert decode(cluster.admin.get(LAYOUT.topic_start(ROUTE, other))[0]) == {"start": "latest"}

    controller.topics.delete_topic(topic)
    assert not cluster.admin.exists(LAYOUT.topic_start(ROUTE, topic)), "the start goes with the topic"
    controller.topics.add_topic(TopicSpec(topic))  # added again without one: the route's start applies
    assert not cluster.admin.exists(LAYOUT.topic_start(ROUTE, topic))


def test_partitions_wait_for_a_worker_then_all_go_to_it(cluster: Cluster, source_topic: Callable[[int], str]) -> None:
    controller = cluster.leader()
    topic = source_topic(6)
    controller.topics.add_topic(TopicSpec(topic, 4))
    ideal = cluster.ideal(topic)
    assert ideal is not None and ideal.partitions == 4 and ideal.assignment == {}
    assert cluster.admin.get_children(LAYOUT.assignments) == []

    cluster.worker("w1")
    first = wait_for(lambda: cluster.assignment("w1"), 10, "w1's assignment")
    assert first.partitions == keys(topic, range(4))
    assert first.generation >= 1
    assert cluster.ideal(topic) == IdealState(ROUTE, topic, 4, dict.fromkeys(range(4), "w1"))

    controller.topics.expand_topic(topic, 6)  # reconciles at once
    second = cluster.assignment("w1")
    assert second is not None and second.partitions == keys(topic, range(6))
    assert second.generation > first.generation
    assert decode(cluster.admin.get(LAYOUT.generation)[0]) == second.generation

    controller.topics.delete_topic(topic)
    third = cluster.assignment("w1")
    assert third is not None and third.partitions == frozenset()
    assert third.generation > second.generation


def test_a_bulk_post_does_not_wait_behind_a_reconcile_and_its_topics_get_assigned(
    cluster: Cluster, create_topic: Callable[..., None], topic_name: Callable[[str], str]
) -> None:
    controller = cluster.leader()
    cluster.worker("w1")
    first, *bulk = (topic_name(f"bulk{i}") for i in range(4))
    for name in (first, *bulk):
        create_topic("src", name, 2)
    controller.topics.add_topic(TopicSpec(first, 2))  # the leader has its leader state now
    wait_for(lambda: cluster.assignment("w1"), 10, "w1's assignment")
    # One metadata request for the whole list; a missing topic or a count over the source's still
    # refuses the whole request, and nothing is written.
    with pytest.raises(NotFound, match="does not exist"):
        controller.topics.add_topics([TopicSpec(bulk[0]), TopicSpec(topic_name("absent"))])
    with pytest.raises(BadRequest, match="exceeds"):
        controller.topics.add_topics([TopicSpec(bulk[0]), TopicSpec(bulk[1], 3)])
    assert all(cluster.ideal(t) is None for t in bulk)
    reconciler = controller.reconciler
    with reconciler.lock:  # a long reconcile, as it were: the bulk POST does not wait for it
        created = controller.topics.add_topics([TopicSpec(t, 2) for t in bulk])
        assert [s.topic for s in created] == bulk
        assert all(cluster.ideal(t) == IdealState(ROUTE, t, 2) for t in bulk)  # written, not yet assigned
        listed = {t["topic"] for t in topics_json(controller.reads.list_topics())["topics"]}
        assert listed == {first, *bulk}  # reads show them at once
        with pytest.raises(Conflict):
            controller.topics.add_topics([TopicSpec(bulk[0], 2)])
    wanted = keys(first, range(2)).union(*(keys(t, range(2)) for t in bulk))
    wait_for(
        lambda: (a := cluster.assignment("w1")) is not None and a.partitions == wanted, 10, "the bulk topics assigned"
    )
    with pytest.raises(Conflict):
        controller.topics.add_topic(TopicSpec(bulk[1]))
    controller.topics.delete_topic(bulk[2])  # the leader state has it: it can be deleted
    assert cluster.ideal(bulk[2]) is None


def test_exactly_one_of_two_controllers_leads_and_a_fenced_out_leader_cannot_write(
    cluster: Cluster, source_topic: Callable[[int], str]
) -> None:
    a, a_zk = cluster.controller("a")
    b, b_zk = cluster.controller("b")
    wait_for(lambda: a.leadership.is_leader() or b.leadership.is_leader(), 15, "a leader")
    # Both contend (two election nodes), so the other one is blocked behind the leader's node.
    wait_for(lambda: len(cluster.admin.get_children(LAYOUT.election)) == 2, 10, "two contenders")
    assert [a.leadership.is_leader(), b.leadership.is_leader()].count(True) == 1
    old, old_zk, new = (a, a_zk, b) if a.leadership.is_leader() else (b, b_zk, a)
    assert decode(cluster.admin.get(LAYOUT.leader)[0])["id"] == old.controller_id
    old_fence = old.leadership.fence
    assert old_fence is not None and cluster.admin.exists(old_fence)
    with pytest.raises(NotLeader):
        new.topics.add_topic(TopicSpec("orders"))  # a standby refuses writes (the REST layer forwards them)

    cluster.worker("w1")
    topic = source_topic(2)
    old.topics.add_topic(TopicSpec(topic))
    assigned = wait_for(lambda: cluster.assignment("w1"), 5, "w1's assignment")
    assert assigned.partitions == keys(topic, range(2))

    # Expire the leader's session: a second client on the same session closes it.
    twin = KazooClient(hosts=cluster.chroot, client_id=old_zk.client_id, timeout=SESSION_TIMEOUT_S)
    twin.start(timeout=15)
    twin.stop()
    twin.close()

    wait_for(new.leadership.is_leader, SESSION_TIMEOUT_S + 5, f"{new.controller_id} to take over")
    wait_for(lambda: not old.leadership.is_leader(), SESSION_TIMEOUT_S + 5, f"{old.controller_id} to step down")
    wait_for(
        lambda: (decode(cluster.admin.get(LAYOUT.leader)[0]) or {}).get("id") == new.controller_id,
        5,
        "the leader node to name the new leader",
    )
    assert not cluster.admin.exists(old_fence)

    # kazoo opens a new session for the old leader's client; its old election node stays gone.
    wait_for(lambda: old_zk.connected, SESSION_TIMEOUT_S + 5, "the old leader's client to reconnect")
    with pytest.raises(NotLeader):
        old.store.commit(old_fence, [Op("create", "/fenced-write", b"x")])
    assert not cluster.admin.exists("/fenced-write")
    with pytest.raises(NotLeader):
        old.reconciler.reconcile()
    assert new.leadership.fence is not None
    new.store.commit(new.leadership.fence, [Op("create", "/allowed-write", b"x")])
    assert cluster.admin.exists("/allowed-write")

    # The new leader takes the state over as it is: nothing moves, no new generation.
    assert new.reconciler.reconcile().moved == 0
    assert cluster.ideal(topic) == IdealState(ROUTE, topic, 2, {0: "w1", 1: "w1"})
    assert cluster.assignment("w1") == assigned


def test_a_leader_whose_root_is_deleted_under_it_gives_the_lead_up_and_leads_again_on_new_folders(
    cluster: Cluster, source_topic: Callable[[int], str]
) -> None:
    leader = cluster.leader("c1")
    old_fence = leader.leadership.fence
    for child in cluster.admin.get_children("/"):
        if child != "zookeeper":
            cluster.admin.delete(f"/{child}", recursive=True)

    def leads_again() -> bool:
        fence = leader.leadership.fence
        return leader.leadership.is_leader() and fence != old_fence and cluster.admin.exists(fence) is not None

    wait_for(leads_again, 15, "c1 to lead again under a new election node")
    for path in LAYOUT.persistent_paths():
        assert cluster.admin.exists(path), path
    assert cluster.admin.exists(LAYOUT.layout_marker)
    wait_for(lambda: cluster.admin.exists(LAYOUT.leader), 5, "the leader node again")
    assert decode(cluster.admin.get(LAYOUT.leader)[0])["id"] == "c1"
    # Its watches follow the new folders: a worker that registers gets the topic it must copy.
    topic = source_topic(2)
    leader.topics.add_topic(TopicSpec(topic))
    cluster.worker("w1")
    assigned = wait_for(lambda: cluster.assignment("w1"), 10, "w1's assignment")
    assert assigned.partitions == keys(topic, range(2))


def test_a_state_read_while_its_lead_ended_is_dropped_and_the_next_lead_reads_its_own(
    cluster: Cluster, source_topic: Callable[[int], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    leader = cluster.leader("c1")
    reconciler = leader.reconciler
    wait_for(reconciler.has_state, 10, "the first reconcile")
    first_fence, first_epoch = leader.leadership.fence, leader.leadership.epoch
    assert first_fence is not None
    read_snapshot = reconciler.store.snapshot
    reads: list[int] = []  # the epoch of each read of the whole state

    def snapshot_while_the_lead_changes(read_views: bool = True) -> Any:
        reads.append(leader.leadership.epoch)
        if len(reads) == 1:
            # The lead ends under this read, and the next lead begins (its first reconcile waits behind this one).
            cluster.admin.delete(first_fence)
            wait_for(
                lambda: leader.leadership.is_leader() and leader.leadership.epoch > first_epoch + 1,
                15,
                "c1 to lead again",
            )
        return read_snapshot(read_views=read_views)

    monkeypatch.setattr(reconciler.store, "snapshot", snapshot_while_the_lead_changes)
    reconciler.drop_state()
    reconciler.request_reconcile()
    wait_for(lambda: len(reads) == 2 and reconciler.has_state(), 15, "the new lead to read the state again")
    # The run of the ended lead kept nothing it read, and did not end the new lead either.
    assert reads == [first_epoch, first_epoch + 2]
    assert leader.leadership.is_leader() and leader.leadership.epoch == first_epoch + 2
    topic = source_topic(2)
    leader.topics.add_topic(TopicSpec(topic))
    cluster.worker("w1")
    assigned = wait_for(lambda: cluster.assignment("w1"), 10, "w1's assignment")
    assert assigned.partitions == keys(topic, range(2))


def test_a_vanished_workers_partitions_move_after_the_failover_delay(
    cluster: Cluster, source_topic: Callable[[int], str]
) -> None:
    delay = 1.5
    controller = cluster.leader(failover_delay_s=delay)
    cluster.worker("w1")
    w2 = cluster.worker("w2")
    wait_for(lambda: set(controller.store.live_workers()) == {"w1", "w2"}, 5, "both workers live")
    topic = source_topic(4)
    controller.topics.add_topic(TopicSpec(topic))
    ideal = cluster.ideal(topic)
    assert ideal is not None
    held_by_w2 = sorted(p for p, w in ideal.assignment.items() if w == "w2")
    assert len(held_by_w2) == 2

    close(w2)  # its live node vanishes with its session
    gone_at = time.monotonic()
    seen_retained = False

    def moved() -> bool:
        nonlocal seen_retained
        state = cluster.ideal(topic)
        assert state is not None
        if any(state.assignment[p] == "w2" for p in held_by_w2):
            seen_retained = True
            return False
        return True

    wait_for(moved, delay + 8, "w2's partitions to move")
    took = time.monotonic() - gone_at
    assert seen_retained
    assert took >= delay - 0.1, f"moved after {took:.2f}s, before the {delay}s failover delay"
    assert cluster.ideal(topic) == IdealState(ROUTE, topic, 4, dict.fromkeys(range(4), "w1"))
    w1 = wait_for(lambda: cluster.assignment("w1"), 5, "w1's assignment")
    assert w1.partitions == keys(topic, range(4))
    # w2 is told to copy nothing (its node goes on a later reconciliation).
    w2_assignment = cluster.assignment("w2")
    assert w2_assignment is None or w2_assignment.partitions == frozenset()


def test_a_new_leader_fences_a_worker_it_finds_granted_but_not_live_before_its_partitions_move(
    cluster: Cluster, source_topic: Callable[[int], str], caplog: pytest.LogCaptureFixture
) -> None:
    """c1 grants w2 two partitions; w2 never reports them and its session ends while no controller leads.
    c2 leads without any memory of c1's grants and moves them at its first plan (no failover delay): it
    rebuilds the grants from the assignment nodes, so before w2's partitions go to w1 (an exactly-once
    route, the default) it fences w2's writer."""
    delay = 1.5
    first = cluster.leader("c1", failover_delay_s=delay)
    cluster.worker("w1")
    w2 = cluster.worker("w2")
    wait_for(lambda: set(first.store.live_workers()) == {"w1", "w2"}, 5, "both workers live")
    topic = source_topic(4)
    first.topics.add_topic(TopicSpec(topic))
    granted = wait_for(lambda: (a := cluster.assignment("w2")) and a.partitions and a, 5, "w2's grant")
    first.stop()
    close(w2)  # gone before any leader saw it report what it was granted
    caplog.set_level("INFO", logger="ferry.controller.lead.fencing")
    second = cluster.leader("c2", failover_delay_s=0)
    wait_for(
        lambda: (a := cluster.assignment("w1")) is not None and a.partitions == keys(topic, range(4)),
        delay + 10,
        "w2's partitions to move to w1",
    )
    assert second.leadership.is_leader()
    assert any("fenced worker w2's writer of route src.dst" in r.getMessage() for r in caplog.records), (
        f"w2 (granted {sorted(granted.partitions)}) was not fenced before its partitions moved"
    )


def test_a_leaving_worker_loses_its_partitions_at_once(cluster: Cluster, source_topic: Callable[[int], str]) -> None:
    delay = 60.0  # long: a move now cannot be the failover
    controller = cluster.leader(failover_delay_s=delay)
    cluster.worker("w1")
    w2 = cluster.worker("w2")
    wait_for(lambda: set(controller.store.live_workers()) == {"w1", "w2"}, 5, "both workers live")
    topic = source_topic(4)
    controller.topics.add_topic(TopicSpec(topic))
    ideal = cluster.ideal(topic)
    assert ideal is not None
    held_by_w2 = [PartitionKey(ROUTE, topic, p) for p, w in ideal.assignment.items() if w == "w2"]
    assert len(held_by_w2) == 2

    leaving = WorkerStatus(1, {p: PartitionStatus(PartitionState.OFFLINE) for p in held_by_w2}, leaving=True)
    w2.create(LAYOUT.worker_state("w2"), leaving.to_bytes(), ephemeral=True)

    wait_for(
        lambda: cluster.ideal(topic) == IdealState(ROUTE, topic, 4, dict.fromkeys(range(4), "w1")),
        5,
        "w2's partitions to move to w1",
    )
    w1 = wait_for(
        lambda: (a := cluster.assignment("w1")) and a.partitions == keys(topic, range(4)) and a,
        5,
        "w1 to be assigned everything",
    )
    w2_assignment = cluster.assignment("w2")
    assert w2_assignment is not None and w2_assignment.partitions == frozenset()
    assert w2_assignment.generation <= w1.generation
    assert "w2" not in controller.reconciler.departed_at


def test_a_status_change_wakes_the_leader_once_however_often_membership_changed(cluster: Cluster) -> None:
    # Regression: every children event of workers/state added one more DataWatch per worker,
    # so after N membership changes one status write triggered N+1 callbacks.
    controller, controller_zk = cluster.controller("c1")
    wait_for(controller.leadership.is_leader, 15, "c1 to lead")
    steady = cluster.worker("steady")
    steady.create(LAYOUT.worker_state("steady"), WorkerStatus(0).to_bytes(), ephemeral=True)

    # A barrier on the controller's own ZooKeeper client: kazoo runs every watch callback of a
    # client on one thread in ZooKeeper's order, so once the sentinel's change is seen, every
    # callback of the changes written before it has run.
    sentinel = "/watch-sentinel"
    cluster.admin.create(sentinel, b"0")
    seen: list[bytes] = []
    controller_zk.DataWatch(sentinel, lambda data, stat: seen.append(data))

    def barrier(mark: bytes) -> None:
        cluster.admin.set(sentinel, mark)
        wait_for(lambda: mark in seen, 10, f"the sentinel's change {mark!r}")

    churn = cluster.worker("churn")
    for i in range(4):
        churn.create(LAYOUT.worker_state("churn"), WorkerStatus(0).to_bytes(), ephemeral=True)
        barrier(f"join-{i}".encode())
        churn.delete(LAYOUT.worker_state("churn"))
        barrier(f"leave-{i}".encode())

    wakeups: list[str] = []
    controller.reconciler.request_reconcile = lambda: wakeups.append("reconcile")  # type: ignore[method-assign]
    steady.set(LAYOUT.worker_state("steady"), WorkerStatus(1).to_bytes())
    barrier(b"after-status-change")
    assert wakeups == ["reconcile"], f"one status change woke the leader {len(wakeups)} times"


@pytest.mark.parametrize(("naming", "renamed"), [("identity", "{topic}"), ("prod-{topic}", "prod-{topic}")])
def test_offsets_name_the_destination_topic_next_to_the_source_topic(
    cluster: Cluster, source_topic: Callable[[int], str], naming: str, renamed: str
) -> None:
    # /offset, /offset/<t> and /offset/<t>/<p> show where a renaming route copies to.
    controller = cluster.leader(naming=naming)
    topic = source_topic(2)
    controller.topics.add_topic(TopicSpec(topic, 2))
    client = create_app(controller).test_client()
    destination = renamed.format(topic=topic)
    for path, partitions in ((f"/offset/{topic}", [0, 1]), (f"/offset/{topic}/1", [1]), ("/offset", [0, 1])):
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.get_json())
        rows = [row for row in answer.get_json()["offsets"] if row["topic"] == topic]
        assert [row["partitionId"] for row in rows] == partitions, path
        assert {(row["route"], row["topic"], row["destinationTopic"]) for row in rows} == {(ROUTE, topic, destination)}


def test_a_controller_is_not_ready_while_zookeeper_is_unreachable_and_stays_live(cluster: Cluster) -> None:
    controller, zk = cluster.controller("c1")
    wait_for(controller.leadership.is_leader, 15, "c1 to lead")
    client = create_app(controller).test_client()
    for path in ("/health", "/health/ready", "/health/live"):
        answer = client.get(path)
        assert answer.status_code == 200 and answer.get_json()["reasons"] == [], (path, answer.get_json())
    # Its own ZooKeeper client stopped (the shared ZooKeeper keeps running): ZooKeeper is gone for it.
    zk.stop()
    wait_for(lambda: client.get("/health/ready").status_code == 503, 10, "c1 to answer 503 to /health/ready")
    for path in ("/health", "/health/ready"):
        answer = client.get(path)
        assert answer.status_code == 503, path
        body = answer.get_json()
        assert body["status"] == "zookeeper unreachable" and body["reasons"] == ["zookeeper unreachable"], body
        assert body["id"] == "c1"
    # A restart would not bring ZooKeeper back: still live (its scheduler runs).
    live = client.get("/health/live")
    assert live.status_code == 200 and live.get_json()["status"] == "ok", live.get_json()


def test_a_controller_answers_its_probes_at_once_while_zookeeper_does_not_answer() -> None:
    # Its client keeps trying a closed port (kazoo's CONNECTING): a read of ZooKeeper would wait
    # until it connects, so the probes must not read it. No shared server is involved.
    zk = KazooClient(hosts="127.0.0.1:1", timeout=SESSION_TIMEOUT_S)
    zk.start_async()
    config = parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:1", "root": "/"},
            "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
            "routes": [{"source": "src", "destination": "dst"}],
        }
    )
    controller = Controller(config=config, controller_id="c1", rest_url="http://c1.invalid:9000", zk=zk)
    controller.scheduler.start()
    try:
        client = create_app(controller).test_client()
        started = time.monotonic()
        ready = client.get("/health/ready")
        assert ready.status_code == 503 and ready.get_json()["reasons"] == ["zookeeper unreachable"]
        assert ready.get_json()["leaderId"] is None
        live = client.get("/health/live")
        assert live.status_code == 200 and live.get_json()["reasons"] == []
        assert time.monotonic() - started < 2
    finally:
        controller.scheduler.shutdown(wait=False)
        close(zk)
