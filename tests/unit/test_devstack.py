from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from ferry.common.errors import DevStackError
from ferry.common.paths import DEV_DIR_ENV, JARS_DIR_ENV, jars_dir
from ferry.devstack import processes, security, server_files
from ferry.devstack import stack as devstack
from ferry.devstack.server_files import LOG4J2_CONFIG


@pytest.fixture(autouse=True)
def _default_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite may run against a stack on other ports; these tests reason about the defaults.
    for env in (devstack.ZK_PORT_ENV, devstack.SRC_PORT_ENV, devstack.DST_PORT_ENV):
        monkeypatch.delenv(env, raising=False)


def test_ports_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(devstack.ZK_PORT_ENV, "3181")
    monkeypatch.setenv(devstack.SRC_PORT_ENV, "39092")
    monkeypatch.delenv(devstack.DST_PORT_ENV, raising=False)
    stack = devstack.stack_from_env()
    assert stack.zookeeper.address == "127.0.0.1:3181"
    assert stack.bootstrap("src") == "127.0.0.1:39092"
    assert stack.src.controller_port == 39093
    assert stack.bootstrap("dst") == "127.0.0.1:29092"


@pytest.mark.parametrize("value", ["abc", "0", "70000"])
def test_a_bad_port_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(devstack.SRC_PORT_ENV, value)
    with pytest.raises(DevStackError, match=devstack.SRC_PORT_ENV):
        devstack.stack_from_env()


def test_cluster_ids_are_what_kafka_accepts() -> None:
    for _ in range(200):
        cid = processes._new_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_kafka_config_is_a_small_loopback_kraft_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    props = dict(line.split("=", 1) for line in server_files.kafka_config(devstack.stack_from_env().src).splitlines())
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093,SASL_SSL://127.0.0.1:19094"
    assert props["auto.create.topics.enable"] == "false"
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["log.dirs"].startswith(str(tmp_path))


def test_zookeeper_binds_loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    cfg = server_files.zookeeper_config(devstack.stack_from_env().zookeeper)
    assert "clientPortAddress=127.0.0.1" in cfg
    assert "admin.enableServer=false" in cfg


def test_zookeeper_serves_tls_one_port_up_with_the_stacks_ca_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    plain = devstack.stack_from_env().zookeeper
    assert plain.ports == (plain.port,) and "secureClientPort" not in server_files.zookeeper_config(plain)
    monkeypatch.setenv(devstack.ZK_TLS_ENV, "1")
    server = devstack.stack_from_env().zookeeper
    assert server.ports == (server.port, server.port + 1) and server.tls_address == f"127.0.0.1:{server.port + 1}"
    lines = server_files.zookeeper_config(server).splitlines()
    assert f"secureClientPort={server.port + 1}" in lines and "secureClientPortAddress=127.0.0.1" in lines
    assert f"ssl.trustStore.location={tmp_path / 'tls' / 'ca.pem'}" in lines
    assert f"ssl.keyStore.location={tmp_path / 'tls' / 'zookeeper.pem'}" in lines


def test_a_stale_pid_file_is_not_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    server = devstack.stack_from_env().src
    server.home.mkdir(parents=True)
    server.pid_file.write_text("1\n")  # init: alive, but not started with our config
    assert processes.pid_of(server) is None
    assert server.pid_file.exists()  # a reader removes nothing: `up` may be writing it
    processes._forget_stale_pid(server)
    assert not server.pid_file.exists()


def test_a_port_something_listens_on_is_not_free() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not processes._port_free(port)
    assert processes._port_free(port)


def test_one_up_or_down_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    held = processes._stack_lock(5, lambda: now[0], sleep)
    with held, pytest.raises(DevStackError, match="another"), processes._stack_lock(5, lambda: now[0], sleep):
        pass
    with processes._stack_lock(5, lambda: now[0], sleep):  # released: taken at once
        pass


def test_missing_jars_say_to_run_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path))
    with pytest.raises(DevStackError, match="make setup"):
        _ = devstack.stack_from_env().src.classpath


