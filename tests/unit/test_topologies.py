"""Multi-cluster planning, pure: naming, loop prevention, the distribution tree, and the refused configs.

The simulations below run the very decision the copier runs (:func:`common.core.topology.copy_flags`
on the header :func:`common.core.provenance.stamp` writes) over whole topologies, so "every record
reaches every other cluster exactly once and never comes back" is checked for many shapes here,
and for a few on real clusters in tests/e2e/test_topologies.py.
"""

from __future__ import annotations

import copy
import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.config import FerryConfig, RouteConfig, parse_config
from ferry.common.core import heartbeat, naming, topology, tree
from ferry.common.core.provenance import read, stamp
from ferry.common.core.watermark import OffsetWatermarks
from ferry.common.errors import ConfigError
from ferry.controller.api.rest_json import heartbeats_json

pytestmark = pytest.mark.unit

clusters = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
topics = st.from_regex(r"[a-zA-Z0-9._-]{1,40}", fullmatch=True).filter(lambda t: t not in (".", ".."))


def _route(source: str = "a", destination: str = "b", **kw: Any) -> RouteConfig:
    return RouteConfig(source=source, destination=destination, **kw)


# -- naming -----------------------------------------------------------------------------------


@given(
    source=clusters,
    destination=clusters,
    topic=topics,
    naming_=st.sampled_from(
        ["identity", "prefix", "{source}.{topic}", "prod-{topic}", "{topic}.from-{source}", "{destination}_{topic}_x"]
    ),
)
def test_every_naming_is_reversible(source: str, destination: str, topic: str, naming_: str) -> None:
    route = _route(source, destination, naming=naming_)
    name = naming.destination_topic(route, topic)
    assert naming.source_topic(route, name) == topic


def test_the_namings_of_the_issue() -> None:
    assert naming.destination_topic(_route(naming="prefix"), "t") == "a.t"
    assert naming.destination_topic(_route(naming="prod-{topic}"), "t") == "prod-t"
    assert naming.destination_topic(_route(naming="{source}.{topic}"), "t") == "a.t"
    assert naming.destination_topic(_route(), "t") == "t"
    assert naming.source_topic(_route(naming="prefix"), "b.t") is None  # not a copy of this route
    assert naming.source_topic(_route(naming="prefix"), "a.") is None


def test_prefix_never_mirrors_a_topic_back_to_the_cluster_its_prefix_names() -> None:
    """MirrorMaker 2's rule: on a <-> b, b.t on a never goes back to b, so a.b.t never appears."""
    a_to_b = _route("a", "b", naming="prefix")
    assert naming.mirrored(a_to_b, "t") and naming.mirrored(a_to_b, "a.t") is True
    assert not naming.mirrored(a_to_b, "b.t") and not naming.mirrored(a_to_b, "c.b.t")
    assert "came from b" in (naming.refusal(a_to_b, "b.t") or "")
    assert not a_to_b.wants("b.t") and not _route("a", "b", naming="prefix", include=[".*"]).wants("b.t")
    assert _route("a", "b", naming="prefix", include=[".*"]).wants("t")


@pytest.mark.parametrize("bad", ["{topic}{topic}", "static", "{cluster}.{topic}", "{topic}/x", "x{{topic}}"])
def test_bad_namings_are_refused_by_the_config(bad: str) -> None:
    with pytest.raises(ValueError, match="naming"):
        _route(naming=bad)


# -- loop prevention: forwarding trees ----------------------------------------------------------


def _simulate_paths(routes: list[RouteConfig], produced_on: str) -> Counter[str]:
    """Where one record produced on ``produced_on`` ends up, copying as the copiers decide."""
    config_routes = routes
    arrivals: Counter[str] = Counter({produced_on: 1})
    pending: list[tuple[str, list[tuple[str, bytes | None]]]] = [(produced_on, [("app", b"1")])]
    steps = 0
    while pending:
        cluster, headers = pending.pop()
        for route in config_routes:
            if route.source != cluster:
                continue
            origins = (
                topology.copied_origins(
                    [r for r in config_routes if r.loop_prevention], route.source, route.destination
                )
                if route.loop_prevention
                else None
            )
            flags = topology.copy_flags(read(headers), route.destination, origins, route.copy_level)
            if flags is None:
                continue
            copied = stamp(headers, route.source, 0, flags=flags, source_topic="t", destination_topic="t")
            assert copied[0] == ("app", b"1")  # the application's header untouched
            arrivals[route.destination] += 1
            pending.append((route.destination, copied))
            steps += 1
            assert steps < 1000, "a loop"
    return arrivals


