"""What a failover grants on the destination, the restore takes back: exactly those bindings, from the
record the failover keeps in its ZooKeeper node (so a restore by another process, after a restart,
knows them), never a binding the destination held before, one the periodic sync made, or another
principal's. Against fake AdminClients (tests/unit/test_acl_sync_job.py's), a fake ZooKeeper with node
versions, and fakes of the failover's own Kafka adapter and checkpointer."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ferry.common.core.acl_sync import READ, WRITE
from ferry.common.kafka import acls as kafka_acls
from ferry.common.model import IdealState
from ferry.common.zk.layout import ZkLayout
from ferry.controller.errors import Unavailable
from ferry.controller.failover import states as fsm
from ferry.controller.failover import workflow
from tests.unit.test_acl_sync_job import FakeAdmin, _acl, _b, _config
from tests.unit.test_acl_sync_job import admins as admins  # the fake AdminClients (a fixture)

pytestmark = pytest.mark.unit

LAYOUT = ZkLayout("/t")
ROUTE = "src.dst"


class VersionedZk:
    """The kazoo calls a failover makes, with node versions (compare-and-set) as ZooKeeper keeps them."""

    def __init__(self) -> None:
        self.nodes: dict[str, tuple[bytes, int]] = {}

    def get(self, path: str) -> tuple[bytes, Any]:
        if path not in self.nodes:
            raise NoNodeError(path)
        data, version = self.nodes[path]
        return data, SimpleNamespace(version=version)

    def get_children(self, path: str) -> list[str]:
        children = {p[len(path) + 1 :].split("/")[0] for p in self.nodes if p.startswith(path + "/")}
        if not children:
            raise NoNodeError(path)
        return sorted(children)

    def ensure_path(self, path: str) -> None:
        pass

    def create(self, path: str, data: bytes) -> None:
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = (data, 0)

    def set(self, path: str, data: bytes, version: int) -> Any:
        if self.nodes[path][1] != version:
            raise BadVersionError(path)
        self.nodes[path] = (data, version + 1)
        return SimpleNamespace(version=version + 1)

    def delete(self, path: str, version: int) -> None:
        if self.nodes[path][1] != version:
            raise BadVersionError(path)
        del self.nodes[path]

    def state(self) -> dict[str, Any]:
        return dict(json.loads(self.nodes[LAYOUT.failover(ROUTE)][0]))


class FakeKafka:
    """The failover's Kafka adapter (controller/failover/kafka_side.py) for an unplanned failover and a restore."""

    def __init__(self, config: Any, client_id: str) -> None:
        self.commits: list[tuple[str, str, dict[str, int]]] = []

    def set_topics(self, route: Any, topics: list[str]) -> None:
        pass

    def log_ends(self, cluster: str, partitions: dict[str, int]) -> dict[str, int]:
        return {fsm.partition_key(t, p): 10 for t, n in partitions.items() for p in range(n)}

    def copied(self, route: Any) -> tuple[dict[str, int], dict[str, int]]:
        return {}, {}

    def copied_by_headers(self, route: Any, partitions: dict[str, int]) -> dict[str, int]:
        return {}

    def last_checkpoints(self, route: Any) -> dict[str, Any]:
        return {}

    def commit(self, cluster: str, group: str, offsets: dict[str, int]) -> None:
        self.commits.append((cluster, group, dict(offsets)))

    def close(self) -> None:
        pass


class FakeCheckpointer:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.fixture
def zk(monkeypatch: pytest.MonkeyPatch) -> VersionedZk:
    monkeypatch.setattr(workflow, "FailoverKafka", FakeKafka)
    monkeypatch.setattr(workflow, "Checkpointer", FakeCheckpointer)
    zk = VersionedZk()
    zk.create(LAYOUT.topic(ROUTE, "orders"), IdealState(ROUTE, "orders", 1, {0: "w1"}).to_bytes())
    return zk


def _run(zk: VersionedZk, config: Any = None) -> workflow.FailoverRun:
    """A new failover command (a new process: nothing carried over but ZooKeeper)."""
    return workflow.FailoverRun(config=config or _config(), zk=zk, layout=LAYOUT, say=lambda line: None)  # type: ignore[arg-type]


def _source_and_destination(admins: dict[str, FakeAdmin]) -> None:
    admins["src"].acls = {_acl("orders"), _acl("orders", WRITE), _acl("app-1", READ, kind="GROUP")}
    admins["dst"].acls = {
        _acl("src.orders"),  # synced before the failover: READ stays after the restore
        _acl("src.orders", WRITE, principal="User:ops"),  # the destination's own
    }


