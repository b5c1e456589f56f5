"""The leader's ACL sync job and a failover's grant, against fake AdminClients and a fake ZooKeeper:
what reaches the destination, what is remembered, and the best effort when the source is gone."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
from kazoo.exceptions import NoNodeError

from ferry.common.config import parse_config
from ferry.common.core.acl_sync import ALLOW, GROUP, LITERAL, PREFIXED, READ, TOPIC, WRITE, Binding, Remembered
from ferry.common.kafka import acls as kafka_acls
from ferry.common.vocabulary import OpKind
from ferry.common.zk.layout import ZkLayout
from ferry.controller.failover import acl_grant
from ferry.controller.jobs.acl_sync import AclSyncJob
from ferry.controller.lead.store import Op


def _done(value: Any) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_result(value)
    return future


def _failed(error: BaseException) -> Future[Any]:
    future: Future[Any] = Future()
    future.set_exception(error)
    return future


class _Listing:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id


class _Groups:
    def __init__(self, ids: list[str]) -> None:
        self.valid = [_Listing(g) for g in ids]


def _fields(acl: Any) -> tuple[Any, ...]:
    return (
        acl.restype,
        acl.name,
        acl.resource_pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


class FakeAdmin:
    """The AdminClient calls ACL sync and a failover make, over a set of real confluent-kafka AclBindings.
    ``refused``: its authorizer refuses to create or delete ACLs (Ferry's principal lacks Alter)."""

    def __init__(self, groups: list[str] | None = None) -> None:
        self.acls: set[AclBinding] = set()
        self.groups = groups or []
        self.down = False
        self.refused = False
        self.topics: list[str] = []

    def _check(self) -> None:
        if self.down:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "all brokers down"))

    def describe_acls(self, wanted: Any, request_timeout: float) -> Future[Any]:
        self._check()
        return _done([a for a in self.acls if a.restype == wanted.restype])

    def _refusal(self) -> Future[Any]:
        return _failed(
            KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed"))
        )

    def create_acls(self, acls: list[AclBinding], request_timeout: float) -> dict[AclBinding, Future[Any]]:
        self._check()
        if self.refused:
            return {a: self._refusal() for a in acls}
        self.acls.update(acls)
        return {a: _done(None) for a in acls}

    def delete_acls(self, filters: list[Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self._check()
        if self.refused:
            return {f: self._refusal() for f in filters}
        out = {}
        for wanted in filters:
            gone = [a for a in self.acls if _fields(a) == _fields(wanted)]  # every field given: itself only
            self.acls.difference_update(gone)
            out[wanted] = _done(gone)
        return out

    def list_topics(self, timeout: float) -> Any:
        self._check()
        return SimpleNamespace(topics=dict.fromkeys(self.topics))

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        self._check()
        return _done(_Groups(self.groups))


def _acl(
    name: str, operation: str = READ, pattern: str = LITERAL, kind: str = TOPIC, principal: str = "User:app"
) -> AclBinding:
    return AclBinding(
        ResourceType[kind],
        name,
        ResourcePatternType[pattern],
        principal,
        "*",
        AclOperation[operation],
        AclPermissionType.ALLOW,
    )


def _b(name: str, operation: str = READ, pattern: str = LITERAL, kind: str = TOPIC) -> Binding:
    return Binding(kind, name, pattern, "User:app", "*", operation, ALLOW)


class FakeZk:
    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}
        self.commits: list[list[Op]] = []

    def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], None

    def ensure_path(self, path: str) -> None:
        pass

    def commit(self, ops: list[Op]) -> None:
        self.commits.append(ops)
        for op in ops:
            assert (op.kind == OpKind.CREATE) == (op.path not in self.nodes)
            self.nodes[op.path] = op.data


@pytest.fixture
def admins(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeAdmin]:
    clusters = {"src": FakeAdmin(groups=["app-1", "other"]), "dst": FakeAdmin()}
    from ferry.common.kafka import clients

    monkeypatch.setattr(clients, "admin", lambda properties: clusters[properties["bootstrap.servers"]])
    return clusters


def _config(sync_acls: bool = True) -> Any:
    route = {"source": "src", "destination": "dst", "naming": "prefix", "groups": ["app-.*"], "sync_acls": sync_acls}
    return parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:2181"},
            "clusters": {"src": {"bootstrap.servers": "src"}, "dst": {"bootstrap.servers": "dst"}},
            "routes": [route],
        }
    )


def _job(config: Any, zk: FakeZk, topics: dict[str, set[str]]) -> AclSyncJob:
    return AclSyncJob(
        config=config,
        routes=lambda: config.routes,
        topics=lambda: topics,
        zk=zk,
        layout=ZkLayout("/t"),
        commit=zk.commit,
        clock=lambda: 100.0,  # type: ignore[arg-type]
    )


