"""A short nemesis soak through the command: ``ferry bench soak`` for four minutes, on its own stack.

The soak starts its own ZooKeeper and clusters (bench/soak/config.py's ports, never the shared
stack's), its own topic and ZooKeeper root, applies a fixed seed's faults (a worker killed and
stopped past its session, the leader killed, a destination broker restarted, ZooKeeper stopped for
40 s, partitions moved between live workers faster than they acknowledge), and reads the destination
back. The route has no ``delivery_guarantee``, so it writes exactly once: nothing acknowledged on the
source may be missing, and a read_committed consumer sees no record twice.

Since it needs nothing of the other tests, the session starts it as soon as it collected this test
and the other tests run meanwhile (``tests/harness/soak_run.py``); this test waits for its report.
"""

from __future__ import annotations

import pytest

from tests.harness.soak_run import FAULTS, SoakRun

TIMEOUT_S = 1200.0


def test_a_four_minute_soak_loses_and_duplicates_no_record(soak_run: SoakRun) -> None:
    done = soak_run.wait(TIMEOUT_S)
    report = done.report
    if report is None:
        pytest.fail(f"the soak wrote no report (exit {done.returncode}):\n{done.output[-4000:]}")
    print(done.output)
    assert report["produced"] > 0
    assert {fault["fault"] for fault in report["faults"]} == set(FAULTS)
    assert report["caughtUp"], done.output
    assert report["readCommitted"]["lost"] == 0, done.output
    assert report["readCommitted"]["duplicated"] == 0, done.output
    assert report["readCommitted"]["disorderedPartitions"] == [], done.output
    soak_run.remove()
