"""`ferry dev up` after servers of the local stack were killed: it restarts them, says so, and
leaves pid files that name the new processes.

These tests kill servers of the shared local stack on purpose and leave it running and healthy.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from ferry.common.errors import DevStackError
from ferry.devstack import processes
from ferry.devstack import stack as devstack


def _pid_in_file(server: devstack.Server) -> int | None:
    try:
        return int(server.pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _kill(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


@pytest.fixture
def stack(local_stack: devstack.Stack) -> Iterator[devstack.Stack]:
    """The shared stack, running when the test starts, and running again when it ends."""
    processes.up(local_stack, deadline_s=180, echo=lambda _line: None)
    yield local_stack
    processes.up(local_stack, deadline_s=180, echo=lambda _line: None)


def _assert_running_with_fresh_pid_files(stack: devstack.Stack, old: dict[str, int]) -> None:
    for server in stack.servers:
        pid = _pid_in_file(server)
        assert pid is not None, f"{server.name}: no pid file"
        assert processes.pid_of(server) == pid, f"{server.name}: pid file names {pid}, not a live server of ours"
        if server.name in old:
            assert pid != old[server.name], f"{server.name}: pid file still names the killed process"
        assert processes.state_of(server) is processes.ServerState.RUNNING, server.name
    # A second `up` finds everything running: it starts nothing and leaves the pid files alone.
    pids = {server.name: _pid_in_file(server) for server in stack.servers}
    assert processes.up(stack, deadline_s=60, echo=lambda _line: None) == []
    assert {server.name: _pid_in_file(server) for server in stack.servers} == pids


def test_up_restarts_zookeeper_and_a_broker_that_die_while_it_looks_at_them(stack: devstack.Stack) -> None:
    # `kill -9` returns before the process is gone: for a moment it still looks alive, then it
    # vanishes while `up` waits for it to answer. SIGSTOP holds both servers in that "alive, not
    # answering" moment until `up` waits for the first time; then they get the SIGKILL.
    pids = {"zookeeper": processes.pid_of(stack.zookeeper), "dst": processes.pid_of(stack.dst)}
    old = {name: pid for name, pid in pids.items() if pid is not None}
    assert len(old) == 2, pids
    for pid in old.values():
        _kill(pid, signal.SIGSTOP)
    killed = threading.Event()

    def sleep_after_killing(seconds: float) -> None:
        if not killed.is_set():
            for pid in old.values():
                _kill(pid, signal.SIGKILL)
            killed.set()
        time.sleep(seconds)

    said: list[str] = []
    try:
        started = processes.up(stack, deadline_s=180, sleep=sleep_after_killing, echo=said.append)
    finally:
        for pid in old.values():
            _kill(pid, signal.SIGKILL)
    assert killed.is_set()
    assert sorted(started) == ["dst", "zookeeper"], said
    _assert_running_with_fresh_pid_files(stack, old)


@pytest.mark.parametrize("ups", [1, 2])
def test_up_after_kill_9_of_zookeeper_starts_it_once_and_keeps_its_pid_file(stack: devstack.Stack, ups: int) -> None:
    # Right after Popen returns, the new JVM's /proc/<pid>/cmdline is often still empty (its exec
    # is not finished): `up` took its own new ZooKeeper for dead and removed its pid file. With
    # two `up`s at once, both started one, and the loser's pid file replaced the winner's.
    old = processes.pid_of(stack.zookeeper)
    assert old is not None
    _kill(old, signal.SIGKILL)
    results: dict[int, list[str] | Exception] = {}

    def run(i: int) -> None:
        try:
            results[i] = processes.up(stack, deadline_s=120, echo=lambda _line: None)
        except DevStackError as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(ups)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    errors = [r for r in results.values() if isinstance(r, Exception)]
    assert not errors, errors
    assert sorted(tuple(r) for r in results.values() if isinstance(r, list)) == [*[()] * (ups - 1), ("zookeeper",)], (
        results
    )
    _assert_running_with_fresh_pid_files(stack, {"zookeeper": old})
