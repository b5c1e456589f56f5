"""Multi-cluster topologies on real clusters: active-active, a mesh, Axual's trees, the refused loop.

One controller and one worker serve every route of a topology (the consolidated fleet). The
clusters are the stack's ``src`` and ``dst`` plus ``c``, ``d`` and ``e``, started once per
session (small heaps) by the ``clusters`` fixture and only for this module. Each test produces a
few dozen numbered records on every cluster of its topology, waits until every route's
committed offsets reach the end of its source topic (so nothing more will be copied), and then
reads every cluster: each record must be there exactly once, never twice, never back home.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from ferry.common.config import parse_config
from ferry.common.core import provenance, tree
from ferry.common.errors import DevStackError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from tests.harness import read_committed
from tests.harness.mirroring import warm_group_coordinator
from tests.harness.processes import Fleet, wait_until

pytestmark = pytest.mark.e2e

EXTRA = ("c", "d", "e")
PER_CLUSTER = 40
SEQ = "seq"


@pytest.fixture(scope="session")
def clusters(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The local stack with ``c``, ``d``, ``e`` as well; those this test run started stop at its end."""
    stack = local_stack.with_clusters(EXTRA)
    try:
        started = processes.up(stack, deadline_s=300)
    except DevStackError as exc:
        pytest.fail(f"the extra clusters do not start: {exc}", pytrace=False)
    for name in ("src", "dst", *EXTRA):
        warm_group_coordinator(stack, name)
    yield stack
    extra_started = [name for name in started if name in EXTRA]
    if extra_started:
        processes.down(stack, names=extra_started)


def _conf(stack: devstack.Stack, name: str) -> dict[str, str]:
    return {"bootstrap.servers": stack.bootstrap(name)}


class Topology:
    """A fleet over some clusters, and the records produced on each."""

    def __init__(self, stack: devstack.Stack, fleet: Fleet, names: list[str], topic: str) -> None:
        self.stack, self.fleet, self.names, self.topic = stack, fleet, names, topic
        self.produced: dict[str, list[str]] = {}

    def start(self, routes: list[dict[str, Any]] | None = None, tree_: dict[str, Any] | None = None) -> None:
        extra: dict[str, Any] = {
            "clusters": {name: _conf(self.stack, name) for name in self.names},
            "routes": routes or [],
            "controller": {**self.fleet.config()["controller"], "observer_interval_s": 1.0, "lag_interval_s": 1.0},
        }
        if tree_ is not None:
            extra["tree"] = tree_
        if "heartbeats" in self.fleet.extra:
            extra["heartbeats"] = self.fleet.extra["heartbeats"]
        self.fleet.extra = extra
        self.fleet.write_config()
        self.config = parse_config(self.fleet.config())
        controller = self.fleet.start_controller("controller")
        self.fleet.start_worker("worker")
        self.controller = self.fleet.wait_for_leader(controller, timeout=60)
        self.fleet.wait_for_workers(self.controller, {"worker"}, timeout=60)

    def create(self, name: str, topic: str | None = None) -> None:
        admin = kafka_clients.admin(_conf(self.stack, name))
        topic = topic or self.topic
        create_topics(admin, [NewTopic(topic, 1, 1)])

    def produce(self, count: int = PER_CLUSTER) -> None:
        for name in self.names:
            producer = kafka_clients.producer(_conf(self.stack, name))
            seqs = [f"{name}-{i}" for i in range(count)]
            for seq in seqs:
                producer.produce(self.topic, value=seq.encode(), headers=[(SEQ, seq.encode()), ("app", b"kept")])
            assert producer.flush(30) == 0
            self.produced.setdefault(name, []).extend(seqs)

    def read(self, name: str, topic: str | None = None) -> list[tuple[str, provenance.Provenance | None, list[Any]]]:
        """(seq, provenance, application headers) of every record of ``topic`` on cluster ``name``."""
        topic = topic or self.topic
        records = []
        # To the end by position: routes write exactly once by default, and their markers take offsets.
        for partition_records in read_committed.read(_conf(self.stack, name), topic).values():
            for m in partition_records:
                others, _ = provenance.split(m.headers())
                seq = dict(others)[SEQ]
                assert seq is not None
                records.append((seq.decode(), provenance.read(m.headers()), others))
        return records

    def settled(self) -> bool:
        """Every route has committed up to the end of its source topic: nothing more will be copied."""
        for route in self.config.routes:
            source = _conf(self.stack, route.source)
            consumer = kafka_clients.consumer(source, group_id=route.group_id)
            try:
                topics = [t for t in self._mirrored_on(route.source) if route.wants(t)]
                if not topics:
                    return False
                for topic in topics:
                    # Past the source's last record: a copy topic ends with a transaction marker.
                    last = [m.offset() for m in read_committed.read(source, topic).get(0, [])[-1:]]
                    committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
                    if last and committed < last[0] + 1:
                        return False
            finally:
                consumer.close()
        return True

    def _mirrored_on(self, name: str) -> list[str]:
        admin = kafka_clients.admin(_conf(self.stack, name))
        return [t for t in admin.list_topics(timeout=10).topics if self.topic in t]

    def wait_settled(self, expected_per_cluster: int, timeout: float = 90) -> None:
        def done() -> bool:
            counts = {name: len(self.read(name)) for name in self.names}
            return all(n >= expected_per_cluster for n in counts.values()) and self.settled()

        wait_until(
            done,
            timeout,
            f"{expected_per_cluster} records on each of {self.names} and every route settled",
            interval=1.0,
        )

    def assert_each_record_once_everywhere(self) -> dict[str, Counter[str]]:
        everything = [seq for seqs in self.produced.values() for seq in seqs]
        found = {}
        for name in self.names:
            records = self.read(name)
            counts = Counter(seq for seq, _, _ in records)
            assert counts == Counter(everything), (
                f"{name}: missing {sorted(set(everything) - set(counts))[:5]}, "
                f"twice or more {[s for s, n in counts.items() if n > 1][:5]}"
            )
            for seq, prov, others in records:
                assert others == [(SEQ, seq.encode()), ("app", b"kept")]  # application headers untouched
                home = seq.rsplit("-", 1)[0]
                assert (prov is None) == (home == name), f"{seq} on {name}: provenance {prov}"
                if prov is not None:
                    assert prov.origin == home and name not in prov.path
            found[name] = counts
        return found


