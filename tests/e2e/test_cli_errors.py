"""Every ``ferry`` command, given an unreachable server, a bad flag value or a bad file: one
``ferry:`` line on stderr, a non-zero exit status, never a traceback. And the long-running ones
(``controller``, ``worker``) end on SIGTERM in every state, connecting included.

Unreachable is a closed port (127.0.0.1:1) for ZooKeeper, Kafka, the registries and the
controller. The commands run in parallel, once per module, so the whole file costs about as
long as its slowest command.
"""

from __future__ import annotations

import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
import yaml

from ferry.devstack import stack as devstack
from ferry.devstack.support import ferry_command, fleet_config, free_port, poll_until, spawn, stop_all
from tests.harness.processes import Fleet
from tests.harness.tcp_proxy import TcpProxy

CLOSED = "127.0.0.1:1"
# Short, so a command that waits for ZooKeeper gives up quickly; the bound the tests check is
# this plus 10 s.
RETRY_DEADLINE_S = 2.0
# Every command ends well within this; a command still running then has hung.
COMMAND_TIMEOUT_S = 60.0


def _unreachable_config() -> dict[str, object]:
    return {
        "zookeeper": {"connect": CLOSED, "root": "/ferry/unreachable", "retry_deadline_s": RETRY_DEADLINE_S},
        "clusters": {"src": {"bootstrap.servers": CLOSED}, "dst": {"bootstrap.servers": CLOSED}},
        "routes": [{"source": "src", "destination": "dst", "groups": [".*"]}],
        "controller": {"rest_host": "127.0.0.1", "rest_port": 1},
        "schemas": {
            "primary": "src",
            "registries": {"src": {"url": f"http://{CLOSED}"}, "dst": {"url": f"http://{CLOSED}"}},
        },
    }


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stderr: str


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("cli-errors")
    unreachable = _unreachable_config()
    tree = {
        **unreachable,
        "clusters": {"a": {"bootstrap.servers": CLOSED}, "b": {"bootstrap.servers": CLOSED}},
        "routes": [],
        "tree": {"layout": "(a,b)", "include": [".*"]},
    }
    del tree["schemas"]
    written = {
        "unreachable": yaml.safe_dump(unreachable),
        "tree": yaml.safe_dump(tree),
        "malformed": "zookeeper: [\n",
        "invalid": "zookeeper: {connect: x}\nclusters: {}\n",
    }
    for name, text in written.items():
        (folder / f"{name}.yaml").write_text(text)
    paths = {name: str(folder / f"{name}.yaml") for name in written}
    paths["missing"] = str(folder / "missing.yaml")
    paths["folder"] = str(folder)
    return paths


def _cases(f: dict[str, str]) -> dict[str, list[str]]:
    unreachable, tree = f["unreachable"], f["tree"]
    cases = {
        # unreachable ZooKeeper
        "controller-zookeeper": ["controller", "--config", unreachable, "--rest-port", str(free_port())],
        "worker-zookeeper": ["worker", "--config", unreachable, "--metrics-port", "0"],
        "zk-zookeeper": ["zk", "--config", unreachable, "tree"],
        "validate-zookeeper": ["validate", "--config", unreachable],
        "failover-zookeeper": ["failover", "--config", unreachable, "--yes"],
        "failback-zookeeper": ["failback", "--config", unreachable],
        # unreachable Kafka
        "groups-list-kafka": ["groups", "list", "--config", unreachable],
        "groups-sync-kafka": ["groups", "sync", "some-group", "--config", unreachable],
        "audit-kafka": ["audit", "--config", unreachable, "--topic", "t"],
        # unreachable controller (and, behind it, registries)
        "schemas-controller": ["schemas", "--config", unreachable, "status"],
        "tree-controller": ["tree", "--config", tree],
        "tree-switch-controller": ["tree", "--config", tree, "switch", "a.L1", "b"],
        # unreachable Docker engine
        "fleet-engine": ["fleet", "status", "--engine", f"tcp://{CLOSED}"],
        # bad flag values
        "log-level": ["--log-level", "LOUD", "zk", "tree"],
        "log-level-after": ["zk", "tree", "--log-level", "LOUD"],
        "rest-port": ["controller", "--config", unreachable, "--rest-port", "abc"],
        "bench-records": ["bench", "--records", "0"],
        "bench-workloads": ["bench", "--workloads", "nonsense"],
        "bench-failover-lags": ["bench-failover", "--lags", "x"],
        "dev-timeout": ["dev", "up", "--timeout", "soon"],
        "fleet-targets-dir": ["fleet", "targets", "--dir", f"{f['folder']}/no/such", "--engine", f"tcp://{CLOSED}"],
        # bad files: every command that reads a config, with a missing one; the others once
        "controller-malformed": ["controller", "--config", f["malformed"]],
        "worker-invalid": ["worker", "--config", f["invalid"]],
    }
    with_config = {
        "controller": [],
        "worker": [],
        "zk": ["tree"],
        "groups": ["list"],
        "tree": [],
        "schemas": ["status"],
        "validate": [],
        "audit": ["--topic", "t"],
        "failover": [],
        "failback": [],
    }
    for command, rest in with_config.items():
        cases[f"{command}-missing-file"] = [command, *rest, "--config", f["missing"]]
    cases["fleet-up-missing-file"] = ["fleet", "up", "--config", f["missing"], "--engine", f"tcp://{CLOSED}"]
    return cases


