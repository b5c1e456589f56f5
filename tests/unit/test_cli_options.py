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
