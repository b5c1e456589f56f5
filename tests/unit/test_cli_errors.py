"""The command line's pure parts of "one clear line": log levels, --version, multi-line errors."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest

from ferry.cli import build_parser, main
from ferry.common.cli import one_line, parse_log_level
from ferry.common.config import load_config
from ferry.common.errors import ConfigError


@pytest.mark.parametrize(("given", "level"), [("debug", "DEBUG"), ("Info", "INFO"), (" WARNING ", "WARNING")])
def test_a_log_level_in_any_case(given: str, level: str) -> None:
    assert parse_log_level(given) == level
    assert build_parser().parse_args(["--log-level", given, "zk", "tree"]).log_level == level


@pytest.mark.parametrize("argv", [["--log-level", "LOUD", "zk", "tree"], ["zk", "tree", "--log-level", "LOUD"]])
def test_an_unknown_log_level_is_a_usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith("argument --log-level: 'LOUD' is not one of DEBUG, INFO, WARNING, ERROR")


def test_version_comes_from_the_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ferry {version('kafka-ferry')}"


@pytest.mark.parametrize(
    ("message", "line"),
    [
        ("cannot reach ZooKeeper", "cannot reach ZooKeeper"),
        (
            "f.yaml is invalid:\n  clusters: none\n  routes.0.source: unknown",
            "f.yaml is invalid: clusters: none; routes.0.source: unknown",
        ),
        ("first\n\nsecond", "first: second"),
        ("", ""),
    ],
)
def test_a_multi_line_error_becomes_one_line(message: str, line: str) -> None:
    assert one_line(message) == line


def test_malformed_yaml_is_one_line_with_its_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("zookeeper: {connect: x\nclusters: [\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{path} is not valid YAML: ") and "(line " in message


def test_a_config_error_reaches_the_user_as_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("zookeeper: {connect: x}\nclusters: {}\nextra: 1\n")
    assert main(["zk", "--config", str(path), "tree"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"ferry: {path} is invalid: ")


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (["--offset", "-1"], "ferry: partition and offset must be >= 0, not 0 and -1"),
        (["--offset", "1", "--route", "x.y"], "ferry: unknown route 'x.y' (known: ['src.dst'])"),
    ],
)
def test_a_controller_error_of_a_command_run_from_the_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], line: str
) -> None:
    path = tmp_path / "ferry.yaml"
    path.write_text(
        "zookeeper: {connect: '127.0.0.1:1'}\n"
        "clusters: {src: {bootstrap.servers: '127.0.0.1:1'}, dst: {bootstrap.servers: '127.0.0.1:1'}}\n"
        "routes: [{source: src, destination: dst}]\n"
    )
    assert main(["offsets", "translate", "--config", str(path), "--topic", "t", "--partition", "0", *extra]) == 2
    assert capsys.readouterr().err.splitlines() == [line]
