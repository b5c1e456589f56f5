"""The Kafka ACLs a config needs (common/preflight/acls.py): per feature, per cluster, as kafka-acls.sh lines."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry import cli
from ferry.common.config import parse_config
from ferry.common.errors import ConfigError
from ferry.common.paths import DEV_DIR_ENV
from ferry.common.preflight import acls
from ferry.common.preflight.acls import (
    ANY,
    CLUSTER,
    CLUSTER_NAME,
    GROUP,
    LITERAL,
    PREFIXED,
    TOPIC,
    TRANSACTIONAL_ID,
    Acl,
    Resource,
)
from ferry.devstack import server_files
from ferry.devstack import stack as devstack

SASL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "ferry",
    "sasl.password": "x",
}


def _config(**sections: Any) -> Any:
    data: dict[str, Any] = {
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "clusters": {
            "src": {"bootstrap.servers": "src:9094", **SASL},
            "dst": {"bootstrap.servers": "dst:9094", **SASL},
        },
        # At least once unless a test says otherwise: what each test expects does not follow the default.
        "routes": [
            {
                "source": "src",
                "destination": "dst",
                "include": ["orders"],
                "sync_acls": False,
                "delivery_guarantee": "at_least_once",
            }
        ],
        "controller": {"checkpoint_interval_s": 0},
    }
    data.update(sections)
    return parse_config(data)


def _on(found: list[Acl], cluster: str) -> set[tuple[str, str, str, str]]:
    return {(a.resource.type, a.resource.name, a.resource.pattern, a.operation) for a in found if a.cluster == cluster}


@pytest.mark.parametrize(
    ("regex", "expected"),
    [
        ("orders", [(LITERAL, "orders")]),
        (r"orders\.eu", [(LITERAL, "orders.eu")]),
        ("^orders$", [(LITERAL, "orders")]),
        ("orders-.*", [(PREFIXED, "orders-")]),
        ("orders-(eu|us)", [(PREFIXED, "orders-")]),
        ("orders-[0-9]+", [(PREFIXED, "orders-")]),
        ("orderss?", [(PREFIXED, "orders")]),
        (r"orders\d", [(PREFIXED, "orders")]),
        ("a|b.*", [(LITERAL, "a"), (PREFIXED, "b")]),
        (".*orders", [(LITERAL, ANY)]),
        ("[ab]x", [(LITERAL, ANY)]),
    ],
)
def test_a_regular_expression_becomes_the_literal_names_or_prefixes_it_can_match(
    regex: str, expected: list[Any]
) -> None:
    assert acls.name_patterns(regex) == expected


_PIECES = st.sampled_from(["a", "b", "-", r"\.", ".", ".*", "x+", "y?", "[ab]", "(c|d)", "e{2}", r"\d", "|"])


@given(st.lists(_PIECES, min_size=1, max_size=6), st.text("abcdexy.-0123", max_size=8))
def test_every_name_a_regex_matches_is_covered_by_its_patterns(pieces: list[str], name: str) -> None:
    regex = "".join(pieces)
    try:
        compiled = re.compile(regex)
    except re.error:
        return
    if not compiled.fullmatch(name):
        return
    patterns = acls.name_patterns(regex)
    assert any(
        (kind == LITERAL and value in (name, ANY)) or (kind == PREFIXED and name.startswith(value))
        for kind, value in patterns
    ), (regex, name, patterns)


def test_a_plain_route_reads_the_source_and_writes_the_destination_with_its_group() -> None:
    found = acls.required_acls(_config())
    assert _on(found, "src") == {
        (TOPIC, "orders", LITERAL, "Read"),
        (TOPIC, "orders", LITERAL, "DescribeConfigs"),
        (GROUP, "ferry.src.dst", LITERAL, "Read"),
        (GROUP, "ferry.src.dst.probe", LITERAL, "Describe"),
    }
    assert _on(found, "dst") == {
        *((TOPIC, "orders", LITERAL, op) for op in ("Read", "Write", "Create", "Alter", "AlterConfigs")),
        (CLUSTER, CLUSTER_NAME, LITERAL, "IdempotentWrite"),
        (GROUP, "ferry.src.dst.lookback", LITERAL, "Describe"),
        (TOPIC, "__ferry_offset_map", LITERAL, "Write"),
        (TOPIC, "__ferry_offset_map", LITERAL, "Create"),
    }


def test_an_exactly_once_route_writes_and_fences_its_writer_ids_on_the_destination() -> None:
    config = _config()
    route = config.routes[0].model_copy(update={"delivery_guarantee": "exactly_once"})
    found = acls.required_acls(config.model_copy(update={"routes": [route]}))
    assert {a for a in _on(found, "dst") if a[0] == TRANSACTIONAL_ID} == {
        (TRANSACTIONAL_ID, "ferry.src.dst.", PREFIXED, "Write"),
        (TRANSACTIONAL_ID, "ferry.src.dst.", PREFIXED, "Describe"),
    }
    assert not {a for a in _on(acls.required_acls(config), "dst") if a[0] == TRANSACTIONAL_ID}


def test_renaming_routes_grant_the_destination_names() -> None:
    routes = [
        {"source": "src", "destination": "dst", "naming": "prefix", "include": ["orders-.*", "pay"]},
        {"source": "dst", "destination": "src", "naming": "{topic}.{source}-copy", "include": ["x.*"]},
    ]
    found = acls.required_acls(_config(routes=routes))
    destination_topics = {
        (name, pattern) for kind, name, pattern, op in _on(found, "dst") if kind == TOPIC and op == "Create"
    }
    assert destination_topics >= {("src.orders-", PREFIXED), ("src.pay", LITERAL)}
    assert (TOPIC, "x", PREFIXED, "Create") in _on(found, "src")  # x<anything>.dst-copy starts with x
    assert (TOPIC, "pay.dst-copy", LITERAL, "Create") not in _on(found, "src")


def test_checkpoints_and_group_sync_need_the_groups_on_both_sides_and_the_map_and_checkpoint_topics() -> None:
    config = _config(
        routes=[{"source": "src", "destination": "dst", "include": ["orders"], "groups": ["app-.*"]}],
        controller={"checkpoint_interval_s": 10},
    )
    found = acls.required_acls(config)
    assert {(GROUP, "app-", PREFIXED, "Describe"), (GROUP, "ferry.checkpoints.", PREFIXED, "Describe")} <= _on(
        found, "src"
    )
    assert {
        (GROUP, "app-", PREFIXED, "Read"),
        (TOPIC, "__ferry_offset_map", LITERAL, "Read"),
        (TOPIC, "__ferry_checkpoints", LITERAL, "Write"),
        (TOPIC, "__ferry_checkpoints", LITERAL, "Create"),
        (GROUP, "ferry-", PREFIXED, "Describe"),
    } <= _on(found, "dst")
    no_sync = acls.required_acls(
        _config(
            routes=config.model_dump()["routes"], controller={"checkpoint_interval_s": 10, "sync_group_offsets": False}
        )
    )
    assert (GROUP, "app-", PREFIXED, "Read") not in _on(no_sync, "dst")


def test_heartbeats_are_created_everywhere_written_on_sources_and_read_everywhere() -> None:
    found = acls.required_acls(_config(heartbeats={"interval_s": 5}))
    assert {(TOPIC, "ferry.heartbeats", LITERAL, op) for op in ("Create", "Read", "Write")} <= _on(found, "src")
    assert (GROUP, "ferry.heartbeats.reader.src", LITERAL, "Describe") in _on(found, "src")
    assert {
        (TOPIC, "ferry.heartbeats", LITERAL, "Read"),
        (GROUP, "ferry.heartbeats.reader.dst", LITERAL, "Describe"),
    } <= _on(found, "dst")


def test_acl_sync_describes_acls_on_the_source_and_alters_them_on_the_destination() -> None:
    routes = [{"source": "src", "destination": "dst", "include": ["orders"], "groups": ["app-.*"]}]
    found = acls.required_acls(_config(routes=routes))  # sync_acls is on by default; checkpoints are off here
    assert {(CLUSTER, CLUSTER_NAME, LITERAL, "Describe"), (GROUP, "app-", PREFIXED, "Describe")} <= _on(found, "src")
    assert (CLUSTER, CLUSTER_NAME, LITERAL, "Alter") in _on(found, "dst")
    plain = acls.required_acls(_config(routes=[{**routes[0], "sync_acls": False}]))
    assert not any(a.resource.type == CLUSTER and a.operation in ("Describe", "Alter") for a in plain)


def test_a_tree_distributor_may_write_to_every_leaf_of_its_subtree() -> None:
    clusters = {name: {"bootstrap.servers": f"{name}:9094", **SASL} for name in "abcd"}
    config = _config(clusters=clusters, routes=[], tree={"layout": "((a,b),(c,d))", "include": ["t"]})
    found = acls.required_acls(config)
    writers = {a.cluster for a in found if a.resource == Resource(TOPIC, "t") and a.operation == "Write"}
    assert writers == {"a", "b", "c", "d"}


def test_topics_added_by_post_are_granted_when_named() -> None:
    config = _config(routes=[{"source": "src", "destination": "dst"}])
    assert acls.unmatched_routes(config) == ["src.dst"]
    found = acls.required_acls(config, topics=["payments"])
    assert (TOPIC, "payments", LITERAL, "Read") in _on(found, "src")
    assert acls.unmatched_routes(config, ["payments"]) == []


def test_the_lines_are_kafka_acls_commands_per_cluster_with_the_sasl_user() -> None:
    lines = acls.command_lines(_config(heartbeats={"interval_s": 5}))
    assert lines[0] == "# cluster dst: principal User:ferry"
    assert (
        "kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:ferry "
        "--operation Read --operation Write "
        "--operation Create --operation Alter --operation AlterConfigs --topic orders --resource-pattern-type literal"
    ) in lines
    assert (
        "kafka-acls.sh --bootstrap-server src:9094 --add --allow-principal User:ferry --operation IdempotentWrite "
        "--cluster"
    ) in lines
    for line in lines:
        if not line.startswith("#"):
            assert shlex.split(line)[:6] == [
                "kafka-acls.sh",
                "--bootstrap-server",
                shlex.split(line)[2],
                "--add",
                "--allow-principal",
                "User:ferry",
            ]
    assert acls.command_lines(_config(), principal="mirror")[0] == "# cluster dst: principal User:mirror"


def test_a_cluster_without_sasl_username_needs_principal() -> None:
    config = _config(clusters={"src": {"bootstrap.servers": "src:9092"}, "dst": {"bootstrap.servers": "dst:9092"}})
    with pytest.raises(ConfigError, match="--principal"):
        acls.command_lines(config)
    assert "User:ferry" in acls.command_lines(config, principal="User:ferry")[0]


def test_missing_knows_wildcards_prefixes_and_implied_operations() -> None:
    need = [
        Acl("dst", Resource(TOPIC, "src.orders"), "Write"),
        Acl("dst", Resource(GROUP, "g"), "Describe"),
        Acl("dst", Resource(TOPIC, "src.", PREFIXED), "Create"),
        Acl("dst", Resource(TOPIC, "x"), "DescribeConfigs"),
    ]
    granted = [
        Acl("dst", Resource(TOPIC, "src", PREFIXED), "Write"),
        Acl("dst", Resource(GROUP, ANY), "Read"),
        Acl("dst", Resource(TOPIC, "src.o", PREFIXED), "Create"),
        Acl("src", Resource(TOPIC, ANY), "All"),
    ]
    assert acls.missing(need, granted) == [need[2], need[3]]  # a longer prefix does not cover a shorter one
    assert acls.missing(need, [*granted, Acl("dst", Resource(TOPIC, ANY), "All")]) == []


def test_security_md_lists_the_acls_of_its_example_config() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    example = re.search(r"<!-- acls-example-config -->\n```yaml\n(.*?)```", doc, re.S)
    listed = re.search(r"<!-- acls-example-output -->\n```\n(.*?)```", doc, re.S)
    assert example and listed, "docs/security.md lost its ACL example markers"
    import yaml

    config = parse_config(yaml.safe_load(example.group(1)))
    assert listed.group(1).splitlines() == acls.command_lines(config)


def test_dev_clusters_with_an_authorizer_deny_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    stack = devstack.stack_from_env().with_clusters(["guarded"], authorizer=True)
    props = dict(line.split("=", 1) for line in server_files.kafka_config(stack.cluster("guarded")).splitlines())
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:ANONYMOUS"
    assert "authorizer.class.name" not in server_files.kafka_config(stack.src)


def test_stopped_extra_clusters_can_be_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEV_DIR_ENV, str(tmp_path))
    devstack.record_extra(devstack.stack_from_env().with_clusters(["a", "guarded"], authorizer=True))
    devstack.forget_extra(["guarded"])
    assert [s.name for s in devstack.stack_from_env(recorded=True).extra] == ["a"]


def test_missing_bindings_print_as_the_lines_that_grant_them() -> None:
    config = _config()
    needed = acls.required_acls(config)
    granted = [a for a in needed if a.operation != "Create"]
    lines = acls.lines_for(config, acls.missing(needed, granted))
    assert lines == [
        "# cluster dst: principal User:ferry",
        "kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:ferry --operation Create "
        "--topic __ferry_offset_map --resource-pattern-type literal",
        "kafka-acls.sh --bootstrap-server dst:9094 --add --allow-principal User:ferry --operation Create "
        "--topic orders --resource-pattern-type literal",
    ]


# A config whose secrets are all placeholders that cannot be resolved where `ferry acls` runs.
UNSET_SECRETS = """
zookeeper:
  connect: 127.0.0.1:2181
  auth: {digest: "${env:FERRY_TEST_UNSET_ZK_DIGEST}"}
