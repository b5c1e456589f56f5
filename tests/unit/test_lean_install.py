"""A worker or controller install needs no extra: the ``ferry`` CLI, the worker and the controller
import none of pyspark, the Docker SDK or matplotlib, and a command that needs one says in one line
which extra to install (common/extras.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ferry.common import extras
from ferry.common.errors import FerryError

OPTIONAL = ("pyspark", "docker", "matplotlib")
# Any attempt to import an optional module fails and is recorded, even one caught by a try/except.
BLOCKER = f"""
import sys
attempts = []
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            attempts.append(name)
            raise ImportError(f"blocked: {{name}}")
        return None
sys.meta_path.insert(0, Blocker())
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, timeout=120)


def test_the_cli_worker_and_controller_import_no_optional_module() -> None:
    done = _python(f"""
import contextlib, io
from ferry.cli import build_parser
parser = build_parser()
with contextlib.redirect_stdout(io.StringIO()):
    parser.print_help()
    for command in ("worker", "controller"):
        try:
            parser.parse_args([command, "--help"])
        except SystemExit:
            pass
import ferry.worker.cli, ferry.worker.service, ferry.controller.service, ferry.controller.api.rest
import ferry.controller.commands.controller
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r})
print(attempts, loaded)
""")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] []"


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["validate", "--config", "ferry.yaml"], "spark"),
        (["audit", "--config", "ferry.yaml", "--topic", "t"], "spark"),
        (["fleet", "ls"], "fleet"),
        (["fleet", "engine", "status"], "fleet"),
    ],
)
def test_a_command_without_its_extra_says_what_to_install(argv: list[str], extra: str) -> None:
    done = _python(f"from ferry.cli import main\nsys.exit(main({argv!r}))")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith(
        f"needs the {extra} extra ({extras.EXTRAS[extra][0]} is not installed): pip install 'kafka-ferry[{extra}]'"
    ), line


def test_the_audit_chart_needs_the_chart_extra_even_with_spark_there() -> None:
    with pytest.raises(extras.MissingExtra, match=r"^audit --chart needs the chart extra .*\[chart\]'$"):
        extras.require("chart", "audit --chart", installed=lambda module: module != "matplotlib")
    extras.require("spark", "audit", installed=lambda module: True)
    assert issubclass(extras.MissingExtra, FerryError)


def test_a_controller_asked_to_run_the_spark_validation_needs_the_spark_extra(tmp_path: Path) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text(
        'zookeeper: {connect: "127.0.0.1:1"}\n'
        'clusters: {src: {bootstrap.servers: "127.0.0.1:1"}, dst: {bootstrap.servers: "127.0.0.1:2"}}\n'
        "routes: [{source: src, destination: dst}]\n"
        "controller: {validation_interval_s: 60}\n"
    )
    done = _python(f"from ferry.cli import main\nsys.exit(main(['controller', '--config', {str(config)!r}]))")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "ferry: controller.validation_interval_s > 0 (ferry validate) needs the spark extra "
        "(pyspark is not installed): pip install 'kafka-ferry[spark]'"
    )