@pytest.fixture
def topology(
    clusters: devstack.Stack, fleet: Fleet, topic_name: Callable[[str], str]
) -> Callable[[list[str]], Topology]:
    return lambda names: Topology(clusters, fleet, names, topic_name("mc"))


def test_active_active_with_identity_naming(topology: Callable[[list[str]], Topology]) -> None:
    top = topology(["src", "dst"])
    for name in top.names:
        top.create(name)
    top.start(
        routes=[
            {"source": "src", "destination": "dst", "include": [top.topic], "loop_prevention": True},
            {"source": "dst", "destination": "src", "include": [top.topic], "loop_prevention": True},
        ]
    )
    top.produce()
    top.wait_settled(2 * PER_CLUSTER)
    top.produce(10)  # a second round after the routes are running
    top.wait_settled(2 * (PER_CLUSTER + 10))
    top.assert_each_record_once_everywhere()


def test_active_active_with_prefix_naming(topology: Callable[[list[str]], Topology]) -> None:
    top = topology(["src", "dst"])
    for name in top.names:
        top.create(name)
    include = [rf"(src\.|dst\.)*{top.topic}"]  # would match src.dst.t too: the prefix rule must refuse it
    top.start(
        routes=[
            {"source": "src", "destination": "dst", "include": include, "naming": "prefix"},
            {"source": "dst", "destination": "src", "include": include, "naming": "prefix"},
        ]
    )
    top.produce()

    def copies_arrived() -> bool:
        return (
            len(top.read("dst", f"src.{top.topic}")) >= PER_CLUSTER
            and len(top.read("src", f"dst.{top.topic}")) >= PER_CLUSTER
        )

    wait_until(copies_arrived, 120, "src.t on dst and dst.t on src", interval=1.0)
    wait_until(top.settled, 60, "every route settled", interval=1.0)
    assert Counter(s for s, _, _ in top.read("dst", f"src.{top.topic}")) == Counter(top.produced["src"])
    assert Counter(s for s, _, _ in top.read("src", f"dst.{top.topic}")) == Counter(top.produced["dst"])
    for name in top.names:
        assert Counter(s for s, _, _ in top.read(name)) == Counter(top.produced[name])  # nothing came back
        topics = kafka_clients.admin(_conf(top.stack, name)).list_topics(timeout=10).topics
        assert not [t for t in topics if t.startswith(("src.dst.", "dst.src.", "src.src.", "dst.dst."))], sorted(topics)