def _reachable(routes: list[RouteConfig], start: str) -> set[str]:
    seen = {start}
    frontier = [start]
    while frontier:
        cluster = frontier.pop()
        for r in routes:
            if r.source == cluster and r.destination not in seen:
                seen.add(r.destination)
                frontier.append(r.destination)
    return seen


def test_active_active_copies_once_each_way_and_never_back() -> None:
    routes = [_route("a", "b", loop_prevention=True), _route("b", "a", loop_prevention=True)]
    assert _simulate_paths(routes, "a") == Counter({"a": 1, "b": 1})
    assert _simulate_paths(routes, "b") == Counter({"a": 1, "b": 1})


def test_a_full_mesh_of_three_does_not_forward_a_neighbours_record() -> None:
    names = ["a", "b", "c"]
    routes = [_route(s, d, loop_prevention=True) for s in names for d in names if s != d]
    for origin in names:
        assert _simulate_paths(routes, origin) == Counter(dict.fromkeys(names, 1))
    assert topology.copied_origins(routes, "b", "c") == {"b"}


def test_a_chain_forwards() -> None:
    routes = [_route("a", "b", loop_prevention=True), _route("b", "c", loop_prevention=True)]
    assert _simulate_paths(routes, "a") == Counter({"a": 1, "b": 1, "c": 1})


@settings(max_examples=150, deadline=None)
@given(
    st.sets(st.tuples(st.sampled_from("abcde"), st.sampled_from("abcde")).filter(lambda e: e[0] != e[1]), min_size=1)
)
def test_any_graph_with_loop_prevention_delivers_each_record_once_to_each_reachable_cluster(
    edges: set[tuple[str, str]],
) -> None:
    routes = [_route(s, d, loop_prevention=True) for s, d in sorted(edges)]
    for origin in {s for s, _ in edges}:
        arrivals = _simulate_paths(routes, origin)
        assert arrivals == Counter(dict.fromkeys(_reachable(routes, origin), 1))


# -- the distribution tree (Axual's examples) --------------------------------------------------

AXUAL_BALANCED = "3(1(c1,c2),1(c3,c4))"
AXUAL_UNBALANCED = "((c1,(c2,c3)),(c4,c5))"


def test_axuals_balanced_example_derives_its_distributors_masks_and_flags() -> None:
    derived = tree.distributors(tree.parse(AXUAL_BALANCED))
    assert [(d.name, tree.format_flags(d.mask), d.subtree) for d in derived] == [
        ("c1.L1", "0001", ("c2",)),
        ("c1.L3", "0111", ("c3", "c4")),
        ("c2.L1", "0001", ("c1",)),
        ("c2.L3", "0111", ("c3", "c4")),
        ("c3.L1", "0001", ("c4",)),
        ("c3.L3", "0111", ("c1", "c2")),
        ("c4.L1", "0001", ("c3",)),
        ("c4.L3", "0111", ("c1", "c2")),
    ]
    # Axual's walk-through: a fresh record on cluster 1.
    assert tree.copy_flags(0, 1) == 0b0001 and tree.copy_flags(0, 3) == 0b0100
    assert tree.copy_flags(0b0001, 1) is None and tree.copy_flags(0b0001, 3) is None  # on cluster 2
    assert tree.copy_flags(0b0100, 3) is None and tree.copy_flags(0b0100, 1) == 0b0101  # on cluster 3
    assert tree.copy_flags(0b0101, 3) is None and tree.copy_flags(0b0101, 1) is None  # on cluster 4


def test_an_unbalanced_tree_gets_its_levels() -> None:
    derived = tree.distributors(tree.parse(AXUAL_UNBALANCED))
    levels: dict[str, list[int]] = {}
    for d in derived:
        levels.setdefault(d.cluster, []).append(d.level)
    assert levels == {"c1": [2, 3], "c2": [1, 2, 3], "c3": [1, 2, 3], "c4": [1, 3], "c5": [1, 3]}


