"""`ferry fleet` as an operator types it, and a topic mirrored by a running fleet."""

from __future__ import annotations

import requests

from ferry.cli import main as ferry_main
from ferry.devstack import stack as devstack
from ferry.fleet.manager import FleetManager
from tests.harness.processes import RecordLedger


def ferry(engine: str, *args: str) -> int:
    """``ferry fleet <sub> --engine URL ARGS``, in this process (what an operator types)."""
    return ferry_main(["fleet", args[0], "--engine", engine, *args[1:]])


def mirror(fleet: FleetManager, stack: devstack.Stack, topic: str, partitions: int) -> RecordLedger:
    ledger = RecordLedger(stack, topic, partitions)
    ledger.create_source_topic()
    leader = fleet.leader()
    assert leader is not None
    response = requests.post(f"{fleet.url(leader)}/topics", json={"topic": topic}, timeout=30)
    assert response.status_code == 201, response.text
    return ledger
