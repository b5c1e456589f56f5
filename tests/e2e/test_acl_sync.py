"""ACL sync per route on clusters that enforce ACLs: READ reaches the copy, WRITE only at failover, and the
restore takes back exactly what the failover granted.

Two extra clusters of the local stack run KRaft's StandardAuthorizer (as in
``test_least_privilege.py``, on ports of their own); Ferry and the test connect as the super user
(PLAINTEXT). The route names topics with ``prefix``, so every synced topic ACL is renamed. The
principals are this test's own, so ACLs left by an earlier run never count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from tests.harness.authorizer import authorizer_pair
from tests.harness.processes import Fleet, wait_until

SOURCE, DESTINATION = "aclsyncsrc", "aclsyncdst"
ROUTE = f"{SOURCE}.{DESTINATION}"
# Far from the other extra clusters' ports (test_least_privilege's 31092/31102, the drills' 31292/31302).
PORTS = {SOURCE: 31492, DESTINATION: 31502}
INTERVAL_S = 1.0
_ANY: Any = None  # a filter's "any": None, which confluent-kafka's annotations do not admit


@pytest.fixture
def guarded(local_stack: devstack.Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[devstack.Stack]:
    """Clusters aclsyncsrc and aclsyncdst with an authorizer; stopped again if this test started them."""
    with authorizer_pair(local_stack, monkeypatch, PORTS) as stack:
        yield stack


def _acl(kind: ResourceType, name: str, principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*", operation, AclPermissionType.ALLOW)


def _add(admin: AdminClient, *acls: AclBinding) -> None:
    for future in admin.create_acls(list(acls)).values():
        future.result(30)


def _held(admin: AdminClient, principal: str) -> set[tuple[str, str, str]]:
    """(resource type, name, operation) of every binding the cluster holds for ``principal``."""
    wanted = AclBindingFilter(
        ResourceType.ANY, _ANY, ResourcePatternType.ANY, principal, _ANY, AclOperation.ANY, AclPermissionType.ANY
    )
    found = admin.describe_acls(wanted, request_timeout=10).result(15)
    return {(b.restype.name, b.name, b.operation.name) for b in found}


def _ferry(fleet: Fleet, *args: str) -> Any:
    """A runbook command, as a script runs it; its JSON answer."""
    done = subprocess.run(
        [sys.executable, "-m", "ferry.cli", *args, "--config", str(fleet.config_path)],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_read_acls_reach_the_copy_within_an_interval_write_only_at_failover_until_the_restore(
    fleet: Fleet, guarded: devstack.Stack, topic_name: Callable[[str], str]
) -> None:
    topic = topic_name("acl")
    copy = f"{SOURCE}.{topic}"
    suffix = topic[-12:]
    reader, writer, late = f"User:reader-{suffix}", f"User:writer-{suffix}", f"User:late-{suffix}"
    group = f"app-{suffix}"
    src = AdminClient({"bootstrap.servers": guarded.bootstrap(SOURCE)})
    dst = AdminClient({"bootstrap.servers": guarded.bootstrap(DESTINATION)})
    create_topics(src, [NewTopic(topic, 1, 1)])
    _add(
        src,
        _acl(ResourceType.TOPIC, topic, reader, AclOperation.READ),
        _acl(ResourceType.GROUP, group, reader, AclOperation.READ),
        _acl(ResourceType.TOPIC, topic, writer, AclOperation.WRITE),
        _acl(ResourceType.TOPIC, topic, writer, AclOperation.DESCRIBE),
    )
    fleet.stack = guarded
    fleet.extra = {
        "clusters": {name: {"bootstrap.servers": guarded.bootstrap(name)} for name in (SOURCE, DESTINATION)},
        "routes": [
            {"source": SOURCE, "destination": DESTINATION, "naming": "prefix", "include": [topic], "groups": ["app-.*"]}
        ],
        "controller": {
            "acl_sync_interval_s": INTERVAL_S,
            "observer_interval_s": 1,
            "lag_interval_s": 1,
            "checkpoint_interval_s": 1,
        },
    }
    fleet.write_config()
    controller = fleet.start_controller("c1")
    fleet.start_worker("w1")
    fleet.wait_for_leader(controller)

    # The source's READ (topic renamed, group as it is) and the writer's DESCRIBE reach the destination.
    wait_until(
        lambda: _held(dst, reader) == {("TOPIC", copy, "READ"), ("GROUP", group, "READ")},
        60,
        "the source's READ ACLs on the destination",
    )
    wait_until(lambda: _held(dst, writer) == {("TOPIC", copy, "DESCRIBE")}, 30, "the writer's DESCRIBE")

    # An ACL added on the source now appears within an interval or so (a busy host: a few).
    _add(src, _acl(ResourceType.TOPIC, topic, late, AclOperation.READ))
    wait_until(lambda: _held(dst, late) == {("TOPIC", copy, "READ")}, 10 * INTERVAL_S, "a new READ ACL")
    # Syncs ran after the WRITE was on the source: it never reached the copy.
    assert ("TOPIC", copy, "WRITE") not in _held(dst, writer)

    answer = requests.post(
        f"{controller.url}/routes/{ROUTE}/failover", json={"planned": True, "quietS": 1, "timeoutS": 60}, timeout=120
    )
    assert answer.status_code == 200, answer.text
    granted = answer.json()["report"]["acls"]
    assert granted["from"] == "source" and granted["errors"] == [], granted
    assert {(row["principal"], row["name"], row["operation"]) for row in granted["granted"]} == {
        (writer, copy, "WRITE")
    }
    assert _held(dst, writer) == {("TOPIC", copy, "WRITE"), ("TOPIC", copy, "DESCRIBE")}

    # The producers are back on the source: the restore (another process, from the failover's node in
    # ZooKeeper) revokes the WRITE the failover granted, and nothing the sync created.
    restored = _ferry(fleet, "failback", "--route", ROUTE, "--restore")
    assert restored["state"] == "ACTIVE" and restored["acls"]["errors"] == [], restored
    assert {(row["principal"], row["name"], row["operation"]) for row in restored["acls"]["revoked"]} == {
        (writer, copy, "WRITE")
    }
    assert _held(dst, writer) == {("TOPIC", copy, "DESCRIBE")}
    assert _held(dst, reader) == {("TOPIC", copy, "READ"), ("GROUP", group, "READ")}
    assert _held(dst, late) == {("TOPIC", copy, "READ")}
