"""Options are accepted where people type them: before or after a subcommand."""

from __future__ import annotations

import pytest

from ferry.cli import build_parser, main


@pytest.mark.parametrize(
    "argv",
    [
        ["zk", "--config", "f.yaml", "--json", "ideal", "orders"],
        ["zk", "ideal", "orders", "--config", "f.yaml", "--json"],
        ["zk", "--json", "ideal", "orders", "--config", "f.yaml"],
        ["zk", "ideal", "--config", "f.yaml", "orders", "--json"],
    ],
)
def test_zk_options_before_or_after_the_action(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert (args.config, args.json, args.zk_action, args.topic) == ("f.yaml", True, "ideal", "orders")


def test_zk_defaults_and_an_option_given_before_survives_the_action() -> None:
    args = build_parser().parse_args(["zk", "--config", "f.yaml", "tree"])
    assert args.config == "f.yaml" and not getattr(args, "json", False) and args.path is None


def test_zk_without_config_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["zk", "diff"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == "ferry zk: error: the following arguments are required: --config"


@pytest.mark.parametrize(
    ("argv", "route"),
    [
        (["groups", "--config", "f.yaml", "--json", "--route", "a.b", "translate", "g"], "a.b"),
        (["groups", "translate", "g", "--route", "a.b", "--config", "f.yaml", "--json"], "a.b"),
        (
            [
                "offsets",
                "--json",
                "translate",
                "--topic",
                "t",
                "--partition",
                "0",
                "--offset",
                "5",
                "--config",
                "f.yaml",
            ],
            None,
        ),
    ],
)
def test_groups_and_offsets_take_config_and_json_before_or_after_the_action(argv: list[str], route: str | None) -> None:
    args = build_parser().parse_args(argv)
    assert (args.config, args.json, getattr(args, "route", None)) == ("f.yaml", True, route)


@pytest.mark.parametrize(
    "command", [["groups", "list"], ["offsets", "translate", "--topic", "t", "--partition", "0", "--offset", "5"]]
)
def test_groups_and_offsets_without_config_are_a_one_line_usage_error(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(command)
    assert exit_info.value.code == 2
    name = " ".join(command[:2]) if command[0] == "offsets" else command[0]
    assert capsys.readouterr().err.strip() == f"ferry {name}: error: the following arguments are required: --config"


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-level", "DEBUG", "validate", "--config", "f.yaml"],
        ["validate", "--config", "f.yaml", "--log-level", "DEBUG"],
        ["audit", "--log-level", "DEBUG", "--config", "f.yaml", "--topic", "t"],
        ["dev", "status", "--log-level", "DEBUG", "--json"],
        ["zk", "diff", "--log-level", "DEBUG", "--config", "f.yaml"],
    ],
)
def test_log_level_before_or_after_any_subcommand(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).log_level == "DEBUG"


def test_log_level_defaults_to_info_after_a_subcommand() -> None:
    assert build_parser().parse_args(["dev", "status"]).log_level == "INFO"
