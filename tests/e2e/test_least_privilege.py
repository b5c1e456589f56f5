"""Ferry on clusters that enforce ACLs, with exactly the ACLs `ferry acls` prints.

Two extra clusters of the local stack run KRaft's StandardAuthorizer with
``allow.everyone.if.no.acl.found=false``; Ferry connects as the SASL_SSL user ``ferry``, the test
harness as the super user (PLAINTEXT). The ACLs are applied by Kafka's own AclCommand with the
lines `ferry acls` prints (only the bootstrap address is swapped for the super user's listener),
the clusters then hold nothing more for ``User:ferry``, and real controller and worker processes
mirror a topic with group checkpoints and sync, heartbeats and the exact offset map, without a
single authorization denial in the brokers' logs.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from ferry.common.config import load_config
from ferry.common.paths import jars_dir
from ferry.common.preflight import acls
from ferry.common.preflight.grants import check_granted, granted_acls
from ferry.devstack import stack as devstack
from ferry.devstack.support import commit_offset, committed_offset
from tests.harness.authorizer import authorizer_pair
from tests.harness.processes import FerryProcess, Fleet, RecordLedger, wait_until

SOURCE, DESTINATION = "aclsrc", "acldst"
# Far from the other extra clusters' ports, so this test never meets theirs.
PORTS = {SOURCE: 31092, DESTINATION: 31102}
PARTITIONS = 3
RECORDS = 3_000


@pytest.fixture
def guarded(local_stack: devstack.Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[devstack.Stack]:
    """Clusters aclsrc and acldst with an authorizer; stopped again if this test started them."""
    with authorizer_pair(local_stack, monkeypatch, PORTS) as stack:
        yield stack


def _super(stack: devstack.Stack, cluster: str) -> dict[str, str]:
    return {"bootstrap.servers": stack.bootstrap(cluster)}


def _revoke_everything(stack: devstack.Stack) -> None:
    """Earlier runs' ACLs for User:ferry go: the cluster then holds only what this run adds."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from ferry.common.kafka import clients as kafka_clients

    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, "User:ferry", None, AclOperation.ANY, AclPermissionType.ANY
    )
    for cluster in (SOURCE, DESTINATION):
        admin = kafka_clients.admin(_super(stack, cluster))
        for future in admin.delete_acls([every]).values():
            future.result(30)


