"""ferry import-mm2: MirrorMaker 2's properties mapped to Ferry's config, key by key; nothing dropped silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry.common.config import load_config, parse_config
from ferry.common.mm2 import clients, properties
from ferry.common.mm2.convert import Mm2Error, convert

KAFKA_EXAMPLE = Path(__file__).parent / "fixtures" / "connect-mirror-maker.properties"
BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "a1:9092, a2:9092",
    "B.bootstrap.servers": "b:9092",
    "A->B.enabled": "true",
}


def _convert(extra: dict[str, str], **kwargs: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The config (validated by Ferry) and the not-converted key -> why."""
    result = convert({**BASE, **extra}, **kwargs)
    parse_config(result.config)
    return result.config, {item.key: item.why for item in result.not_converted}


def _route(config: dict[str, Any], name: str = "A.B") -> dict[str, Any]:
    return next(r for r in config["routes"] if f"{r['source']}.{r['destination']}" == name)


def test_kafkas_own_example_converts_to_a_config_ferry_accepts(tmp_path: Path) -> None:
    result = convert(properties.loads(KAFKA_EXAMPLE.read_text()))
    config = tmp_path / "ferry.yaml"
    config.write_text(yaml.safe_dump(result.config))
    loaded = load_config(config)
    assert [r.name for r in loaded.routes] == ["A.B", "B.A"]
    assert all(r.naming == "prefix" and r.include[0] == ".*" for r in loaded.routes)
    assert loaded.heartbeats.interval_s == 1.0  # MirrorMaker 2 emits heartbeats every second by default
    assert loaded.clusters["A"]["bootstrap.servers"] == "A_host1:9092,A_host2:9092,A_host3:9092"
    assert {r.replication_factor for r in loaded.routes} == {1}  # replication.factor=1
    assert loaded.internal_topics.replication_factor == 1  # the internal topics' replication factors
    reported = sorted(item.key for item in result.not_converted)
    assert reported == sorted(
        [
            "offset.storage.replication.factor",
            "status.storage.replication.factor",
            "config.storage.replication.factor",
        ]
    )


