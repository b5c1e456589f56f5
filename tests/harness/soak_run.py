"""The short nemesis soak as a command running beside the other tests.

The soak (``ferry bench soak``) takes minutes and needs no server of the other tests: it starts a
ZooKeeper and clusters of its own, on ports of its own (``bench/soak/config.py``). So the session
starts it as soon as it has collected the soak's test (``tests/conftest.py``), the other tests run
meanwhile, and the soak's test only waits for its report. Run on its own, the test starts it itself.

States of a :class:`SoakRun`::

    RUNNING (start) --the command exits--> EXITED (wait: its report read)
    RUNNING --stop (the session ends first: SIGINT, so the command takes its stack down)--> STOPPED
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.devstack.support import ferry_command, spawn

# The soak every `make test` runs: four minutes, a fixed seed, one fault of each kind the short run can
# fit, ZooKeeper away for 40 s, partitions moved between live workers faster than they acknowledge.
FAULTS = ("kill", "stop", "leader", "dst-broker", "zookeeper", "moves")
ARGUMENTS = (
    "--minutes",
    "4",
    "--seed",
    "7",
    "--faults",
    ",".join(FAULTS),
    "--gap",
    "10-15",
    "--zookeeper-down-s",
    "40",
)
STOP_TIMEOUT_S = 120.0  # what the command may take to stop its servers after SIGINT


@dataclass
class SoakResult:
    returncode: int
    output: str  # what the command printed, stdout and stderr
    report: dict[str, Any] | None  # None: the soak wrote no report


class SoakRun:
    """One ``ferry bench soak`` process with its work folder (its log, report and servers' logs),
    removed once it passed."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._report = workdir / "soak.json"
        command = ferry_command(
            "bench", "soak", *ARGUMENTS, "--workdir", str(workdir / "run"), "--json", str(self._report)
        )
        self._process = spawn("soak", command, workdir / "soak.log")

    @classmethod
    def start(cls) -> SoakRun:
        return cls(Path(tempfile.mkdtemp(prefix="ferry-soak-")))

    def wait(self, timeout_s: float) -> SoakResult:
        """Waits for the command to exit (``subprocess.TimeoutExpired`` after ``timeout_s``)."""
        returncode = self._process.wait(timeout_s)
        report = json.loads(self._report.read_text()) if self._report.exists() else None
        return SoakResult(returncode, self._process.log.read_text(), report)

    def stop(self) -> None:
        """Interrupts a soak still running, as Ctrl-C would: it takes its own stack down."""
        self._process.signal(signal.SIGINT)
        try:
            self._process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()

    def remove(self) -> None:
        """Removes the work folder (after a pass: a failure keeps its logs)."""
        shutil.rmtree(self.workdir, ignore_errors=True)