def _apply(stack: devstack.Stack, lines: list[str]) -> None:
    """Runs each printed kafka-acls.sh line with Kafka's AclCommand against the super user's listener."""
    addresses = {server.sasl_ssl_address: server.address for server in stack.kafka}
    commands = []
    for line in lines:
        words = shlex.split(line)
        assert words[0] == "kafka-acls.sh" and words[1] == "--bootstrap-server", line
        words[2] = addresses[words[2]]
        commands.append(
            [
                "java",
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{jars_dir('kafka')}/*",
                "org.apache.kafka.tools.AclCommand",
                *words[1:],
            ]
        )

    def run(command: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(command, capture_output=True, text=True, timeout=180)

    with ThreadPoolExecutor(2) as pool:
        for command, done in zip(commands, pool.map(run, commands), strict=True):
            assert done.returncode == 0, f"{shlex.join(command)}\n{done.stdout}\n{done.stderr}"


def test_ferry_mirrors_with_exactly_the_acls_it_prints(
    fleet: Fleet,
    guarded: devstack.Stack,
    topic_name: Callable[[str], str],
) -> None:
    topic = topic_name("acl")
    group = f"app-{topic[-8:]}"
    fleet.stack = guarded
    fleet.extra = {
        "clusters": {SOURCE: guarded.secured(SOURCE), DESTINATION: guarded.secured(DESTINATION)},
        "routes": [{"source": SOURCE, "destination": DESTINATION, "include": [topic], "groups": ["app-.*"]}],
        "heartbeats": {"interval_s": 1},
        "controller": {"observer_interval_s": 1, "checkpoint_interval_s": 1, "checkpoint_margin_s": 0},
    }
    fleet.write_config()
    config = load_config(fleet.config_path)
    printed = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "acls", "--config", str(fleet.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    lines = [line for line in printed.stdout.splitlines() if line.startswith("kafka-acls.sh")]
    assert lines == [line for line in acls.command_lines(config) if not line.startswith("#")]

    _revoke_everything(guarded)
    admins = {name: _super(guarded, name) for name in (SOURCE, DESTINATION)}
    before = check_granted(config, admin_clusters=admins)
    assert {name: len(answer.missing) for name, answer in before.items()} == {
        name: sum(1 for acl in acls.required_acls(config) if acl.cluster == name) for name in (SOURCE, DESTINATION)
    }
    # Ferry's own principal may not describe ACLs (it needs no Describe on the cluster): one line, no exception.
    assert all("may not describe ACLs" in (answer.error or "") for answer in check_granted(config).values())
    _apply(guarded, lines)
    # The clusters grant User:ferry exactly what `ferry acls` printed: nothing missing, nothing more.
    required = acls.required_acls(config)
    granted = [acl for name in (SOURCE, DESTINATION) for acl in granted_acls(name, admins[name], "User:ferry")]
    assert sorted(granted) == required
    assert all(answer.ok for answer in check_granted(config, admin_clusters=admins).values())

    logs = {name: guarded.cluster(name).log_file for name in (SOURCE, DESTINATION)}
    log_sizes = {name: path.stat().st_size for name, path in logs.items()}
    ledger = RecordLedger(guarded, topic, PARTITIONS, src=admins[SOURCE], dst=admins[DESTINATION])
    ledger.create_source_topic()
    ledger.produce(RECORDS)
    commit_offset(admins[SOURCE], group, topic, 700)  # an application's position on the source
    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)
    try:
        _mirror_and_check(fleet, controller, ledger, group, topic, admins, logs, log_sizes)
    finally:
        fleet.stop_all()  # before the clusters stop: a client of a stopping broker takes long to close


def _mirror_and_check(
    fleet: Fleet,
    controller: FerryProcess,
    ledger: RecordLedger,
    group: str,
    topic: str,
    admins: dict[str, dict[str, str]],
    logs: dict[str, Path],
    log_sizes: dict[str, int],
) -> None:
    ledger.wait_for_destination(timeout=180)
    assert ledger.check(allow_duplicates=False)["records"] == RECORDS
    wait_until(
        lambda: committed_offset(admins[DESTINATION], group, topic) == 700,
        90,
        "the group's offset translated and committed on the destination",
    )

    def heartbeat_latency() -> float | None:
        answer = requests.get(f"{controller.url}/heartbeats", timeout=5).json()
        return answer["routes"][f"{SOURCE}.{DESTINATION}"]["latencyS"]

    wait_until(heartbeat_latency, 60, "a heartbeat over the route")
    assert len(fleet.online_by_worker(controller, topic)) == PARTITIONS, fleet.topic_view(controller, topic)

    # Nothing Ferry did was refused: the authorizers log every denied request.
    for name, path in logs.items():
        with path.open("rb") as log:
            log.seek(log_sizes[name])
            denied = [
                line
                for line in log.read().decode(errors="replace").splitlines()
                if "User:ferry" in line and "Denied" in line
            ]
        assert not denied, f"{name}: {denied[:5]}"


def test_with_sync_acls_off_ferry_acls_prints_the_applications_acls_to_grant_by_hand(
    fleet: Fleet, guarded: devstack.Stack, topic_name: Callable[[str], str], tmp_path: Path
) -> None:
    """Least privilege: nothing syncs, so `ferry acls --applications` reads the source (as the super user) and
    prints what the sync would have copied; Kafka's own AclCommand applies the lines, and the destination then
    holds the application's READ on the copy (and its DENY, with its host), never its WRITE."""
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    from ferry.common.kafka import clients as kafka_clients
    from ferry.devstack.support import create_topics

    topic = topic_name("apps")
    app = f"User:app-{topic[-12:]}"  # this run's own principal: ACLs of earlier runs never count
    fleet.stack = guarded
    fleet.extra = {
        "clusters": {SOURCE: guarded.secured(SOURCE), DESTINATION: guarded.secured(DESTINATION)},
        "routes": [{"source": SOURCE, "destination": DESTINATION, "include": [f"{topic}.*"], "sync_acls": False}],
    }
    fleet.write_config()
    src = kafka_clients.admin(_super(guarded, SOURCE))
    create_topics(src, [NewTopic(topic, 1, 1), NewTopic(f"{topic}-secret", 1, 1)])

    def binding(name: str, operation: AclOperation, permission: AclPermissionType, host: str = "*") -> AclBinding:
        return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, app, host, operation, permission)

    wanted = [
        binding(topic, AclOperation.READ, AclPermissionType.ALLOW),
        binding(topic, AclOperation.WRITE, AclPermissionType.ALLOW),
        binding(f"{topic}-secret", AclOperation.READ, AclPermissionType.DENY, "10.9.8.7"),
    ]
    for future in src.create_acls(wanted).values():
        future.result(30)
    admin_config = tmp_path / "admin.properties"
    admin_config.write_text("".join(f"{key}={value}\n" for key, value in _super(guarded, SOURCE).items()))

    printed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ferry.cli",
            "acls",
            "--config",
            str(fleet.config_path),
            "--applications",
            "--admin-config",
            f"{SOURCE}={admin_config}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert printed.returncode == 0, printed.stderr
    ferrys = [line for line in printed.stdout.splitlines() if line.startswith("kafka-acls.sh")]
    assert not any("--operation Alter --cluster" in line for line in ferrys)  # least privilege: no Alter
    applications = [line for line in ferrys if app in line]
    at_failover = [line[2:] for line in printed.stdout.splitlines() if line.startswith("# kafka-acls.sh")]
    assert len(applications) == 2 and len(at_failover) == 1 and "--operation Write" in at_failover[0]
    _apply(guarded, applications)

    dst = kafka_clients.admin(_super(guarded, DESTINATION))
    every = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, app, None, AclOperation.ANY, AclPermissionType.ANY
    )
    held = dst.describe_acls(every, request_timeout=10).result(15)
    assert {(b.name, b.host, b.operation.name, b.permission_type.name) for b in held} == {
        (topic, "*", "READ", "ALLOW"),
        (f"{topic}-secret", "10.9.8.7", "READ", "DENY"),
    }