def _tree_routes(layout: str, targets: dict[str, str] | None = None) -> list[RouteConfig]:
    derived = tree.distributors(tree.parse(layout))
    chosen = tree.choose_targets(derived, targets or {})
    return [_route(d.cluster, chosen[d.name], copy_level=d.level, distributor=d.name) for d in derived]


def _random_tree(draw: Any, leaves: list[str]) -> str:
    if len(leaves) == 1:
        return leaves[0]
    cut = draw(st.integers(1, len(leaves) - 1))
    return f"({_random_tree(draw, leaves[:cut])},{_random_tree(draw, leaves[cut:])})"


@st.composite
def layouts(draw: Any) -> str:
    count = draw(st.integers(2, 9))
    return _random_tree(draw, [f"k{i}" for i in range(count)])


@settings(max_examples=150, deadline=None)
@given(layout=layouts(), data=st.data())
def test_any_tree_and_any_choice_of_targets_delivers_each_record_once_everywhere(layout: str, data: Any) -> None:
    derived = tree.distributors(tree.parse(layout))
    targets = {d.name: data.draw(st.sampled_from(d.subtree)) for d in derived}
    routes = _tree_routes(layout, targets)
    leaves = tree.parse(layout).leaves()
    for origin in leaves:
        assert _simulate_paths(routes, origin) == Counter(dict.fromkeys(leaves, 1))


def test_axuals_example_flags_arrive_on_the_copies() -> None:
    routes = _tree_routes(AXUAL_BALANCED)
    seen: dict[str, int] = {}
    pending: list[tuple[str, list[tuple[str, bytes | None]]]] = [("c1", [])]
    while pending:
        cluster, headers = pending.pop()
        for route in (r for r in routes if r.source == cluster):
            flags = topology.copy_flags(read(headers), route.destination, None, route.copy_level)
            if flags is not None:
                copied = stamp(headers, route.source, 0, flags=flags, source_topic="t", destination_topic="t")
                seen[route.destination] = flags
                pending.append((route.destination, copied))
    assert {c: tree.format_flags(f) for c, f in seen.items()} == {"c2": "0001", "c3": "0100", "c4": "0101"}


@pytest.mark.parametrize(
    ("layout", "problem"),
    [
        ("(a,", "ends too early"),
        ("(a,b", "found 'the end'"),
        ("(a,b,c)", "expected ')'"),
        ("a", "at least two"),
        ("(a,a)", "more than once"),
        ("1(2(a,b),c)", "must be lower"),
        ("(a,b))", "unexpected"),
        ("(a;b)", "cannot read"),
        ("70(a,b)", "outside"),
    ],
)
def test_bad_layouts_are_named(layout: str, problem: str) -> None:
    with pytest.raises(tree.TreeError, match=re.escape(problem)):
        tree.parse(layout)


def test_the_table_and_the_drawing_are_readable() -> None:
    root = tree.parse(AXUAL_BALANCED)
    derived = tree.distributors(root)
    text = tree.table(derived, tree.choose_targets(derived, {"c1.L3": "c4"}), {"c1.L1": "RUNNING"})
    lines = text.splitlines()
    assert lines[0].split() == ["DISTRIBUTOR", "CLUSTER", "LEVEL", "MASK", "SETS", "SUBTREE", "TARGET", "STATE"]
    assert lines[1].split() == ["c1.L1", "c1", "1", "0001", "0001", "c2", "c2", "RUNNING"]
    assert lines[2].split() == ["c1.L3", "c1", "3", "0111", "0100", "1(c3,c4)", "c4", "-"]
    assert tree.ascii_tree(root).splitlines()[0] == "level 3 (mask 0111)"
    with pytest.raises(tree.TreeError, match="not a leaf of its subtree"):
        tree.choose_targets(derived, {"c1.L3": "c2"})


# -- the config ---------------------------------------------------------------------------------

BASE: dict[str, Any] = {
    "zookeeper": {"connect": "127.0.0.1:2181"},
    "clusters": {
        name: {"bootstrap.servers": f"127.0.0.1:{port}"}
        for name, port in (("src", 1), ("dst", 2), ("c1", 3), ("c2", 4), ("c3", 5), ("c4", 6))
    },
}


def _config(**extra: Any) -> FerryConfig:
    return parse_config({**copy.deepcopy(BASE), **extra})