clusters:
  src: {bootstrap.servers: "src:9094", security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512,
        sasl.username: ferry, sasl.password: "${env:FERRY_TEST_UNSET_SRC_PASSWORD}"}
  dst: {bootstrap.servers: "dst:9094", security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512,
        sasl.username: ferry, sasl.password: "${file:/nonexistent/ferry/dst.password}"}
routes: [{source: src, destination: dst, include: [orders]}]
controller:
  checkpoint_interval_s: 0
  auth: {tokens: [{name: ops, value: "${env:FERRY_TEST_UNSET_TOKEN}"}]}
"""


def _acls_cli(tmp_path: Path, text: str, *args: str) -> int:
    path = tmp_path / "ferry.yaml"
    path.write_text(text)
    return cli.main(["acls", "--config", str(path), *args])


def test_ferry_acls_needs_none_of_the_secrets_it_does_not_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _acls_cli(tmp_path, UNSET_SECRETS) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "# cluster dst: principal User:ferry"
    assert "kafka-acls.sh --bootstrap-server src:9094 --add --allow-principal User:ferry --operation Read" in out


def test_ferry_acls_still_refuses_a_malformed_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    malformed = UNSET_SECRETS.replace("destination: dst", "destination: elsewhere").replace(
        "${file:/nonexistent", "${vault:/nonexistent"
    )
    assert _acls_cli(tmp_path, malformed) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ferry: {tmp_path / 'ferry.yaml'} is invalid: ")
    assert "routes.0.destination: unknown cluster 'elsewhere'" in err
    assert "clusters.dst.sasl.password: unknown placeholder '${vault:/nonexistent/ferry/dst.password}'" in err
    assert "FERRY_TEST_UNSET" not in err  # what is only unavailable here is no problem


def test_a_value_ferry_acls_prints_must_resolve(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unset_user = UNSET_SECRETS.replace("sasl.username: ferry,", 'sasl.username: "${env:FERRY_TEST_UNSET_USER}",', 1)
    assert _acls_cli(tmp_path, unset_user) == 2
    assert capsys.readouterr().err == (
        "ferry: clusters.src.sasl.username: ${env:FERRY_TEST_UNSET_USER}: the environment variable "
        "FERRY_TEST_UNSET_USER is not set (or name Ferry's principal with --principal)\n"
    )
    assert _acls_cli(tmp_path, unset_user, "--principal", "mirror") == 0
    assert "--allow-principal User:mirror" in capsys.readouterr().out
    unset_bootstrap = UNSET_SECRETS.replace('"dst:9094"', '"${env:FERRY_TEST_UNSET_BOOTSTRAP}"')
    assert _acls_cli(tmp_path, unset_bootstrap) == 2
    assert capsys.readouterr().err == (
        "ferry: clusters.dst.bootstrap.servers: ${env:FERRY_TEST_UNSET_BOOTSTRAP}: the environment variable "
        "FERRY_TEST_UNSET_BOOTSTRAP is not set\n"
    )