def test_each_broker_adds_a_sasl_ssl_listener_two_ports_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    stack = devstack.stack_from_env()
    props = dict(line.split("=", 1) for line in server_files.kafka_config(stack.src).splitlines())
    assert "PLAINTEXT://127.0.0.1:19092" in props["listeners"]
    assert "SASL_SSL://127.0.0.1:19094" in props["listeners"]
    assert "SASL_SSL:SASL_SSL" in props["listener.security.protocol.map"]
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["ssl.keystore.location"] == str(tmp_path / "tls" / "broker.p12")
    assert stack.secured("dst") == {
        "bootstrap.servers": "127.0.0.1:29094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": security.SASL_USER,
        "sasl.password": security.SASL_PASSWORD,
        "ssl.ca.location": str(tmp_path / "tls" / "ca.pem"),
    }


def test_a_broker_spawned_before_the_secured_listener_existed_is_recognized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `up` must not wait for a SASL_SSL listener that a broker started by older code does not have.
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    server = devstack.stack_from_env().src
    assert not processes.configured_with_sasl_ssl(server)  # no config file at all
    server.home.mkdir(parents=True)
    server.config_file.write_text("listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093\n")
    assert not processes.configured_with_sasl_ssl(server)
    server.config_file.write_text(server_files.kafka_config(server))
    assert processes.configured_with_sasl_ssl(server)


def test_extra_clusters_get_ports_by_position_or_by_name_and_are_recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(devstack.EXTRA_PORT_ENV, "40000")
    monkeypatch.setenv("FERRY_DEV_PORT_E_2", "45000")
    monkeypatch.delenv(devstack.CLUSTERS_ENV, raising=False)
    stack = devstack.stack_from_env(["c", "d", "e-2"])
    assert [(s.name, s.port) for s in stack.extra] == [("c", 40000), ("d", 40010), ("e-2", 45000)]
    assert stack.bootstrap("d") == "127.0.0.1:40010" and [s.name for s in stack.kafka][:2] == ["src", "dst"]
    with pytest.raises(DevStackError, match="no cluster 'x'"):
        stack.bootstrap("x")
    devstack.record_extra(stack)
    assert [s.name for s in devstack.stack_from_env().extra] == []  # a plain stack: src and dst only
    assert [s.name for s in devstack.stack_from_env(recorded=True).extra] == ["c", "d", "e-2"]
    with pytest.raises(DevStackError, match="not a usable cluster name"):
        devstack.parse_cluster_names("c,d/e", "--clusters")
    monkeypatch.setattr(devstack.Server, "classpath", property(lambda self: "jars/*"))
    assert "-XX:+UseSerialGC" in processes._command(stack.extra[0]) and "-Xmx256m" in processes._command(stack.extra[0])


def test_an_extra_cluster_of_three_brokers_is_one_controller_and_two_brokers_on_its_ports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(devstack.EXTRA_PORT_ENV, "40000")
    monkeypatch.delenv(devstack.CLUSTERS_ENV, raising=False)
    stack = devstack.stack_from_env(["big:3", "small"])
    big = stack.cluster("big")
    assert [(n.label, n.node_id, n.ports) for n in big.nodes] == [
        ("big", 1, (40000, 40001, 40002)),
        ("big.2", 2, (40003, 40005)),
        ("big.3", 3, (40006, 40008)),
    ]
    assert stack.bootstrap("big") == "127.0.0.1:40000,127.0.0.1:40003,127.0.0.1:40006"
    assert stack.bootstrap("small") == "127.0.0.1:40010"
    assert len(stack.servers) == 1 + 2 + 3 + 1  # zookeeper, src and dst, big's brokers, small
    assert [n.home.name for n in big.nodes] == ["big", "big.2", "big.3"]
    first, second = (
        dict(line.split("=", 1) for line in server_files.kafka_config(node).splitlines()) for node in big.nodes[:2]
    )
    assert (first["process.roles"], first["node.id"]) == ("broker,controller", "1")
    assert (second["process.roles"], second["node.id"]) == ("broker", "2")
    assert second["listeners"] == "PLAINTEXT://127.0.0.1:40003,SASL_SSL://127.0.0.1:40005"
    assert (
        first["controller.quorum.bootstrap.servers"]
        == second["controller.quorum.bootstrap.servers"]
        == "127.0.0.1:40001"
    )
    assert second["default.replication.factor"] == "1"  # a replica count is the client's choice
    devstack.record_extra(stack)
    recorded = devstack.stack_from_env(recorded=True)
    assert [(s.name, s.port, s.brokers) for s in recorded.extra] == [("big", 40000, 3), ("small", 40010, 1)]
    devstack.forget_extra(["small"])
    assert [(s.name, s.brokers) for s in devstack.stack_from_env(recorded=True).extra] == [("big", 3)]
    assert devstack.parse_cluster_specs("a:3, b,c:1", "--clusters") == {"a": 3, "b": 1, "c": 1}
    for bad in ("a:4", "a:0", "a:x"):
        with pytest.raises(DevStackError, match="1 to 3 brokers"):
            devstack.parse_cluster_specs(bad, "--clusters")


