"""Fixtures by tier.

``integration`` and ``e2e`` tests share one local stack per session: the ``local_stack``
fixture starts whatever is not running and, at the end, stops only what it started. A
server that cannot be started or reached fails the test; it is never skipped.
Each test gets its own ZooKeeper chroot (``zk_chroot``) and unique topic names (``topic_name``).

A session runs the tiers fastest first: unit, integration, e2e, fleet. The short nemesis soak (an e2e
test) needs no server of the others, so it starts as soon as it is collected and runs beside them;
its test collects the report (``tests/harness/soak_run.py``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from ferry.common.errors import DevStackError
from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import processes
from ferry.devstack import stack as devstack
from ferry.devstack.support import create_topics
from tests.harness.soak_run import SoakRun

# The soak started beside the session's other tests (tests/harness/soak_run.py), for its test to wait on.
SOAK_RUN = pytest.StashKey[SoakRun]()
SOAK_TEST = "tests/e2e/test_soak.py::"


TIERS = ("unit", "integration", "e2e", "fleet")  # the order a session runs them in


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The tier comes from the folder under tests/ (not anywhere in the path: a checkout may live in
    # a folder called "fleet"), so no test can forget its marker.
    tests = Path(__file__).resolve().parent
    order: dict[str, int] = {}
    for item in items:
        try:
            tier = Path(item.path).resolve().relative_to(tests).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
            order[item.nodeid] = TIERS.index(tier)
    # Fast tiers first: a broken unit fails within a minute, and the soak, started at the session's start,
    # runs beside the short unit and integration tests rather than beside the e2e tests' own faults.
    items.sort(key=lambda item: order.get(item.nodeid, len(TIERS)))


def pytest_collection_finish(session: pytest.Session) -> None:
    # The soak needs none of the other tests' servers: started now, it runs while they do.
    if session.config.option.collectonly:
        return
    if any(item.nodeid.startswith(SOAK_TEST) for item in session.items):
        session.config.stash[SOAK_RUN] = SoakRun.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    run = session.config.stash.get(SOAK_RUN, None)
    if run is not None:
        run.stop()  # the soak's test ended it already, unless the session stopped before it


@pytest.fixture
def soak_run(request: pytest.FixtureRequest) -> SoakRun:
    """The soak the session started, or one started now."""
    run = request.config.stash.get(SOAK_RUN, None)
    if run is None:
        run = request.config.stash[SOAK_RUN] = SoakRun.start()
    return run


@pytest.fixture(scope="session")
def local_stack() -> Iterator[devstack.Stack]:
    stack = devstack.stack_from_env()
    try:
        started = processes.up(stack, deadline_s=180)
    except DevStackError as exc:
        pytest.fail(f"the local stack is not reachable: {exc}", pytrace=False)
    yield stack
    if started:
        processes.down(stack, names=started)


@pytest.fixture(scope="session")
def registry_stack(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The local stack with its two schema registries (src's, dst's): every schema test uses
    them. Starts the registries when they do not run, and stops only what it started."""
    stack = devstack.stack_from_env(registries=True)
    try:
        started = processes.up(stack, deadline_s=180)
    except DevStackError as exc:
        pytest.fail(f"the local schema registries are not reachable: {exc}", pytrace=False)
    yield stack
    if started:
        processes.down(stack, names=started)


def _slug(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:60]
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk_chroot(local_stack: devstack.Stack, request: pytest.FixtureRequest) -> Iterator[str]:
    """A ZooKeeper path of this test's own, removed afterwards. Yields ``host:port/chroot``."""
    chroot = f"/ferry-tests/{_slug(request)}"
    # Reconnects at least every second: after a test stopped ZooKeeper for a minute, kazoo's default
    # backoff (up to 60 s between tries) would hold the cleanup that long.
    root = KazooClient(
        hosts=local_stack.zookeeper.address, connection_retry=KazooRetry(max_tries=-1, delay=0.2, max_delay=1.0)
    )
    root.start(timeout=15)
    root.ensure_path(chroot)
    try:
        yield f"{local_stack.zookeeper.address}{chroot}"
    finally:
        # A test may stop ZooKeeper past this client's session timeout: retry through the expiry.
        KazooRetry(max_tries=20, delay=0.2, ignore_expire=True)(root.delete, chroot, recursive=True)
        root.stop()
        root.close()


@pytest.fixture
def zk(zk_chroot: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_chroot)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Makes topic names unique to this test run: ``topic_name("orders")``."""
    slug = _slug(request)

    def make(base: str = "t") -> str:
        return f"{base}.{slug}"[:200]

    return make


@pytest.fixture
def cluster_conf(local_stack: devstack.Stack) -> Callable[[str], dict[str, str]]:
    return lambda name: {"bootstrap.servers": local_stack.bootstrap(name)}


@pytest.fixture
def create_topic(cluster_conf: Callable[[str], dict[str, str]]) -> Callable[..., None]:
    def create(cluster: str, topic: str, partitions: int = 1) -> None:
        admin: AdminClient = kafka_clients.admin(cluster_conf(cluster))
        create_topics(admin, [NewTopic(topic, num_partitions=partitions, replication_factor=1)])

    return create
