"""devstack.support: poll_until with an injected clock and sleep, the spawner, the fleet config."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from ferry.common.errors import FerryError
from ferry.devstack import support
from tests.fakes import FakeClock


def test_poll_until_returns_the_first_truthy_result() -> None:
    clock = FakeClock()
    answers = iter([None, 0, [], "ready"])
    result = support.poll_until(lambda: next(answers), 10, "ready", interval=0.5, clock=clock, sleep=clock.sleep)
    assert result == "ready"
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_poll_until_times_out_naming_what_and_checks_once_more_at_the_deadline() -> None:
    clock = FakeClock()
    calls: list[float] = []

    def never() -> bool:
        calls.append(clock.now)
        return False

    with pytest.raises(support.WaitTimeout, match=r"timed out after 1s waiting for the moon") as raised:
        support.poll_until(never, 1.0, lambda: "the moon", interval=0.3, clock=clock, sleep=clock.sleep)
    assert isinstance(raised.value, FerryError) and isinstance(raised.value, TimeoutError)
    # 0, 0.3, 0.6, 0.9 and the last sleep shortened to the deadline: never past it.
    assert calls == pytest.approx([0.0, 0.3, 0.6, 0.9, 1.0])
    assert clock.now == pytest.approx(1.0)


def test_poll_until_counts_ignored_errors_as_not_yet_and_names_the_last() -> None:
    clock = FakeClock()
    answers = iter([KeyError("leader"), ValueError("not yet"), 7])

    def condition() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert support.poll_until(condition, 5, "x", ignoring=(KeyError, ValueError), clock=clock, sleep=clock.sleep) == 7

    def failing() -> int:
        raise ValueError("still starting")

    with pytest.raises(support.WaitTimeout, match="last error: still starting"):
        support.poll_until(failing, 0.2, "x", ignoring=(ValueError,), clock=clock, sleep=clock.sleep)


def test_poll_until_lets_other_errors_through() -> None:
    clock = FakeClock()

    def broken() -> bool:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        support.poll_until(broken, 5, "x", ignoring=(KeyError,), clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []


def test_spawn_appends_output_to_its_log_and_stop_terminates(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "child.log"
    log.parent.mkdir()
    log.write_text("earlier run\n")
    script = "import os, sys, time; print('hello', os.environ['EXTRA']); print('oops', file=sys.stderr); time.sleep(60)"
    child = support.spawn("child", [sys.executable, "-c", script], log, env={"EXTRA": "x1"})
    try:
        support.poll_until(lambda: "oops" in child.log_tail(), 10, "the child's output", interval=0.02)
        assert child.alive()
        assert child.log_tail(10).splitlines() == ["earlier run", "hello x1", "oops"]
    finally:
        child.stop(timeout=10)
    assert not child.alive()
    assert child.returncode == -signal.SIGTERM


def test_stop_kills_what_ignores_sigterm(tmp_path: Path) -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    )
    child = support.spawn("stubborn", [sys.executable, "-c", script], tmp_path / "stubborn.log")
    support.poll_until(lambda: "ready" in child.log_tail(), 10, "the child to ignore SIGTERM", interval=0.02)
    support.stop_all([child], timeout=0.5)
    assert child.returncode == -signal.SIGKILL


def test_tail_of_a_missing_log() -> None:
    assert support.tail(Path("/nonexistent/ferry.log")) == "(no log)"


def test_fleet_config_merges_sections_one_level_deep() -> None:
    stack = SimpleNamespace(
        zookeeper=SimpleNamespace(address="127.0.0.1:2181"),
        bootstrap=lambda name: {"src": "127.0.0.1:1", "dst": "127.0.0.1:2"}[name],
    )
    config = support.fleet_config(
        stack,  # type: ignore[arg-type]
        "/ferry/x",
        {"zookeeper": {"session_timeout_s": 4.0}, "controller": {"rest_host": "127.0.0.1", "rest_port": 1}},
        {"controller": {"rest_port": 2}, "routes": [{"source": "dst", "destination": "src"}]},
    )
    assert config == {
        "zookeeper": {"connect": "127.0.0.1:2181", "root": "/ferry/x", "session_timeout_s": 4.0},
        "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:2"}},
        "routes": [{"source": "dst", "destination": "src"}],
        "controller": {"rest_host": "127.0.0.1", "rest_port": 2},
    }


def test_free_port_never_hands_out_a_port_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    # Children bind late: a port offered again before the first child bound it would be served twice.
    monkeypatch.setattr(support, "_handed_out", set())
    offers = iter([40001, 40001, 40002])
    assert [support.free_port(lambda: next(offers)), support.free_port(lambda: next(offers))] == [40001, 40002]