def test_the_adapter_reads_and_creates_plain_bindings(admins: dict[str, FakeAdmin]) -> None:
    admins["src"].acls = {_acl("orders"), _acl("ord", pattern=PREFIXED), _acl("app-1", kind=GROUP)}
    assert kafka_acls.describe(admins["src"], 1.0) == sorted(
        [_b("orders"), _b("ord", pattern=PREFIXED), _b("app-1", kind=GROUP)]
    )
    assert kafka_acls.create(admins["dst"], [_b("x")], 1.0) == {_b("x"): None}
    assert admins["dst"].acls == {_acl("x")}
    assert kafka_acls.group_ids(admins["src"], 1.0) == ["app-1", "other"]


def test_the_job_creates_the_missing_read_acls_renamed_and_remembers_every_source_binding(
    admins: dict[str, FakeAdmin],
) -> None:
    admins["src"].acls = {_acl("orders"), _acl("orders", WRITE), _acl("payments"), _acl("app-1", kind=GROUP)}
    admins["dst"].acls = {_acl("mine")}  # the destination's own: never touched
    zk = FakeZk()
    job = _job(_config(), zk, {"src.dst": {"orders"}})
    job.run()
    assert admins["dst"].acls == {_acl("mine"), _acl("src.orders"), _acl("app-1", kind=GROUP)}
    assert job.results["src.dst"].created == sorted([_b("src.orders"), _b("app-1", kind=GROUP)])
    remembered = Remembered.from_bytes(zk.nodes["/t/acls/src.dst"])
    assert remembered.bindings == sorted([_b("orders"), _b("orders", WRITE), _b("app-1", kind=GROUP)])
    assert remembered.groups == ["app-1"] and remembered.topics == ["orders"]
    job.run()  # nothing changed: nothing created, nothing written
    assert job.results["src.dst"].created == [] and len(zk.commits) == 1


def test_a_source_that_fails_fails_the_run_and_keeps_what_was_remembered(admins: dict[str, FakeAdmin]) -> None:
    admins["src"].acls = {_acl("orders")}
    zk = FakeZk()
    job = _job(_config(), zk, {"src.dst": {"orders"}})
    job.run()
    admins["src"].down = True
    job.run()
    assert "reading the ACLs of source src" in (job.results["src.dst"].problem or "")
    assert Remembered.from_bytes(zk.nodes["/t/acls/src.dst"]).bindings == [_b("orders")]


def test_a_route_without_sync_acls_or_without_topics_is_left_alone(admins: dict[str, FakeAdmin]) -> None:
    admins["src"].acls = {_acl("orders")}
    zk = FakeZk()
    _job(_config(), zk, {}).run()
    _job(_config(sync_acls=False), zk, {"src.dst": {"orders"}}).run()
    assert admins["dst"].acls == set() and zk.nodes == {}


def test_a_failover_grants_write_from_the_source_or_else_from_what_was_remembered(
    admins: dict[str, FakeAdmin],
) -> None:
    config = _config()
    admins["src"].acls = {_acl("orders"), _acl("orders", WRITE), _acl("payments", WRITE)}
    zk = FakeZk()
    report = acl_grant.grant_source_acls(config, config.routes[0], ["orders"], zk, ZkLayout("/t"))  # type: ignore[arg-type]
    assert report.from_ == "source" and report.errors == []
    assert {(row.name, row.operation) for row in report.granted} == {
        ("src.orders", READ),
        ("src.orders", WRITE),
    }
    assert admins["dst"].acls == {_acl("src.orders"), _acl("src.orders", WRITE)}

    # The source is gone: the job's last read is granted.
    admins["dst"].acls = set()
    _job(config, zk, {"src.dst": {"orders"}}).run()
    admins["src"].down = True
    report = acl_grant.grant_source_acls(config, config.routes[0], ["orders"], zk, ZkLayout("/t"))  # type: ignore[arg-type]
    assert report.from_ == "remembered" and "reading the ACLs of source src" in report.errors[0]
    assert _acl("src.orders", WRITE) in admins["dst"].acls

    # Neither the source nor a remembered set: nothing granted, the failover goes on.
    report = acl_grant.grant_source_acls(config, config.routes[0], ["orders"], FakeZk(), ZkLayout("/t"))  # type: ignore[arg-type]
    assert report.from_ == "none" and report.granted == []


def test_a_destination_that_fails_leaves_the_grant_to_the_report(admins: dict[str, FakeAdmin]) -> None:
    config = _config()
    admins["src"].acls = {_acl("orders", WRITE)}
    admins["dst"].down = True
    report = acl_grant.grant_source_acls(config, config.routes[0], ["orders"], FakeZk(), ZkLayout("/t"))  # type: ignore[arg-type]
    assert report.granted == [] and "granting on destination dst" in report.errors[0]
