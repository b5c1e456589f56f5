"""``ferry tree``: the distribution tree's distributors as a table; ``ferry tree switch D LEAF``.

Both ask a controller's REST API (``GET /tree``, ``POST /tree/<distributor>/target``), found and
called as :mod:`controller.commands.rest_client` says (``--url``, else the config's; ``--token-env``). Without a
reachable controller, ``ferry tree`` still prints the tree as the config derives it (targets as
configured, state unknown) and says so.
"""

from __future__ import annotations

import argparse
import json
import sys

from ferry.common.config import FerryConfig, load_config
from ferry.common.core import tree
from ferry.common.errors import ConfigError
from ferry.controller.commands.rest_client import ControllerClient, ControllerUnreachable, add_options


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tree", help="the distribution tree's distributors, targets and state; switch a target"
    )
    add_options(parser, config_required=True, config_help="Ferry's YAML config file")
    parser.add_argument("--json", action="store_true", help="print the controller's JSON answer")
    parser.set_defaults(func=_show)
    actions = parser.add_subparsers(dest="tree_action")
    switch = actions.add_parser("switch", help="point a distributor at another leaf of its subtree")
    switch.add_argument("distributor", help="<cluster>.L<level>, as `ferry tree` lists them")
    switch.add_argument("leaf", help="a cluster of the distributor's subtree")
    switch.set_defaults(func=_switch)


def _setup(args: argparse.Namespace) -> tuple[FerryConfig, ControllerClient]:
    config = load_config(args.config)
    if config.tree is None:
        raise ConfigError(f"{args.config} has no tree section")
    return config, ControllerClient.from_args(args, config)


def _show(args: argparse.Namespace) -> int:
    config, client = _setup(args)
    assert config.tree is not None
    root = tree.parse(config.tree.layout)
    try:
        view = client.call("GET", "/tree")
    except ControllerUnreachable as exc:
        derived = tree.distributors(root)
        print(tree.ascii_tree(root))
        print()
        print(tree.table(derived, tree.choose_targets(derived, config.tree.targets)))
        print(
            f"ferry: no controller at {exc.url} ({exc.reason}): the tree above has the targets as configured, "
            "state unknown",
            file=sys.stderr,
        )
        return 1
    if args.json:
        json.dump(view, sys.stdout, indent=2)
        print()
        return 0
    print(tree.ascii_tree(root))
    print()
    print(view["table"])
    if view.get("unreachable"):
        print(
            f"\nunreachable clusters: {', '.join(view['unreachable'])} "
            f"(distributors switch after {view['switchAfterS']:.0f}s)"
        )
    return 0


def _switch(args: argparse.Namespace) -> int:
    _, client = _setup(args)
    switched = client.call("POST", f"/tree/{args.distributor}/target", {"target": args.leaf})
    print(f"{args.distributor} now copies to {switched.get(args.distributor, args.leaf)}")
    return 0