def test_the_issues_looping_config_is_refused_with_the_cycle_named() -> None:
    routes = [
        {"source": "src", "destination": "dst", "include": ["t"]},
        {"source": "dst", "destination": "src", "include": ["t"]},
    ]
    with pytest.raises(ConfigError) as caught:
        _config(routes=routes)
    message = str(caught.value)
    assert "routes src.dst, dst.src form a cycle (src -> dst -> src) with identity naming" in message
    assert "loop_prevention: true" in message
    assert "\n" not in message.split(":\n", 1)[1].strip()  # one line per problem


def test_a_longer_cycle_is_named_and_one_unprotected_route_is_enough_to_refuse() -> None:
    routes = [
        {"source": "c1", "destination": "c2", "loop_prevention": True},
        {"source": "c2", "destination": "c3", "loop_prevention": True},
        {"source": "c3", "destination": "c1"},
    ]
    with pytest.raises(ConfigError, match=r"c3.c1, c1.c2, c2.c3 form a cycle \(c3 -> c1 -> c2 -> c3\).*c3.c1 has no"):
        _config(routes=routes)


def test_loop_free_configs_load() -> None:
    both = [{"source": "src", "destination": "dst"}, {"source": "dst", "destination": "src"}]
    assert len(_config(routes=[{**r, "loop_prevention": True} for r in both]).routes) == 2
    assert len(_config(routes=[{**r, "naming": "prefix"} for r in both]).routes) == 2
    assert len(_config(routes=[{**both[0], "naming": "prod-{topic}"}, both[1]]).routes) == 2
    # A template that renders to the same name is identity: still a cycle.
    with pytest.raises(ConfigError, match="form a cycle"):
        _config(routes=[{**both[0], "naming": "{topic}"}, both[1]])


def test_a_tree_derives_its_routes_with_stable_names_and_groups() -> None:
    config = _config(tree={"layout": "3(1(c1,c2),1(c3,c4))", "include": ["orders.*"], "targets": {"c1.L3": "c4"}})
    by_name = {r.name: r for r in config.routes}
    assert sorted(by_name) == ["c1.L1", "c1.L3", "c2.L1", "c2.L3", "c3.L1", "c3.L3", "c4.L1", "c4.L3"]
    assert by_name["c1.L3"].destination == "c4" and by_name["c1.L3"].group_id == "ferry.c1.L3"
    assert by_name["c2.L3"].destination == "c3" and by_name["c2.L3"].copy_level == 3
    assert by_name["c1.L1"].wants("orders-eu") and not by_name["c1.L1"].wants("payments")
    assert config.copied_origins(by_name["c1.L1"]) is None


