"""The ``ferry`` command line.

Subcommands plug in through the ``ferry.commands`` entry-point group (see ``setup.cfg``):
each entry is a ``register(subparsers)`` function that adds its parser and sets ``func``.
That keeps this module, in ``common``, free of imports of ``controller`` and ``worker``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, entry_points, version

from ferry.common import logs
from ferry.common.errors import FerryError

COMMAND_GROUP = "ferry.commands"
DISTRIBUTION = "kafka-ferry"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


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


def _subcommand_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below ``parser``: its subcommands, their subcommands, and so on."""
    for action in parser._actions:  # argparse exposes no public walk over subparsers
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield child
                yield from _subcommand_parsers(child)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ferry", description="Mirror Apache Kafka topics between clusters.")
    log_level = "DEBUG, INFO, WARNING or ERROR (default INFO)"
    parser.add_argument("--version", action="version", version=f"ferry {ferry_version()}")
    parser.add_argument("--log-level", type=parse_log_level, default="INFO", help=log_level)
    log_format = "text or json (one JSON object per line); default: the config's logging.format, else text"
    parser.add_argument("--log-format", choices=logs.FORMATS, help=log_format)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        entry.load()(subparsers)
    # `ferry validate --config F --log-level DEBUG` as well as `ferry --log-level DEBUG validate ...`.
    for child in _subcommand_parsers(parser):
        child.add_argument("--log-level", type=parse_log_level, default=argparse.SUPPRESS, help=log_level)
        child.add_argument("--log-format", choices=logs.FORMATS, default=argparse.SUPPRESS, help=log_format)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logs.setup(args)
    try:
        return int(args.func(args) or 0)
    except FerryError as exc:
        print(f"ferry: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
