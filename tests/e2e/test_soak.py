"""A short nemesis soak through the command: ``ferry bench soak`` for three minutes, on its own stack.

The soak starts its own ZooKeeper and clusters (bench/soak/config.py's ports, never the shared
stack's), its own topic and ZooKeeper root, applies a fixed seed's faults (a worker killed and
stopped past its session, the leader killed, a destination broker restarted, ZooKeeper stopped for
40 s), and reads the destination back. The route writes exactly once: nothing acknowledged on the
source may be missing, and a read_committed consumer sees no record twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_a_three_minute_soak_loses_and_duplicates_no_record(tmp_path: Path) -> None:
    report_file = tmp_path / "soak.json"
    command = [
        sys.executable,
        "-m",
        "ferry.cli",
        "bench",
        "soak",
        "--minutes",
        "3",
        "--seed",
        "7",
        "--faults",
        "kill,stop,leader,dst-broker,zookeeper",
        "--gap",
        "10-15",
        "--zookeeper-down-s",
        "40",
        "--workdir",
        str(tmp_path / "run"),
        "--json",
        str(report_file),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, stdin=subprocess.DEVNULL)
    assert report_file.exists(), f"the soak wrote no report (exit {done.returncode}):\n{done.stderr[-4000:]}"
    report = json.loads(report_file.read_text())
    print(done.stdout)
    assert report["produced"] > 0
    assert {fault["fault"] for fault in report["faults"]} == {"kill", "stop", "leader", "dst-broker", "zookeeper"}
    assert report["caughtUp"], done.stdout
    assert report["readCommitted"]["lost"] == 0, done.stdout
    assert report["readCommitted"]["duplicated"] == 0, done.stdout
    assert report["readCommitted"]["disorderedPartitions"] == [], done.stdout