def test_the_command_prints_yaml_on_stdout_and_one_line_per_unconverted_setting_on_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "import-mm2", str(KAFKA_EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (tmp_path / "ferry.yaml").write_text(done.stdout)
    load_config(tmp_path / "ferry.yaml")
    lines = done.stderr.splitlines()
    assert len(lines) == 4
    assert all(line.startswith("ferry import-mm2: not converted: ") for line in lines[:3])
    assert "ferry import-mm2: not converted: offset.storage.replication.factor=1 (Ferry keeps no Connect" in done.stderr
    # Kafka's example enables no exactly once: the note says what Ferry's default does instead.
    assert lines[3].startswith("ferry import-mm2: note: routes A.B, B.A: MirrorMaker 2 copies them at least once")


def test_the_command_refuses_a_file_without_clusters_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "mm2.properties"
    bad.write_text("A.bootstrap.servers = a:9092\n")
    done = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "import-mm2", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("ferry: ") and "no clusters" in done.stderr and len(done.stderr.splitlines()) == 1


def test_flows_run_only_when_enabled() -> None:
    config, skipped = _convert({"B->A.topics": "x"})
    assert [(r["source"], r["destination"]) for r in config["routes"]] == [("A", "B")]
    assert skipped["B->A.topics"] == "its flow is not enabled"
    with pytest.raises(Mm2Error, match="no flow is enabled"):
        convert({**BASE, "A->B.enabled": "false"})


def test_topic_filters_and_the_deprecated_blacklist() -> None:
    config, _ = _convert({"topics": "orders.*, payments", "topics.blacklist": "orders-internal"})
    assert _route(config)["include"] == ["orders.*", "payments"] and _route(config)["exclude"] == ["orders-internal"]
    config, _ = _convert({"topics": ".*", "A->B.topics": "only", "A->B.topics.exclude": "x, y"})
    assert _route(config)["include"] == ["only"] and _route(config)["exclude"] == ["x", "y"]
    config, _ = _convert({})
    assert _route(config)["include"] == [".*"] and _route(config)["exclude"] == [
        r".*[\-\.]internal",
        r".*\.replica",
        "__.*",
    ]


def test_a_java_regex_python_cannot_read_is_reported() -> None:
    result = convert({**BASE, "topics": r"ok, \p{Alpha}+"})
    assert _route(result.config)["include"] == ["ok"]
    assert [item.key for item in result.not_converted] == ["topics"]


def test_group_filters_and_checkpoints() -> None:
    config, _ = _convert({"groups": "app-.*", "groups.blacklist": "app-test"})
    assert _route(config)["groups"] == ["app-.*"] and _route(config)["groups_exclude"] == ["app-test"]
    config, _ = _convert({"emit.checkpoints.enabled": "false", "groups": "app-.*"})
    assert "groups" not in _route(config)
    config, _ = _convert(
        {
            "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "5",
            "emit.checkpoints.interval.seconds": "20",
        }
    )
    assert config["controller"]["sync_group_offsets"] is True and config["controller"]["checkpoint_interval_s"] == 5.0
    config, _ = _convert({})
    assert config["controller"]["sync_group_offsets"] is False  # MirrorMaker 2's default


def test_replication_policies() -> None:
    config, _ = _convert({})
    assert _route(config)["naming"] == "prefix"
    config, _ = _convert({"replication.policy.separator": "_", "B->A.enabled": "true"})
    assert _route(config)["naming"] == "{source}_{topic}"
    assert _route(config)["exclude"][-1] == "(?:.*_)?B_.*"  # never back to B: MirrorMaker 2's cycle rule
    config, _ = _convert({"replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    assert _route(config)["naming"] == "identity" and "loop_prevention" not in _route(config)
    _, skipped = _convert({"replication.policy.class": "com.example.Custom"})
    assert "custom policy" in skipped["replication.policy.class"]


def test_identity_routes_on_a_cycle_get_loop_prevention() -> None:
    config, _ = _convert(
        {
            "clusters": "A, B, C",
            "C.bootstrap.servers": "c:9092",
            "B->C.enabled": "true",
            "C->A.enabled": "true",
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        }
    )
    assert all(r["loop_prevention"] for r in config["routes"])
    config, _ = _convert(
        {
            "clusters": "A, B, C",
            "C.bootstrap.servers": "c:9092",
            "B->C.enabled": "true",
            "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        }
    )
    assert not any(r.get("loop_prevention") for r in config["routes"])  # a chain, no cycle


def test_heartbeats_and_intervals() -> None:
    config, _ = _convert({"emit.heartbeats.interval.seconds": "5", "refresh.topics.interval.seconds": "30"})
    assert config["heartbeats"] == {"interval_s": 5.0} and config["controller"]["observer_interval_s"] == 30.0
    config, _ = _convert({"emit.heartbeats.enabled": "false"})
    assert "heartbeats" not in config
    _, skipped = _convert({"refresh.topics.enabled": "false"})
    assert "always follows new topics" in skipped["refresh.topics.enabled"]


def test_a_flow_setting_ferry_has_once_for_all_routes_is_reported_when_it_differs() -> None:
    config, skipped = _convert({"B->A.enabled": "true", "B->A.sync.group.offsets.enabled": "true"})
    assert config["controller"]["sync_group_offsets"] is True
    assert "A->B.sync.group.offsets.enabled" not in skipped  # not set: nothing to report
    config, skipped = _convert({"B->A.enabled": "true", "A->B.refresh.topics.interval.seconds": "60"})
    assert config["controller"]["observer_interval_s"] == 60.0 and not skipped


def test_topic_configs() -> None:
    config, _ = _convert({"config.properties.exclude": r"retention\.ms, cleanup\.policy"})
    assert _route(config)["config_exclude"] == ["retention.ms", "cleanup.policy"]
    config, skipped = _convert({"config.properties.blacklist": "retention.*"})
    assert _route(config)["config_exclude"] == [] and "regular expressions" in skipped["config.properties.exclude"]
    _, skipped = _convert({"sync.topic.configs.enabled": "false"})
    assert "always follows topic configs" in skipped["sync.topic.configs.enabled"]


def test_acl_sync_maps_to_each_routes_sync_acls_and_the_shortest_interval() -> None:
    config, skipped = _convert({"B->A.enabled": "true"})
    assert [r["sync_acls"] for r in config["routes"]] == [True, True]  # MirrorMaker 2 syncs ACLs by default
    assert config["controller"]["acl_sync_interval_s"] == 600.0 and not skipped
    config, skipped = _convert(
        {
            "B->A.enabled": "true",
            "A->B.sync.topic.acls.enabled": "false",
            "sync.topic.acls.interval.seconds": "120",
            "B->A.sync.topic.acls.interval.seconds": "30",
        }
    )
    assert (_route(config)["sync_acls"], _route(config, "B.A")["sync_acls"]) == (False, True)
    assert config["controller"]["acl_sync_interval_s"] == 30.0 and not skipped
    config, skipped = _convert({"sync.topic.acls.enabled": "false", "sync.topic.acls.interval.seconds": "5"})
    assert _route(config)["sync_acls"] is False and "acl_sync_interval_s" not in config["controller"]
    assert not skipped


def test_client_security_settings() -> None:
    config, skipped = _convert(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": (
                'org.apache.kafka.common.security.scram.ScramLoginModule required username="ferry" password="s3cret";'
            ),
            "B.security.protocol": "SASL_PLAINTEXT",
            "A.ssl.truststore.type": "PEM",
            "A.ssl.truststore.location": "/ca.pem",
            "B.ssl.truststore.location": "/trust.jks",
            "B.ssl.truststore.password": "pw",
        }
    )
    a, b = config["clusters"]["A"], config["clusters"]["B"]
    assert a["security.protocol"] == "SASL_SSL" and b["security.protocol"] == "SASL_PLAINTEXT"
    assert a["sasl.username"] == b["sasl.username"] == "ferry" and a["sasl.password"] == "s3cret"
    assert a["ssl.ca.location"] == "/ca.pem" and "ssl.ca.location" not in b
    assert "JKS truststore" in skipped["B.ssl.truststore.location"] and "B.ssl.truststore.password" in skipped


def test_consumer_producer_and_admin_settings() -> None:
    config, skipped = _convert(
        {
            "A.consumer.fetch.max.wait.ms": "100",
            "A.consumer.max.poll.records": "1000",
            "B.producer.linger.ms": "20",
            "B.producer.compression.type": "zstd",
            "B.producer.max.request.size": "2000000",
            "B.admin.request.timeout.ms": "5000",
            "A.consumer.isolation.level": "read_committed",
        }
    )
    assert (
        config["clusters"]["A"]["fetch.wait.max.ms"] == "100"
        and config["clusters"]["A"]["isolation.level"] == "read_committed"
    )
    assert config["clusters"]["B"]["linger.ms"] == "20" and config["clusters"]["B"]["message.max.bytes"] == "2000000"
    assert _route(config)["compression"] == "zstd"
    assert "consume_batch" in skipped["A.consumer.max.poll.records"]
    assert "B.admin.request.timeout.ms" in skipped


def test_everything_without_a_counterpart_is_reported_with_its_reason() -> None:
    result = convert(
        {
            **BASE,
            "tasks.max": "4",
            "offset.lag.max": "10",
            "key.converter": "x",
            "made.up": "1",
            "B.offset.flush.interval.ms": "1000",
        }
    )
    why = {item.key: item.why for item in result.not_converted}
    assert set(why) == {"tasks.max", "offset.lag.max", "key.converter", "made.up", "B.offset.flush.interval.ms"}
    assert "workers" in why["tasks.max"] and why["made.up"] == "no Ferry counterpart"
    assert "commit_interval_s" in why["B.offset.flush.interval.ms"]
    assert result.not_converted[0].line().startswith("ferry import-mm2: not converted: ")


@pytest.mark.parametrize(
    ("extra", "exactly_once"),
    [
        ({"B.exactly.once.source.support": "enabled"}, True),
        ({"B.exactly.once.source.support": "preparing"}, True),  # the first step of MirrorMaker 2's upgrade to it
        ({"exactly.once.source.support": "Enabled"}, True),  # at the top level: every target
        ({"exactly.once.source.support": "enabled", "B.exactly.once.source.support": "disabled"}, False),
        ({"A.exactly.once.source.support": "enabled"}, False),  # A is no flow's target here
        ({}, False),
    ],
    ids=["enabled", "preparing", "top-level", "target-disabled", "source-only", "absent"],
)
def test_mirrormakers_exactly_once_source_support_makes_the_route_exactly_once(
    extra: dict[str, str], exactly_once: bool
) -> None:
    result = convert({**BASE, **extra})
    parse_config(result.config)
    assert ("delivery_guarantee" in _route(result.config)) is exactly_once
    if exactly_once:
        assert _route(result.config)["delivery_guarantee"] == "exactly_once"
        assert result.notes == []
    else:
        (note,) = result.notes
        assert note.line().startswith("ferry import-mm2: note: route A.B: MirrorMaker 2 copies it at least once")
        assert "exactly once by default from 2.0.0" in note.text
        assert "delivery_guarantee: at_least_once" in note.text and "copied twice" in note.text
    assert result.not_converted == []  # read, whatever its value: never reported as without a counterpart


def test_one_note_names_every_route_mirrormaker_copies_at_least_once() -> None:
    result = convert(
        {
            **BASE,
            "clusters": "A, B, C",
            "C.bootstrap.servers": "c:9092",
            "A->C.enabled": "true",
            "B->A.enabled": "true",
            "C.exactly.once.source.support": "enabled",
        }
    )
    parse_config(result.config)
    guarantees = {f"{r['source']}.{r['destination']}": r.get("delivery_guarantee") for r in result.config["routes"]}
    assert guarantees == {"A.B": None, "A.C": "exactly_once", "B.A": None}
    (note,) = result.notes
    assert note.text.startswith("routes A.B, B.A: MirrorMaker 2 copies them at least once")
    assert "enabled for A, B)" in note.text


def test_a_value_mirrormaker_would_refuse_for_exactly_once_is_reported() -> None:
    result = convert({**BASE, "B.exactly.once.source.support": "yes"})
    assert [(item.key, item.why) for item in result.not_converted] == [
        ("B.exactly.once.source.support", "MirrorMaker 2 takes enabled, preparing or disabled")
    ]
    assert "delivery_guarantee" not in _route(result.config) and len(result.notes) == 1


def test_takeover_names_mirrormaker2s_topics() -> None:
    config, _ = _convert({"offset-syncs.topic.location": "target"}, takeover=True)
    assert _route(config)["mirrormaker2"] == {
        "source_alias": "A",
        "target_alias": "B",
        "offsets_topic": "mm2-offsets.A.internal",
        "offset_syncs_topic": "mm2-offset-syncs.B.internal",
        "offset_syncs_on": "destination",
        "checkpoints_topic": "A.checkpoints.internal",
    }
    config, _ = _convert({"replication.policy.separator": "_", "offset.storage.topic": "my-offsets"}, takeover=True)
    assert _route(config)["mirrormaker2"]["offset_syncs_topic"] == "mm2-offset-syncs_B_internal"
    assert _route(config)["mirrormaker2"]["offsets_topic"] == "my-offsets"


def test_bad_inputs() -> None:
    with pytest.raises(Mm2Error, match="no clusters"):
        convert({"A.bootstrap.servers": "a"})
    with pytest.raises(Mm2Error, match=r"B\.bootstrap\.servers"):
        convert({"clusters": "A, B", "A.bootstrap.servers": "a", "A->B.enabled": "true"})
    with pytest.raises(Mm2Error, match="alias"):
        convert({"clusters": "A.1", "A.1.bootstrap.servers": "a"})


@pytest.mark.parametrize(
    ("jaas", "expected"),
    [
        (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
            {"sasl.username": "u", "sasl.password": "p"},
        ),
        (
            'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true keyTab="/k.keytab" '
            'principal="ferry@EX";',
            {"sasl.kerberos.principal": "ferry@EX", "sasl.kerberos.keytab": "/k.keytab"},
        ),
        (
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'clientId="c" clientSecret="s";',
            {
                "sasl.oauthbearer.client.id": "c",
                "sasl.oauthbearer.client.secret": "s",
                "sasl.oauthbearer.method": "oidc",
            },
        ),
    ],
)
def test_jaas_lines(jaas: str, expected: dict[str, str]) -> None:
    assert clients.translate("sasl.jaas.config", jaas, "common", {}) == expected


def test_a_jaas_line_ferry_cannot_read_says_why() -> None:
    assert isinstance(clients.translate("sasl.jaas.config", "garbage", "common", {}), str)


def test_replication_factors_map_to_the_routes_and_to_ferrys_own_topics() -> None:
    config, why = _convert({"replication.factor": "3", "B->A.enabled": "true", "B->A.replication.factor": "2"})
    assert _route(config)["replication_factor"] == 3 and _route(config, "B.A")["replication_factor"] == 2
    assert "internal_topics" not in config and why == {}  # none set: Ferry's default (3)
    config, why = _convert({"checkpoints.topic.replication.factor": "2", "heartbeats.topic.replication.factor": "3"})
    assert config["internal_topics"] == {"replication_factor": 3} and "replication_factor" not in _route(config)
    config, why = _convert(
        {
            "offset-syncs.topic.replication.factor": "2",
            "A->B.checkpoints.topic.replication.factor": "4",
            "B->A.enabled": "true",
            "B->A.heartbeats.topic.replication.factor": "1",
        }
    )
    # A flow's own goes to its target, never below the top-level one
    assert config["internal_topics"] == {"replication_factor": 2, "clusters": {"B": 4}}
    assert why == {}


def test_a_replication_factor_ferry_cannot_take_is_reported() -> None:
    config, why = _convert({"replication.factor": "-1", "checkpoints.topic.replication.factor": "x"})
    assert "replication_factor" not in _route(config) and "internal_topics" not in config
    assert "source topic's replica count" in why["replication.factor"]
    assert why["checkpoints.topic.replication.factor"] == "not a number"
