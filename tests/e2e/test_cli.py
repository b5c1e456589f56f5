"""Whole `ferry` processes."""

from __future__ import annotations

import json
import subprocess
import sys

from ferry.devstack import processes
from ferry.devstack import stack as devstack


def _ferry(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ferry.cli", *args], capture_output=True, text=True, timeout=120)


def test_dev_status_reports_every_server_running(local_stack: devstack.Stack) -> None:
    result = _ferry("dev", "status", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    # The schema registries and the extra clusters of `ferry dev up --clusters` show up too while
    # they run (the schema and topology tests start them, and a stack outlives a test session).
    assert {"zookeeper", "src", "dst"} <= set(rows)
    others = {name: row["kind"] for name, row in rows.items() if name not in {"zookeeper", "src", "dst"}}
    assert all(name in {"src-registry", "dst-registry"} or kind == "kafka" for name, kind in others.items()), others
    # The stack's own servers run; an extra cluster a topology test stopped again shows as stopped.
    assert all(rows[name]["state"] == "running" and rows[name]["pid"] for name in ("zookeeper", "src", "dst"))
    assert all((row["state"] == "running") == bool(row["pid"]) for row in rows.values()), rows
    assert rows["src"]["address"] == local_stack.src.address


def test_dev_up_is_idempotent(local_stack: devstack.Stack) -> None:
    before = {row["name"]: row["pid"] for row in processes.status(local_stack)}
    result = _ferry("dev", "up")
    assert result.returncode == 0, result.stderr
    assert "started" not in result.stdout
    assert {row["name"]: row["pid"] for row in processes.status(local_stack)} == before


def test_unknown_subcommand_is_a_usage_error() -> None:
    result = _ferry("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
