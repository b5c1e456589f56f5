"""The ``ferry`` command line: the root parser, and the one list of every subcommand.

The only module that imports across Ferry's packages (a contract in ``.importlinter``): each
package offers a ``register(subparsers)`` function that adds its parser and sets ``func``, and
keeps what is heavy (Spark, Docker, the worker's clients) inside the command function, so parsing
``ferry worker`` loads none of it. Adding a command is one line in :data:`COMMANDS`.

``--log-level`` and ``--log-format`` go before or after the subcommand: every subcommand's parser
(and theirs, down the tree) is a :class:`common.cli.CommandParser`, which takes them from a parent
parser. The root parser and the run of a command are :mod:`common.cli`'s (``python -m ferry.bench.cli``
uses them too).
"""

from __future__ import annotations

import argparse
import sys

from ferry.bench.cli import register as bench
from ferry.common.cli import Register, root_parser, run
from ferry.common.mm2.cli import register as import_mm2
from ferry.common.preflight.grants import register as acls
from ferry.common.zk.inspect import register as zk
from ferry.controller.commands.check import register as check
from ferry.controller.commands.controller import register as controller
from ferry.controller.commands.failover import register as failover
from ferry.controller.commands.groups import register as groups
from ferry.controller.commands.offsets import register as offsets
from ferry.controller.commands.operate import register_autobalancing as autobalancing
from ferry.controller.commands.operate import register_pause as pause
from ferry.controller.commands.operate import register_throttle as throttle
from ferry.controller.commands.operate import register_workers as workers
from ferry.controller.commands.schemas import register as schemas
from ferry.controller.commands.tree import register as tree
from ferry.devstack.cli import register as dev
from ferry.fleet.cli import register as fleet
from ferry.pipeline.cli import register_audit as audit
from ferry.pipeline.cli import register_validate as validate
from ferry.worker.cli import register as worker

# Every subcommand, in the order `ferry --help` lists them.
COMMANDS: tuple[Register, ...] = (
    acls,
    audit,
    autobalancing,
    bench,
    check,
    controller,
    groups,
    dev,
    failover,
    fleet,
    import_mm2,
    offsets,
    pause,
    schemas,
    throttle,
    tree,
    validate,
    worker,
    workers,
    zk,
)


def build_parser() -> argparse.ArgumentParser:
    return root_parser(COMMANDS)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
