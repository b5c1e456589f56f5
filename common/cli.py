"""The ``ferry`` command line.

Subcommands plug in through the ``ferry.commands`` entry-point group (see ``setup.cfg``):
each entry is a ``register(subparsers)`` function that adds its parser and sets ``func``.
That keeps this module, in ``common``, free of imports of ``controller`` and ``worker``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from importlib.metadata import entry_points

from common.errors import FerryError

COMMAND_GROUP = "ferry.commands"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ferry", description="Mirror Apache Kafka topics between clusters.")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for entry in sorted(entry_points(group=COMMAND_GROUP), key=lambda e: e.name):
        entry.load()(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return int(args.func(args) or 0)
    except FerryError as exc:
        print(f"ferry: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
