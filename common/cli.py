"""Helpers every ``ferry`` subcommand shares: the subcommands' parser class, options before and after
a subcommand, the version, one-line errors.

The root command line, which imports every package's subcommands, is ``ferry/cli.py``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ferry.common import logs
from ferry.common.errors import FerryError

Register = Callable[[argparse._SubParsersAction], None]
"""A package's ``register(subparsers)``: adds its subcommand's parser and sets ``func``."""

DISTRIBUTION = "kafka-ferry"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_LEVEL_HELP = "DEBUG, INFO, WARNING or ERROR (default INFO)"
LOG_FORMAT_HELP = "text or json (one JSON object per line); default: the config's logging.format, else text"


def parse_log_level(text: str) -> str:
    """``--log-level``'s type: one of :data:`LOG_LEVELS`, any case; anything else is a usage error."""
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(LOG_LEVELS)}")
    return level


def ferry_version() -> str:
    """The installed ``kafka-ferry`` distribution's version (``unknown`` when not installed)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def options_anywhere(define: Callable[[argparse.ArgumentParser], None]) -> argparse.ArgumentParser:
    """A parent parser (argparse's ``parents=``) for options a command accepts before *and* after
    its subcommand, as people type them: ``ferry zk --config F ideal T`` and ``ferry zk ideal T
    --config F``.

    Pass it to the command's parser and to each of its subcommands' parsers. Its options default
    to "absent" (``argparse.SUPPRESS``), so a subcommand that did not see an option does not
    overwrite what the command saw. Read them with ``getattr(args, dest, default)`` (not
    ``set_defaults``: the parsers share the option objects, so a default set on one would be set
    on all and overwrite the value given before the subcommand), and check required ones with
    :func:`require_option` (argparse's ``required=True`` would insist on one of the two places).
    """
    parent = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    define(parent)
    return parent


def config_and_json_anywhere(
    config_help: str = "Ferry's YAML config file",
    json_help: str = "JSON output",
    define: Callable[[argparse.ArgumentParser], object] | None = None,
) -> argparse.ArgumentParser:
    """The :func:`options_anywhere` parent of a command that reads the config and prints text or
    JSON: ``--config`` (check it with :func:`require_option`), ``--json`` (read it with
    ``getattr(args, "json", False)``), and the options ``define`` adds."""

    def options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--config", help=config_help)
        parser.add_argument("--json", action="store_true", help=json_help)
        if define is not None:
            define(parser)

    return options_anywhere(options)


def require_option(args: argparse.Namespace, dest: str, option: str, command: str) -> None:
    """Usage error (exit 2, one line) when an :func:`options_anywhere` option was given nowhere."""
    if getattr(args, dest, None) is None:
        print(f"ferry {command}: error: the following arguments are required: {option}", file=sys.stderr)
        raise SystemExit(2)


def one_line(message: str) -> str:
    """An error's text on one line: the lines after the first (every problem of an invalid config
    file, say) joined with "; "."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else message
    return f"{lines[0].rstrip(':')}: {'; '.join(lines[1:])}"


def _log_options() -> argparse.ArgumentParser:
    """The parent parser of every subcommand: the root's logging options, absent unless given there."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--log-level", type=parse_log_level, default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)
    parent.add_argument("--log-format", choices=logs.FORMATS, default=argparse.SUPPRESS, help=LOG_FORMAT_HELP)
    return parent


_LOG_OPTIONS = _log_options()


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: it takes ``--log-level`` and ``--log-format`` too (from a parent parser),
    so ``ferry worker --config F --log-level DEBUG`` works as well as ``ferry --log-level DEBUG worker ...``.

    The root's ``add_subparsers(parser_class=CommandParser)`` makes every subcommand one, and argparse
    gives a parser's own subcommands its class, so the options reach every level.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parents"] = [*kwargs.get("parents", ()), _LOG_OPTIONS]
        super().__init__(*args, **kwargs)


def root_parser(commands: tuple[Register, ...]) -> argparse.ArgumentParser:
    """The ``ferry`` parser with ``commands`` (``ferry/cli.py`` passes every one)."""
    parser = argparse.ArgumentParser(prog="ferry", description="Mirror Apache Kafka topics between clusters.")
    parser.add_argument("--version", action="version", version=f"ferry {ferry_version()}")
    parser.add_argument("--log-level", type=parse_log_level, default="INFO", help=LOG_LEVEL_HELP)
    parser.add_argument("--log-format", choices=logs.FORMATS, help=LOG_FORMAT_HELP)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    for register in commands:
        register(subparsers)
    return parser


def run(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> int:
    """Parses ``argv`` and runs the command; a Ferry error is one line on stderr and exit status 2."""
    args = parser.parse_args(argv)
    log_format = logs.setup(args)
    try:
        return int(args.func(args) or 0)
    except FerryError as exc:  # with --log-format json, a JSON record too: every stderr line is one
        print(logs.error_line(f"ferry: {one_line(str(exc))}", log_format), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
