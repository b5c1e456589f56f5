from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, get_args

import pytest

from ferry.bench.names import COMPRESSIONS
from ferry.common.config import Compression, FerryConfig, TreeConfig, load_config, parse_config
from ferry.common.errors import ConfigError
from ferry.common.model import (
    ExternalView,
    IdealState,
    PartitionKey,
    PartitionState,
    PartitionStatus,
    TopicKey,
    WorkerAssignment,
    WorkerInfo,
    WorkerStatus,
    topic_name_problem,
)

pytestmark = pytest.mark.unit

MINIMAL: dict[str, Any] = {
    "zookeeper": {"connect": "127.0.0.1:2181"},
    "clusters": {"src": {"bootstrap.servers": "127.0.0.1:19092"}, "dst": {"bootstrap.servers": "127.0.0.1:29092"}},
    "routes": [{"source": "src", "destination": "dst"}],
}

MINIMAL_YAML = """\
zookeeper:
  connect: "127.0.0.1:2181"
clusters:
  src: {bootstrap.servers: "127.0.0.1:19092"}
  dst: {bootstrap.servers: "127.0.0.1:29092"}
routes:
  - {source: src, destination: dst}
"""


def minimal(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(MINIMAL)
    data.update(changes)
    return data


# --- config -----------------------------------------------------------------------------------


def test_a_minimal_config_gets_defaults() -> None:
    config = parse_config(minimal())
    assert isinstance(config, FerryConfig)
    assert config.zookeeper.root == "/ferry"
    assert config.controller.rest_port == 9000
    assert config.worker.auto_offset_reset == "earliest"
    route = config.route("src.dst")
    assert (route.name, route.group_id) == ("src.dst", "ferry.src.dst")
    with pytest.raises(ConfigError, match="unknown route"):
        config.route("dst.src")


def test_an_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"controller\.rest_prot"):
        parse_config(minimal(controller={"rest_prot": 9001}))
    with pytest.raises(ConfigError, match="colour"):
        parse_config(minimal(colour="blue"))


def test_an_out_of_range_value_is_named() -> None:
    with pytest.raises(ConfigError, match=r"controller\.rest_port: Input should be less than 65536"):
        parse_config(minimal(controller={"rest_port": 70000}))


def test_a_route_to_an_unknown_cluster() -> None:
    with pytest.raises(ConfigError, match="unknown cluster 'nowhere'"):
        parse_config(minimal(routes=[{"source": "src", "destination": "nowhere"}]))


def test_route_rules() -> None:
    with pytest.raises(ConfigError, match="same cluster"):
        parse_config(minimal(routes=[{"source": "src", "destination": "src"}]))
    with pytest.raises(ConfigError, match="listed twice"):
        parse_config(minimal(routes=[{"source": "src", "destination": "dst"}] * 2))
    with pytest.raises(ConfigError, match="routes"):
        parse_config(minimal(routes=[]))


def test_cluster_rules() -> None:
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        parse_config(minimal(clusters={"src": {}, "dst": {"bootstrap.servers": "x:1"}}))
    with pytest.raises(ConfigError, match="may use only"):
        parse_config(minimal(clusters={"s/rc": {"bootstrap.servers": "x:1"}}))


@pytest.mark.parametrize("root", ["ferry", "/ferry/", "/a//b", ""])
def test_a_bad_root_path(root: str) -> None:
    with pytest.raises(ConfigError, match=r"zookeeper\.root"):
        parse_config(minimal(zookeeper={"connect": "zk:2181", "root": root}))


@pytest.mark.parametrize("root", ["/", "/ferry", "/ferry/prod"])
def test_good_root_paths(root: str) -> None:
    assert parse_config(minimal(zookeeper={"connect": "zk:2181", "root": root})).zookeeper.root == root


def test_the_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        parse_config(["zookeeper"], origin="x.yaml")


def test_load_config_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "ferry.yaml"
    path.write_text(MINIMAL_YAML)
    assert load_config(path) == parse_config(minimal())
    assert load_config(str(path)).routes[0].name == "src.dst"