def test_three_cluster_full_mesh_with_identity_naming(topology: Callable[[list[str]], Topology]) -> None:
    top = topology(["src", "dst", "c"])
    for name in top.names:
        top.create(name)
    top.start(
        routes=[
            {"source": s, "destination": d, "include": [top.topic], "loop_prevention": True}
            for s in top.names
            for d in top.names
            if s != d
        ]
    )
    top.produce()
    top.wait_settled(3 * PER_CLUSTER)
    top.assert_each_record_once_everywhere()


def test_axuals_four_cluster_tree_with_its_copy_flags(topology: Callable[[list[str]], Topology]) -> None:
    top = topology(["src", "dst", "c", "d"])
    for name in top.names:
        top.create(name)
    top.start(tree_={"layout": "3(1(src,dst),1(c,d))", "include": [top.topic]})
    top.produce()
    top.wait_settled(4 * PER_CLUSTER)
    top.assert_each_record_once_everywhere()
    flags = {
        name: {tree.format_flags(p.flags) for seq, p, _ in top.read(name) if p is not None and seq.startswith("src-")}
        for name in ("dst", "c", "d")
    }
    assert flags == {"dst": {"0001"}, "c": {"0100"}, "d": {"0101"}}  # Axual's walk-through from cluster 1


def test_an_unbalanced_five_cluster_tree(topology: Callable[[list[str]], Topology]) -> None:
    top = topology(["src", "dst", "c", "d", "e"])
    for name in top.names:
        top.create(name)
    top.start(tree_={"layout": "((src,(dst,c)),(d,e))", "include": [top.topic]})
    top.produce(20)
    top.wait_settled(5 * 20)
    top.assert_each_record_once_everywhere()