@pytest.fixture(scope="module")
def outcomes(files: dict[str, str]) -> dict[str, Outcome]:
    cases = _cases(files)

    def run(args: list[str]) -> Outcome:
        done = subprocess.run(
            ferry_command(*args), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
        return Outcome(done.returncode, done.stderr)

    with ThreadPoolExecutor(max_workers=6) as pool:
        return dict(zip(cases, pool.map(run, cases.values()), strict=True))


# The case names, for parametrize (the files they use exist only once the fixture ran).
CASE_NAMES = list(_cases({name: name for name in ("unreachable", "tree", "malformed", "invalid", "missing", "folder")}))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_an_unusable_endpoint_flag_or_file_is_one_line_and_a_failing_status(
    outcomes: dict[str, Outcome], case: str
) -> None:
    outcome = outcomes[case]
    assert outcome.returncode not in (0, None), outcome.stderr
    assert "Traceback" not in outcome.stderr, outcome.stderr
    # Log lines (kazoo's, librdkafka's %3|...) may come before or after; Ferry's own verdict is one line.
    # "ferry: ..." for Ferry's errors, "ferry COMMAND: error: ..." for argparse's usage errors.
    verdicts = [line for line in outcome.stderr.splitlines() if line.startswith("ferry")]
    assert len(verdicts) == 1, outcome.stderr


def test_an_unreachable_zookeeper_is_named_with_its_deadline(outcomes: dict[str, Outcome]) -> None:
    for case in ("controller-zookeeper", "worker-zookeeper"):
        line = next(row for row in outcomes[case].stderr.splitlines() if row.startswith("ferry:"))
        assert line == f"ferry: cannot reach ZooKeeper at {CLOSED} within zookeeper.retry_deadline_s (2 s)"


@pytest.mark.parametrize("command", ["controller", "worker"])
def test_controller_and_worker_give_up_on_an_unreachable_zookeeper_within_the_deadline(
    files: dict[str, str], command: str
) -> None:
    args = [command, "--config", files["unreachable"]]
    args += ["--rest-port", str(free_port())] if command == "controller" else ["--metrics-port", "0"]
    # The bound is the process's whole life: start-up, the deadline, and shutting down.
    done = subprocess.run(
        ferry_command(*args), capture_output=True, text=True, timeout=RETRY_DEADLINE_S + 10, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr


def test_ferry_version_names_the_installed_package() -> None:
    from importlib.metadata import version

    done = subprocess.run(ferry_command("--version"), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"ferry {version('kafka-ferry')}"


@pytest.fixture
def connecting_config(tmp_path: Path) -> Path:
    """ZooKeeper unreachable for longer than any test waits: the process stays in "connecting"."""
    config = _unreachable_config()
    config["zookeeper"] = {**config["zookeeper"], "retry_deadline_s": 600}  # type: ignore[dict-item]
    path = tmp_path / "connecting.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize("command", ["controller", "worker"])
def test_sigterm_ends_a_process_still_connecting_to_zookeeper(
    connecting_config: Path, tmp_path: Path, command: str
) -> None:
    extra = ["--rest-port", str(free_port())] if command == "controller" else ["--metrics-port", "0"]
    process = spawn(
        command, ferry_command(command, "--config", str(connecting_config), *extra), tmp_path / f"{command}.log"
    )
    try:
        # kazoo logs each attempt: the process is connecting (its signal handler is in place before).
        poll_until(lambda: "Connecting to 127.0.0.1" in process.log.read_text(), 30, f"{command} to try ZooKeeper")
        process.signal(signal.SIGTERM)
        assert process.wait(10) == 0, process.log_tail()
        assert "Traceback" not in process.log.read_text()
    finally:
        stop_all([process], timeout=5)


def test_sigterm_ends_a_standby_a_leader_and_a_worker_promptly(local_stack: devstack.Stack, fleet: Fleet) -> None:
    leader = fleet.start_controller("c1")
    fleet.wait_for_leader(leader)
    standby = fleet.start_controller("c2")
    worker = fleet.start_worker("w1")
    fleet.wait_for_workers(leader, {"w1"})
    poll_until(lambda: "serving REST" in standby.log.read_text(), 30, "the standby to serve REST")
    for process in (standby, worker, leader):
        process.signal(signal.SIGTERM)
        # A worker drains first (bounded: nothing assigned here), a controller gives up its lead.
        assert process.wait(15) == 0, process.log_tail()
        assert "Traceback" not in process.log.read_text(), process.log_tail()


def test_zookeeper_lost_for_longer_than_the_deadline_ends_the_controller_with_one_line_and_the_worker_waits(
    local_stack: devstack.Stack, zk_chroot: str, tmp_path: Path
) -> None:
    """Only the link to ZooKeeper is cut (the shared ZooKeeper keeps running): the controller ends with
    one line after ``retry_deadline_s`` for its supervisor; the worker never gives ZooKeeper up and
    says since when it is unreachable."""
    address, chroot = zk_chroot.split("/", 1)
    host, port = address.rsplit(":", 1)
    link = TcpProxy(host, int(port))
    config = fleet_config(
        local_stack,
        "/" + chroot,
        {
            "zookeeper": {"connect": link.address, "retry_deadline_s": RETRY_DEADLINE_S, "session_timeout_s": 4},
            "controller": {"rest_host": "127.0.0.1"},
        },
    )
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(config))
    metrics_port = free_port()
    controller = spawn(
        "controller",
        ferry_command("controller", "--config", str(path), "--rest-port", str(free_port())),
        tmp_path / "controller.log",
    )
    worker = spawn(
        "worker",
        ferry_command("worker", "--config", str(path), "--metrics-port", str(metrics_port)),
        tmp_path / "worker.log",
    )
    try:
        poll_until(lambda: " leads " in controller.log.read_text(), 60, "the controller to lead")
        poll_until(lambda: "applied assignment" in worker.log.read_text(), 60, "the worker to run")
        link.cut()
        expected = (
            f"ferry: lost ZooKeeper at {link.address} for longer than zookeeper.retry_deadline_s "
            f"({RETRY_DEADLINE_S:g} s)"
        )
        # The session timeout (4 s) and the deadline (2 s) pass first; then a few seconds at most.
        assert controller.wait(30) == 2, controller.log_tail()
        text = controller.log.read_text()
        assert "Traceback" not in text, controller.log_tail()
        assert [line for line in text.splitlines() if line.startswith("ferry")] == [expected], controller.log_tail()

        def says_unreachable() -> bool:
            health = requests.get(f"http://127.0.0.1:{metrics_port}/health", timeout=5).json()
            return str(health.get("zookeeper", "")).startswith("unreachable since")

        poll_until(says_unreachable, 30, "the worker to say since when ZooKeeper is unreachable")
        assert worker.alive(), worker.log_tail()
        assert "Traceback" not in worker.log.read_text(), worker.log_tail()
    finally:
        stop_all([controller, worker], timeout=5)
        link.close()