def test_load_config_names_the_file_when_invalid(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(MINIMAL_YAML + "extra: 1\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml is invalid:\n  extra"):
        load_config(path)


def test_load_config_rejects_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("zookeeper: {connect: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(path)


def test_load_config_of_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_config(path)


def test_load_config_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml")


# --- model ------------------------------------------------------------------------------------

P0 = PartitionKey("src.dst", "orders", 0)
P1 = PartitionKey("src.dst", "orders.v2", 11)


def test_partition_and_topic_keys_print_and_parse() -> None:
    assert str(P1) == "src.dst/orders.v2/11"
    assert PartitionKey.parse(str(P1)) == P1
    assert str(TopicKey("src.dst", "orders")) == "src.dst/orders"


def test_ideal_state_round_trip() -> None:
    state = IdealState("src.dst", "orders", 3, {0: "w1", 2: "w2"})
    assert IdealState.from_bytes(state.to_bytes()) == state
    empty = IdealState("src.dst", "orders", 0)
    assert IdealState.from_bytes(empty.to_bytes()) == empty


def test_worker_assignment_round_trip() -> None:
    assignment = WorkerAssignment(7, frozenset({P0, P1}))
    assert WorkerAssignment.from_bytes(assignment.to_bytes()) == assignment
    assert WorkerAssignment.from_bytes(None) == WorkerAssignment(0)
    assert WorkerAssignment.from_bytes(b"") == WorkerAssignment(0)


def test_worker_status_round_trip() -> None:
    status = WorkerStatus(
        4,
        {P0: PartitionStatus(PartitionState.ONLINE), P1: PartitionStatus(PartitionState.ERROR, "denied")},
        leaving=True,
    )
    assert WorkerStatus.from_bytes(status.to_bytes()) == status
    assert WorkerStatus.from_bytes(None) == WorkerStatus(0)


def test_external_view_round_trip() -> None:
    view = ExternalView(
        "src.dst",
        "orders",
        {0: {"worker": "w1", "state": "ONLINE"}, 1: {"worker": "w2", "state": "ERROR", "reason": "x"}},
    )
    assert ExternalView.from_bytes(view.to_bytes()) == view


def test_worker_info_round_trip() -> None:
    info = WorkerInfo("w1", "host-a", 1234, "http://host-a:9100/metrics")
    assert WorkerInfo.from_bytes(info.to_bytes()) == info
    bare = WorkerInfo("w2", "host-b", 5)
    assert WorkerInfo.from_bytes(bare.to_bytes()) == bare
    assert WorkerInfo.from_bytes(None) is None


def test_encoding_is_stable() -> None:
    a = IdealState("r", "t", 2, {1: "w2", 0: "w1"})
    b = IdealState("r", "t", 2, {0: "w1", 1: "w2"})
    assert a.to_bytes() == b.to_bytes()


@pytest.mark.parametrize("name", ["orders", "a", "a.b_c-D9", "x" * 249, "...", ".hidden"])
def test_valid_topic_names(name: str) -> None:
    assert topic_name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "non-empty"),
        (None, "non-empty"),
        (".", "not allowed"),
        ("..", "not allowed"),
        ("x" * 250, "at most 249"),
        ("a b", "may contain only"),
        ("a/b", "may contain only"),
        ("ordérs", "may contain only"),
        ("orders\n", "may contain only"),  # a regex's $ matches before a trailing newline
    ],
)
def test_invalid_topic_names(name: object, fragment: str) -> None:
    problem = topic_name_problem(name)
    assert problem is not None and fragment in problem


def test_a_route_compresses_with_lz4_unless_it_says_otherwise() -> None:
    config = parse_config(
        minimal(
            routes=[
                {"source": "src", "destination": "dst"},
                {"source": "dst", "destination": "src", "naming": "prefix", "compression": "zstd"},
            ]
        )
    )
    assert [route.compression for route in config.routes] == ["lz4", "zstd"]
    with pytest.raises(ConfigError, match=r"routes\.0\.compression"):
        parse_config(minimal(routes=[{"source": "src", "destination": "dst", "compression": "brotli"}]))


def test_the_tree_gives_its_compression_to_every_distributor() -> None:
    tree = TreeConfig(layout="(a,b)", include=[".*"], compression="gzip")
    assert {route.compression for route in tree.derive_routes()} == {"gzip"}
    assert {route.compression for route in TreeConfig(layout="(a,b)", include=[".*"]).derive_routes()} == {"lz4"}


def test_the_bench_knows_every_compression_a_route_may_name() -> None:
    assert get_args(Compression) == COMPRESSIONS


def test_a_routes_start_is_earliest_latest_or_a_time_in_epoch_ms() -> None:
    import pytest as _pytest

    from ferry.common.config import start_position

    assert start_position(None) is None
    assert start_position("latest") == "latest"
    assert start_position("2026-01-31T12:00:00Z") == 1769860800000
    assert start_position("2026-01-31T12:00:00") == 1769860800000  # no zone: UTC
    assert start_position("2026-01-31T13:00:00+01:00") == 1769860800000
    assert start_position("1769860800000") == start_position(1769860800000) == 1769860800000
    for bad in ("yesterday", True, "2026-13-01", -5.5):
        with _pytest.raises(ValueError):
            start_position(bad)


def test_replication_factors_default_to_the_sources_and_three_for_ferrys_own_topics() -> None:
    config = parse_config(minimal())
    assert config.route().replication_factor is None
    assert config.internal_topics.replication_factor_on("dst") == 3
    config = parse_config(
        minimal(
            routes=[{"source": "src", "destination": "dst", "replication_factor": 2}],
            internal_topics={"replication_factor": 2, "clusters": {"dst": 4}},
        )
    )
    assert config.route().replication_factor == 2
    assert [config.internal_topics.replication_factor_on(c) for c in ("src", "dst")] == [2, 4]
    tree = TreeConfig(layout="(a,b)", include=[".*"], replication_factor=3)
    assert {route.replication_factor for route in tree.derive_routes()} == {3}


def test_a_bad_replication_factor_or_an_unknown_cluster_is_named() -> None:
    with pytest.raises(ConfigError, match=r"routes\.0\.replication_factor"):
        parse_config(minimal(routes=[{"source": "src", "destination": "dst", "replication_factor": 0}]))
    with pytest.raises(ConfigError, match=r"internal_topics\.replication_factor"):
        parse_config(minimal(internal_topics={"replication_factor": 0}))
    with pytest.raises(ConfigError, match=r"internal_topics\.clusters: .*at least 1"):
        parse_config(minimal(internal_topics={"clusters": {"dst": 0}}))
    with pytest.raises(ConfigError, match=r"internal_topics\.clusters: unknown clusters \['nowhere'\]"):
        parse_config(minimal(internal_topics={"clusters": {"nowhere": 3}}))