def test_the_issues_looping_config_is_refused_at_start(tmp_path: Path, local_stack: devstack.Stack) -> None:
    config = tmp_path / "loop.yaml"
    config.write_text(
        f"zookeeper: {{connect: '{local_stack.zookeeper.address}'}}\n"
        f"clusters:\n  src: {{bootstrap.servers: '{local_stack.bootstrap('src')}'}}\n"
        f"  dst: {{bootstrap.servers: '{local_stack.bootstrap('dst')}'}}\n"
        "routes:\n"
        "  - {source: src, destination: dst, include: [t]}\n"
        "  - {source: dst, destination: src, include: [t]}\n"
    )
    for kind in ("controller", "worker"):
        done = subprocess.run(
            [sys.executable, "-m", "ferry.cli", kind, "--config", str(config)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "routes src.dst, dst.src form a cycle (src -> dst -> src) with identity naming" in done.stderr
        assert "Traceback" not in done.stderr


def test_a_subtree_switch_when_the_target_broker_stops(topology: Callable[[list[str]], Topology]) -> None:
    """src.L3 and dst.L3 copy to c, the first leaf of (c,d). Stop c's broker: after switch_after_s
    they copy to d instead. Once c is back, no record is missing anywhere; duplicates (records c
    held or received around the switch, which c.L1 also hands to d) are counted and reported."""
    top = topology(["src", "dst", "c", "d"])
    for name in top.names:
        top.create(name)
    top.start(
        tree_={"layout": "3(1(src,dst),1(c,d))", "include": [top.topic], "switch_after_s": 4, "probe_interval_s": 1}
    )
    top.produce(20)
    top.wait_settled(4 * 20)
    view = requests.get(f"{top.controller.url}/tree", timeout=10).json()
    assert {d["name"]: d["target"] for d in view["distributors"]}["src.L3"] == "c"

    processes.down(top.stack, names=["c"])
    try:

        def switched() -> bool:
            rows = {d["name"]: d for d in requests.get(f"{top.controller.url}/tree", timeout=10).json()["distributors"]}
            return rows["src.L3"]["target"] == "d" and rows["dst.L3"]["target"] == "d" and rows["src.L3"]["switched"]

        wait_until(switched, 90, "src.L3 and dst.L3 to switch to d", interval=1.0)
        up_names = [n for n in top.names if n != "c"]
        for name in up_names:  # records produced while c is down
            producer = kafka_clients.producer(_conf(top.stack, name))
            seqs = [f"{name}-late-{i}" for i in range(20)]
            for seq in seqs:
                producer.produce(top.topic, value=seq.encode(), headers=[(SEQ, seq.encode()), ("app", b"kept")])
            assert producer.flush(30) == 0
            top.produced[name].extend(seqs)
        late = sum(20 for _ in up_names)
        wait_until(
            lambda: all(len(top.read(n)) >= 80 + late for n in up_names),
            120,
            "the late records on src, dst and d",
            interval=1.0,
        )
        table = subprocess.run(
            [
                sys.executable,
                "-m",
                "ferry.cli",
                "tree",
                "--config",
                str(top.fleet.config_path),
                "--url",
                top.controller.url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert table.returncode == 0, table.stderr
        print(table.stdout)
        assert [line.split()[6] for line in table.stdout.splitlines() if line.startswith("src.L3")] == ["d"]
        assert "unreachable clusters: c" in table.stdout
    finally:
        processes.up(top.stack, deadline_s=300)
    top.wait_settled(80 + late, timeout=240)
    everything = Counter(seq for seqs in top.produced.values() for seq in seqs)
    duplicates = {}
    for name in top.names:
        counts = Counter(seq for seq, _, _ in top.read(name))
        missing = set(everything) - set(counts)
        assert not missing, f"{name}: {len(missing)} records missing, e.g. {sorted(missing)[:5]}"
        assert not set(counts) - set(everything)
        duplicates[name] = sum(n - 1 for n in counts.values())
    print(f"subtree switch: {sum(everything.values())} records, duplicates per cluster: {duplicates}")


def test_heartbeats_over_a_chain_report_latency_per_route_and_end_to_end(
    topology: Callable[[list[str]], Topology],
) -> None:
    top = topology(["src", "dst", "c"])
    top.fleet.extra = {"heartbeats": {"interval_s": 1.0}}
    top.start(
        routes=[
            {"source": "src", "destination": "dst", "loop_prevention": True},
            {"source": "dst", "destination": "c", "loop_prevention": True},
        ]
    )

    def both_hops() -> dict[str, Any] | None:
        view: dict[str, Any] = requests.get(f"{top.controller.url}/heartbeats", timeout=10).json()
        pairs = {(row["origin"], row["cluster"]): row for row in view.get("endToEnd", [])}
        if ("src", "c") in pairs and all(view["routes"][r]["latencyS"] is not None for r in ("src.dst", "dst.c")):
            return view
        return None

    view = wait_until(both_hops, 120, "heartbeats from src on c (two hops) and over both routes", interval=1.0)
    pairs = {(row["origin"], row["cluster"]): row for row in view["endToEnd"]}
    assert pairs[("src", "c")]["hops"] == 2 and pairs[("src", "dst")]["hops"] == 1
    assert pairs[("dst", "c")]["hops"] == 1
    for row in view["endToEnd"]:
        assert 0 <= row["latencyS"] < 60 and 0 <= row["sinceLastS"] < 60
    print(f"heartbeats: {view}")

    def in_metrics() -> bool:  # the gauges follow the book at the end of each heartbeat tick
        metrics = requests.get(f"{top.controller.url}/metrics", timeout=10).text
        return (
            'ferry_controller_heartbeat_latency_seconds{cluster="c",hops="2",origin="src"}' in metrics
            and 'ferry_controller_route_heartbeat_age_seconds{route="dst.c"}' in metrics
        )

    wait_until(in_metrics, 30, "the heartbeat gauges", interval=1.0)
