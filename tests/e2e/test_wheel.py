"""The wheel: built with ``pip wheel .``, installed into a fresh venv, it runs without the checkout.

Every name it installs lives under ``ferry`` (nothing called ``common`` or ``worker`` lands at the top of
site-packages), pyspark, the Docker SDK and matplotlib are extras (the plain install has none of them, and
``ferry validate`` says what to install), ``ferry --help`` works, ``ferry dev up`` finds the jars through the
documented ``FERRY_JARS_DIR`` and keeps its state under ``FERRY_DEV_DIR``, and ``ferry controller`` leads
against that stack. Its own stack runs on ports of its own, next to the shared local stack.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from ferry.common.paths import jars_dir
from tests.harness.processes import wait_until

REPO = Path(__file__).resolve().parents[2]
PORTS = {"FERRY_DEV_ZK_PORT": "3381", "FERRY_DEV_SRC_PORT": "21292", "FERRY_DEV_DST_PORT": "31292"}
REST_PORT = 9392


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def assert_optional_only_under_extras(wheel: Path) -> None:
    """pyspark, the Docker SDK and matplotlib are Requires-Dist only with an ``extra ==`` marker."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    requires = [line.removeprefix("Requires-Dist: ") for line in lines if line.startswith("Requires-Dist: ")]
    extras = {line.removeprefix("Provides-Extra: ") for line in lines if line.startswith("Provides-Extra: ")}
    assert {"spark", "chart", "fleet", "all", "dev"} <= extras, extras
    for optional, extra in (("pyspark", "spark"), ("docker", "fleet"), ("matplotlib", "chart")):
        found = [r for r in requires if re.match(rf"{optional}\b", r)]
        assert found and all(f'extra == "{extra}"' in r for r in found), found
    assert any(r.startswith("kazoo") and "extra ==" not in r for r in requires), requires


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv (no system site-packages) holding only Ferry's wheel and its dependencies."""
    work = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work / "dist"), str(REPO)], cwd=work)
    (wheel,) = (work / "dist").glob("kafka_ferry-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"ferry"}, tops
    assert_optional_only_under_extras(wheel)
    _run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    _run([str(work / "venv" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)], cwd=work)
    yield work


def test_the_installed_wheel_runs_help_dev_up_and_a_controller_without_the_checkout(installed: Path) -> None:
    ferry = str(installed / "venv" / "bin" / "ferry")
    python = str(installed / "venv" / "bin" / "python")
    elsewhere = installed / "cwd"  # not the checkout: nothing may be found relative to it
    elsewhere.mkdir()
    where = _run([python, "-c", "import ferry.common.config as c; print(c.__file__)"], cwd=elsewhere)
    assert where.startswith(str(installed / "venv")), where
    assert "COMMAND" in _run([ferry, "--help"], cwd=elsewhere)
    # The plain install is a worker's and a controller's: no extra came with it, and a command that
    # needs one says which.
    absent = _run(
        [
            python,
            "-c",
            "import importlib.util as u; print([m for m in ('pyspark', 'docker', 'matplotlib') if u.find_spec(m)])",
        ],
        cwd=elsewhere,
    )
    assert absent.strip() == "[]", absent
    validate = subprocess.run(
        [ferry, "validate", "--config", "none.yaml"], cwd=elsewhere, capture_output=True, text=True
    )
    assert validate.returncode == 2 and validate.stderr.strip().endswith("pip install 'kafka-ferry[spark]'"), validate

    env = {**os.environ, **PORTS, "FERRY_DEV_DIR": str(installed / "dev"), "FERRY_JARS_DIR": str(jars_dir())}
    env.pop("FERRY_DEV_CLUSTERS", None)
    env.pop("FERRY_DEV_REGISTRIES", None)
    try:
        _run([ferry, "dev", "up"], cwd=elsewhere, env=env, timeout=300)
        assert "running" in _run([ferry, "dev", "status"], cwd=elsewhere, env=env)
        assert (installed / "dev" / "zookeeper").is_dir()  # the state went where FERRY_DEV_DIR says
        config = elsewhere / "ferry.yaml"
        config.write_text(
            f'zookeeper: {{connect: "127.0.0.1:{PORTS["FERRY_DEV_ZK_PORT"]}", root: /wheel}}\n'
            "clusters:\n"
            f'  src: {{bootstrap.servers: "127.0.0.1:{PORTS["FERRY_DEV_SRC_PORT"]}"}}\n'
            f'  dst: {{bootstrap.servers: "127.0.0.1:{PORTS["FERRY_DEV_DST_PORT"]}"}}\n'
            "routes:\n  - {source: src, destination: dst}\n"
            f"controller: {{rest_host: 127.0.0.1, rest_port: {REST_PORT}}}\n"
        )
        with open(installed / "controller.log", "w") as log:
            controller = subprocess.Popen(
                [ferry, "controller", "--config", str(config)],
                cwd=elsewhere,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:

            def leads() -> bool:
                try:
                    return bool(requests.get(f"http://127.0.0.1:{REST_PORT}/health", timeout=2).json()["leader"])
                except (requests.RequestException, ValueError, KeyError):
                    return False

            wait_until(leads, 60, "the installed controller to lead")
        finally:
            controller.terminate()
            controller.wait(timeout=30)
        stack_logs = "\n".join(p.read_text(errors="replace") for p in (installed / "dev").glob("*/stdout.log"))
        assert "No configuration found" not in stack_logs, "the installed stack found no log4j2 configuration"
    finally:
        subprocess.run([ferry, "dev", "down"], cwd=elsewhere, env=env, capture_output=True, timeout=120)