def test_the_restore_revokes_exactly_what_the_failover_granted(admins: dict[str, FakeAdmin], zk: VersionedZk) -> None:
    _source_and_destination(admins)
    before = set(admins["dst"].acls)
    report = _run(zk).failover(ROUTE, planned=False).acls()
    assert report is not None
    granted = {row.binding() for row in report.granted}
    assert granted == {_b("src.orders", WRITE), _b("app-1", READ, kind="GROUP")}
    assert report.already_there == 1 and report.destination == "dst"
    assert "aclsGranting" not in zk.state()  # the report names them now
    assert zk.state()["report"]["acls"]["granted"] == report.to_json()["granted"]  # kept for the restore
    assert len(admins["dst"].acls) == len(before) + 2

    answer = _run(zk).restore(ROUTE)  # another process: it reads what was granted from ZooKeeper
    assert answer.state == fsm.ACTIVE and answer.acls is not None
    assert {row.binding() for row in answer.acls.revoked} == granted
    assert answer.acls.errors == []
    assert admins["dst"].acls == before
    assert LAYOUT.failover(ROUTE) not in zk.nodes


def test_a_failover_that_granted_nothing_revokes_nothing(admins: dict[str, FakeAdmin], zk: VersionedZk) -> None:
    admins["src"].acls = {_acl("orders", WRITE)}
    admins["dst"].acls = {_acl("src.orders", WRITE)}  # there already: not the failover's to take back
    report = _run(zk).failover(ROUTE, planned=False).acls()
    assert report is not None and report.granted == [] and report.already_there == 1
    answer = _run(zk).restore(ROUTE)
    assert "acls" not in answer.to_json()
    assert admins["dst"].acls == {_acl("src.orders", WRITE)}


def test_a_route_without_sync_acls_grants_and_revokes_nothing(admins: dict[str, FakeAdmin], zk: VersionedZk) -> None:
    _source_and_destination(admins)
    before = set(admins["dst"].acls)
    config = _config(sync_acls=False)
    state = _run(zk, config).failover(ROUTE, planned=False).to_json()
    assert "acls" not in state["report"]
    assert "acls" not in _run(zk, config).restore(ROUTE).to_json()
    assert admins["dst"].acls == before


class _Died(BaseException):
    """The failover's process dies (a kill -9 between two steps)."""


def test_a_failover_resumed_after_dying_between_its_grant_and_failed_over_still_counts_its_grants(
    admins: dict[str, FakeAdmin], zk: VersionedZk, monkeypatch: pytest.MonkeyPatch
) -> None:
    _source_and_destination(admins)
    before = set(admins["dst"].acls)
    create = kafka_acls.create

    def create_then_die(*args: Any) -> Any:
        create(*args)
        raise _Died

    monkeypatch.setattr(kafka_acls, "create", create_then_die)
    with pytest.raises(_Died):
        _run(zk).failover(ROUTE, planned=False)
    assert zk.state()["state"] == fsm.SYNCING
    assert len(zk.state()["aclsGranting"]) == 2  # written down before they were created
    monkeypatch.setattr(kafka_acls, "create", create)

    report = _run(zk).failover(ROUTE, planned=False).acls()  # the retry goes on from SYNCING
    assert report is not None
    assert {row.binding() for row in report.granted} == {
        _b("src.orders", WRITE),
        _b("app-1", READ, kind="GROUP"),
    }
    assert report.already_there == 1
    _run(zk).restore(ROUTE)
    assert admins["dst"].acls == before


def test_a_destination_that_does_not_answer_leaves_the_restore_undone_to_retry(
    admins: dict[str, FakeAdmin], zk: VersionedZk
) -> None:
    _source_and_destination(admins)
    before = set(admins["dst"].acls)
    _run(zk).failover(ROUTE, planned=False)
    admins["dst"].down = True
    with pytest.raises(Unavailable, match="revoking the ACLs its failover granted on dst"):
        _run(zk).restore(ROUTE)
    assert zk.state()["state"] == fsm.FAILED_OVER  # nothing changed: no commit, the node kept
    admins["dst"].down = False
    _run(zk).restore(ROUTE)
    assert admins["dst"].acls == before


def test_a_revoke_the_destination_refuses_is_reported_and_the_restore_goes_on(
    admins: dict[str, FakeAdmin], zk: VersionedZk
) -> None:
    _source_and_destination(admins)
    _run(zk).failover(ROUTE, planned=False)
    admins["dst"].refused = True  # Ferry's principal lost Alter on the destination
    answer = _run(zk).restore(ROUTE)
    assert answer.state == fsm.ACTIVE and answer.acls is not None and answer.acls.revoked == []
    assert len(answer.acls.errors) == 2
    assert all("authorization failed" in error for error in answer.acls.errors)


def test_the_adapter_deletes_exactly_the_bindings_it_is_given(admins: dict[str, FakeAdmin]) -> None:
    admins["dst"].acls = {
        _acl("x"),
        _acl("x", WRITE),
        _acl("x", principal="User:other"),
        _acl("x", pattern="PREFIXED"),
    }
    assert kafka_acls.delete(admins["dst"], [_b("x"), _b("gone")], 1.0) == {_b("x"): None, _b("gone"): None}
    assert admins["dst"].acls == {_acl("x", WRITE), _acl("x", principal="User:other"), _acl("x", pattern="PREFIXED")}
