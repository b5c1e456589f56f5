"""``ferry groups list|translate|sync``: consumer-group offsets translated to the destination, now.

Runs the checkpoint code (controller/groups/checkpoints.py) once, from the config, with no controller
needed (a failover is when the controllers may be gone too); ``--json`` shapes translations as
``GET /groups`` does (:mod:`controller.api.rest_json`):

- ``list``: the groups each route's ``groups`` patterns select at its source;
- ``translate GROUP``: per topic and partition, the source committed offset, the destination offset,
  the method (exact | timestamp | mirrormaker2 | ahead | pending) and the lag;
- ``sync GROUP``: translate, write the checkpoints, and commit the offsets on the destination
  when the group has no active member there (only forward).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ferry.common.cli import config_and_json_anywhere, require_option
from ferry.common.config import load_config


def register(subparsers: argparse._SubParsersAction) -> None:
    common = config_and_json_anywhere(
        define=lambda parser: parser.add_argument("--route", help="only this route, <source>.<destination>")
    )
    parser = subparsers.add_parser(
        "groups", parents=[common], help="consumer groups: list, translate offsets to the destination, sync them"
    )
    actions = parser.add_subparsers(dest="groups_action", required=True, metavar="ACTION")
    actions.add_parser("list", parents=[common], help="groups selected by each route's groups patterns")
    for name, text in (
        ("translate", "translate a group's committed offsets to the destination"),
        ("sync", "translate, then commit on the destination if the group is idle there"),
    ):
        sub = actions.add_parser(name, parents=[common], help=text)
        sub.add_argument("group")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ferry.controller.api.rest_json import sync_json, translation_json
    from ferry.controller.groups.checkpoints import Checkpointer

    require_option(args, "config", "--config", "groups")
    config = load_config(args.config)
    route_name = getattr(args, "route", None)
    routes = config.routes_named(route_name)
    as_json = getattr(args, "json", False)
    checkpointer = Checkpointer(config, "cli")
    try:
        out: list[dict[str, Any]] = []
        for route in routes:
            if args.groups_action == "list":
                out.extend({"route": route.name, "group": g} for g in checkpointer.groups(route))
                continue
            translations = checkpointer.translate_group(route, args.group)
            row: dict[str, Any] = {
                "route": route.name,
                "group": args.group,
                "partitions": [translation_json(t) for t in translations],
            }
            if args.groups_action == "sync":
                checkpointer.emit(route, translations)
                row["sync"] = sync_json(checkpointer.sync(route, args.group, translations))
            out.append(row)
    finally:
        checkpointer.close()
    if as_json:
        print(json.dumps(out, indent=2))
        return 0
    for row in out:
        if args.groups_action == "list":
            print(f"{row['route']}\t{row['group']}")
            continue
        for p in row["partitions"]:
            print(
                f"{row['route']}\t{row['group']}\t{p['topic']}/{p['partition']}\tsource {p['sourceOffset']}"
                f"\t-> {p['destinationTopic']}/{p['partition']} {p['destinationOffset']}\t{p['method']}\tlag {p['lag']}"
            )
        if "sync" in row:
            sync = row["sync"]
            print(
                f"{row['route']}\t{row['group']}\tsynced {sync['synced']} partitions"
                + (f" ({sync['skipped']})" if sync.get("skipped") else "")
            )
    return 0