@pytest.mark.parametrize(
    ("tree_", "problem"),
    [
        ({"layout": "(c1,zz)", "include": [".*"]}, "unknown cluster 'zz'"),
        ({"layout": "(c1,", "include": [".*"]}, "ends too early"),
        ({"layout": "(c1,c2)", "include": [".*"], "targets": {"c1.L1": "c3"}}, "not a leaf of its subtree"),
        ({"layout": "(c1,c2)", "include": [".*"], "targets": {"c9.L1": "c3"}}, "name no distributor"),
    ],
)
def test_bad_trees_are_refused(tree_: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        _config(tree=tree_)


def test_no_routes_and_no_tree_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least one route"):
        _config()


# -- the watermark passes skipped records -------------------------------------------------------


def test_a_skipped_record_never_holds_commits_back() -> None:
    marks: OffsetWatermarks[str] = OffsetWatermarks()
    marks.passed("p", 0)
    assert marks.committables().get("p") == 1  # skipped alone: committable at once
    marks.sent("p", 1)
    marks.passed("p", 2)
    marks.passed("p", 3)
    assert marks.committables().get("p") == 1  # 1 is still in flight
    marks.acked_oldest("p")
    assert marks.committables().get("p") == 4 and marks.in_flight("p") == 0


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_the_watermark_reaches_the_end_whatever_mix_of_copies_and_skips(skips: list[bool]) -> None:
    marks: OffsetWatermarks[str] = OffsetWatermarks()
    for offset, skip in enumerate(skips):
        (marks.passed if skip else marks.sent)("p", offset)
    while marks.in_flight("p"):
        marks.acked_oldest("p")
    assert marks.committables().get("p") == len(skips)


# -- switching a subtree's target ---------------------------------------------------------------


def test_a_target_unreachable_long_enough_switches_to_a_reachable_leaf_of_the_same_subtree() -> None:
    derived = tree.distributors(tree.parse("3(1(c1,c2),1(c3,c4))"))
    targets = tree.choose_targets(derived, {})
    assert targets["c1.L3"] == "c3"
    assert tree.switches(derived, targets, {"c3": 100.0}, now=103.0, after_s=5) == {}  # not long enough yet
    assert tree.switches(derived, targets, {"c3": 100.0}, now=105.0, after_s=5) == {"c1.L3": "c4", "c2.L3": "c4"}
    assert tree.switches(derived, targets, {"c3": 100.0, "c4": 100.0}, now=200.0, after_s=5) == {}  # nowhere to go
    assert tree.switches(derived, targets, {"c2": 0.0}, now=200.0, after_s=5) == {}  # c1.L1: c2 is its only leaf


def test_switched_targets_apply_to_the_distributors_routes_only_inside_their_subtree() -> None:
    config = _config(
        tree={"layout": "3(1(c1,c2),1(c3,c4))", "include": ["t"]}, routes=[{"source": "src", "destination": "dst"}]
    )
    routes = {r.name: r for r in config.with_targets({"c1.L3": "c4", "c2.L3": "c1", "src.dst": "c1"})}
    assert routes["c1.L3"].destination == "c4" and routes["c1.L3"].group_id == "ferry.c1.L3"
    assert routes["c2.L3"].destination == "c3"  # c1 is not in c2.L3's subtree: ignored
    assert routes["src.dst"].destination == "dst"


# -- heartbeats ---------------------------------------------------------------------------------


def test_heartbeats_give_latency_per_route_and_end_to_end() -> None:
    book = heartbeat.HeartbeatBook()
    assert heartbeat.decode(heartbeat.encode("a", 1000)) == ("a", 1000)
    assert heartbeat.decode(b"not json") is None and heartbeat.decode(None) is None
    book.record("a", "a", (), 1000, 1001)  # at home: not a copy
    book.record("b", "a", ("a",), 1000, 1250)
    book.record("c", "a", ("a", "b"), 1000, 1600)
    book.record("c", "a", ("a", "b"), 900, 1500)  # older than what is known: ignored
    view = heartbeats_json(book.view(now_ms=3600, routes=[("a.b", "a", "b"), ("b.c", "b", "c")]))
    assert view["endToEnd"] == [
        {"origin": "a", "cluster": "b", "hops": 1, "latencyS": 0.25, "sinceLastS": 2.35},
        {"origin": "a", "cluster": "c", "hops": 2, "latencyS": 0.6, "sinceLastS": 2.0},
    ]
    assert view["routes"] == {
        "a.b": {"latencyS": 0.25, "sinceLastS": 2.35},
        "b.c": {"latencyS": None, "sinceLastS": None},
    }


def test_heartbeats_on_make_every_route_mirror_the_heartbeat_topic() -> None:
    config = _config(
        routes=[{"source": "src", "destination": "dst", "include": ["orders"]}, {"source": "dst", "destination": "c1"}],
        heartbeats={"interval_s": 1},
    )
    assert all(r.wants(heartbeat.TOPIC) for r in config.routes)
    assert (
        not _config(routes=[{"source": "src", "destination": "dst", "include": [".*x"]}])
        .routes[0]
        .wants(heartbeat.TOPIC)
    )


def test_the_header_cost_bench_counts_the_bytes_kafka_stores() -> None:
    from ferry.bench import header_cost

    # varint(16) + "ferry.provenance" + varint(8) + "1|a|0|41"
    assert header_cost.header_bytes(b"1|a|0|41") == 1 + 16 + 1 + 8
    result = header_cost.measure(50)
    assert set(result["cpuNsAddedPerRecord"]) == {"local", "hop", "tree", "local-3", "bare-3", "hop-3"}
    assert result["bytesPerRecord"]["one hop, offset 41"] == 37  # 8 hex digits of the topic tag and their "|"
    assert result["bytesPerRecord"]["version 3, one hop"] == 34  # version 3: no "|" and offset
