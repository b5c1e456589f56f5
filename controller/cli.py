"""``ferry controller``: placeholder until the core replication issue lands."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("controller", help="run a Ferry controller (not built yet)")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    print("ferry controller: not built yet (see the core replication issue)")
    return 1
