"""``ferry tree``: the distribution tree's distributors as a table; ``ferry tree switch D LEAF``.

Both ask a controller's REST API (``GET /tree``, ``POST /tree/<distributor>/target``) at
``--url`` (default: ``controller.rest_host``/``rest_port`` of the config, http; a wildcard host is
the loopback). A bearer token, when the API needs one, comes from the environment variable named
by ``--token-env`` (default ``FERRY_TOKEN``). Without a reachable controller, ``ferry tree`` still prints the tree
as the config derives it (targets as configured, state unknown) and says so.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import requests

from ferry.common import endpoints
from ferry.common.config import FerryConfig, load_config
from ferry.common.core import tree
from ferry.common.errors import ConfigError

_TIMEOUT_S = 10.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("tree", help="the distribution tree's distributors, targets and state; switch a target")
    parser.add_argument("--config", required=True, help="Ferry's YAML config file")
    parser.add_argument("--url", help="a controller's REST URL (default: from the config)")
    parser.add_argument("--token-env", default="FERRY_TOKEN", help="environment variable holding a bearer token")
    parser.add_argument("--json", action="store_true", help="print the controller's JSON answer")
    parser.set_defaults(func=_show)
    actions = parser.add_subparsers(dest="tree_action")
    switch = actions.add_parser("switch", help="point a distributor at another leaf of its subtree")
    switch.add_argument("distributor", help="<cluster>.L<level>, as `ferry tree` lists them")
    switch.add_argument("leaf", help="a cluster of the distributor's subtree")
    switch.set_defaults(func=_switch)


def _setup(args: argparse.Namespace) -> tuple[FerryConfig, str, dict[str, str]]:
    config = load_config(args.config)
    if config.tree is None:
        raise ConfigError(f"{args.config} has no tree section")
    url = (args.url or endpoints.local_url("http", config.controller.rest_host, config.controller.rest_port)).rstrip("/")
    token = os.environ.get(args.token_env)
    return config, url, ({"Authorization": f"Bearer {token}"} if token else {})


def _answer(response: requests.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code >= 400:
        message = body.get("error") if isinstance(body, dict) else response.text[:200]
        raise ConfigError(f"the controller answered {response.status_code}: {message}")
    return body


def _show(args: argparse.Namespace) -> int:
    config, url, headers = _setup(args)
    assert config.tree is not None
    root = tree.parse(config.tree.layout)
    try:
        view = _answer(requests.get(f"{url}/tree", headers=headers, timeout=_TIMEOUT_S))
    except requests.RequestException as exc:
        derived = tree.distributors(root)
        print(tree.ascii_tree(root))
        print()
        print(tree.table(derived, tree.choose_targets(derived, config.tree.targets)))
        print(f"ferry: no controller at {url} ({type(exc).__name__}): the tree above has the targets as configured, "
              "state unknown", file=sys.stderr)
        return 1
    if args.json:
        json.dump(view, sys.stdout, indent=2)
        print()
        return 0
    print(tree.ascii_tree(root))
    print()
    print(view["table"])
    if view.get("unreachable"):
        print(f"\nunreachable clusters: {', '.join(view['unreachable'])} "
              f"(distributors switch after {view['switchAfterS']:.0f}s)")
    return 0


def _switch(args: argparse.Namespace) -> int:
    _, url, headers = _setup(args)
    try:
        response = requests.post(f"{url}/tree/{args.distributor}/target", json={"target": args.leaf},
                                 headers=headers, timeout=_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ConfigError(f"no controller at {url}: {type(exc).__name__}") from None
    switched = _answer(response)
    print(f"{args.distributor} now copies to {switched.get(args.distributor, args.leaf)}")
    return 0
