from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ferry.devstack import stack as devstack
from tests.harness.processes import Fleet


@pytest.fixture
def fleet(
    local_stack: devstack.Stack, zk_chroot: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Fleet]:
    root = "/" + zk_chroot.split("/", 1)[1]
    fleet = Fleet(stack=local_stack, zk_root=root, workdir=tmp_path)
    yield fleet
    fleet.stop_all()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        print(fleet.logs())


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    # Lets the fleet fixture print the processes' logs when the test body failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
