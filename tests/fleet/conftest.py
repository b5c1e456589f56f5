"""Fixtures of the ``fleet`` tier: a real Docker engine, Ferry's image, fleets with their own names.

The engine is Ferry's own ``dockerd`` (``ferry fleet engine up``: started when its socket does not
answer, and then stopped at the end of the session; the image cache stays on disk). An engine that cannot be
started or reached, or an image that cannot be built, FAILS the tier; it is never skipped.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry.devstack import stack as devstack
from ferry.fleet import engine, image
from ferry.fleet.errors import FleetError
from ferry.fleet.manager import FleetManager

_timings: list[str] = []


@pytest.fixture(scope="session")
def engine_url() -> Iterator[str]:
    """Ferry's own engine; stopped at the end only when this test run started it (its images stay
    on disk, so the next test run builds nothing)."""
    dirs = engine.dirs_from_env()
    was_up = engine.answers(dirs)
    try:
        url = engine.up(dirs, deadline_s=120)
    except FleetError as exc:
        pytest.fail(f"no Docker engine: {exc}", pytrace=False)
    yield url
    if not was_up:
        engine.down(dirs)


@pytest.fixture(scope="session")
def docker_client(engine_url: str) -> Iterator[Any]:
    try:
        client = engine.connect(engine_url)
    except FleetError as exc:
        pytest.fail(f"no Docker engine: {exc}", pytrace=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ferry_image(docker_client: Any) -> str:
    """Ferry's image, built once and cached on the engine (an unchanged tree builds nothing)."""
    try:
        result = image.build(docker_client)
    except FleetError as exc:
        pytest.fail(f"Ferry's image could not be built: {exc}", pytrace=False)
    what = ("base and image built" if result.built_base else "image built") if result.built_image else "cached"
    _timings.append(f"ferry fleet image {result.tag}: {what} in {result.seconds:.1f} s")
    return result.tag


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _timings:
        terminalreporter.write_line(line)


@pytest.fixture
def fleet_config(local_stack: devstack.Stack, zk_chroot: str, tmp_path: Path) -> Callable[..., Path]:
    """Writes a config for one fleet under this test's chroot: ``fleet_config("a")``; ``route``
    is merged into its one route, ``sections`` into the config's top level, ``controller`` into
    its controller section."""
    chroot = "/" + zk_chroot.split("/", 1)[1]

    def write(
        suffix: str, route: dict[str, Any] | None = None, sections: dict[str, Any] | None = None, **controller: Any
    ) -> Path:
        config = {
            "zookeeper": {
                "connect": local_stack.zookeeper.address,
                "root": f"{chroot}/{suffix}",
                "session_timeout_s": 6,
            },
            "clusters": {
                "src": {"bootstrap.servers": local_stack.bootstrap("src")},
                "dst": {"bootstrap.servers": local_stack.bootstrap("dst")},
            },
            "routes": [{"source": "src", "destination": "dst", **(route or {})}],
            "controller": {"rebalance_delay_s": 3, "failover_delay_s": 3, **controller},
            "worker": {"commit_interval_s": 0.5},
            **(sections or {}),
        }
        path = tmp_path / f"ferry-{suffix}.yaml"
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o644)  # the containers run as an unprivileged user
        return path

    return write


@pytest.fixture
def make_fleet(
    docker_client: Any, ferry_image: str, fleet_config: Callable[..., Path], request: pytest.FixtureRequest
) -> Iterator[Callable[[str], FleetManager]]:
    """``make_fleet("a")``: a FleetManager for a fleet named after this test; every fleet made is
    taken down afterwards (its containers' logs printed first when the test failed). Depends on
    ``fleet_config`` so that the fleets go down before the test's ZooKeeper chroot is removed."""
    made: list[FleetManager] = []
    run = uuid.uuid4().hex[:6]

    def make(suffix: str) -> FleetManager:
        manager = FleetManager(
            client=docker_client, name=f"t{run}-{suffix}", log=lambda line: print(f"{time.strftime('%X')} {line}")
        )
        made.append(manager)
        return manager

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for manager in made:
        if failed:
            for container in manager.containers():
                print(f"--- {container.name} ---\n{container.logs(tail=40).decode(errors='replace')}")
        if manager.containers():
            manager.down()


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