def _props(server: devstack.Server) -> dict[str, str]:
    return dict(line.split("=", 1) for line in server_files.kafka_config(server).splitlines())


def test_an_extra_cluster_may_run_an_older_kafka_in_kraft_or_zookeeper_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(devstack.EXTRA_PORT_ENV, "40000")
    monkeypatch.delenv(devstack.CLUSTERS_ENV, raising=False)
    assert devstack.parse_clusters("a:kafka-3.9, b:2:kafka-2.8,c:kafka-2.8:3,d", "--clusters") == {
        "a": devstack.ClusterSpec(1, "kafka-3.9"),
        "b": devstack.ClusterSpec(2, "kafka-2.8"),
        "c": devstack.ClusterSpec(3, "kafka-2.8"),
        "d": devstack.ClusterSpec(1, devstack.DEFAULT_KAFKA),
    }
    with pytest.raises(DevStackError, match=re.escape("kafka-3.9, kafka-2.8")):
        devstack.parse_clusters("a:kafka-0.8", "--clusters")
    stack = devstack.stack_from_env(["new", "kraft:kafka-3.9", "zk:2:kafka-2.8"])
    new, kraft, zk = (stack.cluster(name) for name in ("new", "kraft", "zk"))

    # The pinned release: a dynamic quorum of one, formatted --standalone.
    assert _props(new)["controller.quorum.bootstrap.servers"] == "127.0.0.1:40001"
    # Kafka 3.9: KRaft with a static quorum.
    assert (_props(kraft)["process.roles"], _props(kraft)["controller.quorum.voters"]) == (
        "broker,controller",
        "1@127.0.0.1:40011",
    )
    assert "controller.quorum.bootstrap.servers" not in _props(kraft)
    # Kafka 2.8: ZooKeeper mode, under a chroot of the stack's ZooKeeper; no controller listener.
    first, second = (_props(node) for node in zk.nodes)
    assert "process.roles" not in first and "controller.listener.names" not in first
    assert (first["broker.id"], second["broker.id"]) == ("1", "2")
    assert first["zookeeper.connect"] == second["zookeeper.connect"] == "127.0.0.1:2181/kafka-zk"
    assert first["listeners"] == "PLAINTEXT://127.0.0.1:40020,SASL_SSL://127.0.0.1:40022"
    assert [node.ports for node in zk.nodes] == [(40020, 40022), (40023, 40025)]
    guarded = stack.with_clusters(["acl"], authorizer=True, version="kafka-2.8").cluster("acl")
    assert _props(guarded)["authorizer.class.name"] == security.ZK_AUTHORIZER_CLASS

    # Each release from its own jar folder, logging through the log4j of its day.
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "jars"))
    for folder in ("kafka", "kafka-3.9"):
        (tmp_path / "jars" / folder).mkdir(parents=True)
        (tmp_path / "jars" / folder / "k.jar").touch()
    assert processes._command(kraft)[-4:-2] == ["-cp", f"{tmp_path}/jars/kafka-3.9/*"]
    assert f"-Dlog4j.configuration=file:{kraft.home}/log4j.properties" in processes._command(kraft)
    assert f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}" in processes._command(new)
    with pytest.raises(DevStackError, match=re.escape("kafka-2.8: run `make setup`")):
        processes._command(zk)

    # `status` and `down` know each cluster's release without being told again.
    devstack.record_extra(stack)
    recorded = devstack.stack_from_env(recorded=True)
    assert [(s.name, s.brokers, s.version, s.zookeeper) for s in recorded.extra] == [
        ("new", 1, devstack.DEFAULT_KAFKA, ""),
        ("kraft", 1, "kafka-3.9", ""),
        ("zk", 2, "kafka-2.8", "127.0.0.1:2181/kafka-zk"),
    ]


def test_one_jar_folder_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JARS_DIR_ENV, str(tmp_path / "jars"))
    assert jars_dir() == tmp_path / "jars"
    assert jars_dir("kafka") == tmp_path / "jars" / "kafka"
    from ferry.pipeline import spark

    assert spark.jars_dir() == tmp_path / "jars" / "spark"
