"""``ferry zk``: read Ferry's ZooKeeper layout the way an operator wants to see it.

``tree`` walks the layout with sizes, versions and whether a node is ephemeral; ``get`` decodes
one node; ``ideal`` and ``external`` show one topic's ideal state and external view side by
side with the partition numbers; ``diff`` lists where they disagree (the pure comparison lives
in :mod:`common.core.diff`). Everything prints readably, or as JSON with ``--json``.

Read-only: this module never writes to ZooKeeper.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from ferry.common.cli import config_and_json_anywhere, require_option
from ferry.common.config import FerryConfig, load_config
from ferry.common.core import naming as topic_naming
from ferry.common.errors import FerryError
from ferry.common.model import (
    ExternalView,
    IdealState,
    decode,
)
from ferry.common.tables import print_table
from ferry.common.zk.layout import ZkLayout, connect, make_client
from ferry.common.zk.state import StateReader

if TYPE_CHECKING:
    from ferry.common.core.diff import Mismatch


class InspectError(FerryError):
    """A path or topic that is not in Ferry's layout."""


def _decoded(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return decode(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")


def walk(client: KazooClient, path: str) -> Iterator[dict[str, Any]]:
    """Depth-first: every node under ``path`` (included) with its stat and decoded data."""
    try:
        data, stat = client.get(path)
        children = sorted(client.get_children(path))
    except NoNodeError:
        return
    yield {
        "path": path,
        "size": stat.dataLength,
        "version": stat.version,
        "ephemeral": bool(stat.ephemeralOwner),
        "children": len(children),
        "data": _decoded(data),
    }
    for child in children:
        yield from walk(client, path.rstrip("/") + "/" + child)


def get_node(client: KazooClient, path: str) -> dict[str, Any]:
    try:
        data, stat = client.get(path)
    except NoNodeError as exc:
        raise InspectError(f"no node at {path}") from exc
    return {
        "path": path,
        "size": stat.dataLength,
        "version": stat.version,
        "ephemeral": bool(stat.ephemeralOwner),
        "data": _decoded(data),
    }


def _route(config: FerryConfig, route: str | None) -> str:
    return config.route(route).name


def destination_name(config: FerryConfig, route: str, topic: str) -> str | None:
    """``topic``'s name on the destination of ``route`` when the route renames it, else None.

    None for identity naming and for routes the config does not know (a layout left by an
    older config): the views then show the source name alone, as before.
    """
    for configured in config.routes:
        if configured.name == route:
            return None if topic_naming.is_identity(configured) else topic_naming.destination_topic(configured, topic)
    return None


def node_destination(config: FerryConfig, layout: ZkLayout, path: str) -> str | None:
    """The destination topic name of a node under a renaming route's ideal state or external view."""
    for route in config.routes:
        for base in (
            layout.route_topics(route.name),
            layout.route_external(route.name),
            layout.removed.rstrip("/") + "/" + route.name,
        ):
            prefix = base.rstrip("/") + "/"
            if path.startswith(prefix) and len(path) > len(prefix):
                return destination_name(config, route.name, path[len(prefix) :].split("/", 1)[0])
    return None


def read_ideal(client: KazooClient, layout: ZkLayout, route: str, topic: str) -> IdealState:
    ideal = StateReader(client, layout).ideal_state(route, topic)
    if ideal is None:
        raise InspectError(f"topic {topic!r} is not mirrored on route {route}")
    return ideal


def read_external(client: KazooClient, layout: ZkLayout, route: str, topic: str) -> ExternalView:
    return StateReader(client, layout).external_view(route, topic) or ExternalView(route=route, topic=topic)


def topic_table(ideal: IdealState, view: ExternalView) -> list[dict[str, Any]]:
    rows = []
    for partition in range(ideal.partitions):
        reported: Mapping[str, Any] = view.partitions.get(partition) or {}
        rows.append(
            {
                "partition": partition,
                "ideal": ideal.assignment.get(partition),
                "worker": reported.get("worker"),
                "state": reported.get("state"),
                "reason": reported.get("reason"),
            }
        )
    return rows


def mismatches(client: KazooClient, layout: ZkLayout, config: FerryConfig) -> list[Mismatch]:
    """Where the ideal state and the external view disagree, for every mirrored topic."""
    from ferry.common.core.diff import compare

    reader = StateReader(client, layout)
    routes = [r.name for r in config.routes]
    ideal, _ = reader.ideal_states(routes)
    views = {key: reader.external_view(key.route, key.topic) or ExternalView(key.route, key.topic) for key in ideal}
    live = set(reader.children(layout.live_workers))
    return compare(ideal, views, live)


def _short(data: Any, limit: int = 70) -> str:
    if data is None:
        return ""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def register(subparsers: argparse._SubParsersAction) -> None:
    # --config and --json are accepted before and after the action: `ferry zk ideal T --config F`.
    anywhere = config_and_json_anywhere(
        "Ferry's YAML config (ZooKeeper address and root); required", "print JSON for scripts"
    )
    parser = subparsers.add_parser("zk", help="inspect Ferry's state in ZooKeeper (read-only)", parents=[anywhere])
    actions = parser.add_subparsers(dest="zk_action", required=True)
    tree_parser = actions.add_parser("tree", help="every node under the root: size, version, data", parents=[anywhere])
    tree_parser.add_argument("path", nargs="?", help="start here instead of the root")
    get_parser = actions.add_parser("get", help="one node, decoded", parents=[anywhere])
    get_parser.add_argument("path", help="absolute, or relative to the root")
    for name, help_text in (("ideal", "a topic's ideal state"), ("external", "a topic's external view")):
        topic_parser = actions.add_parser(name, help=help_text, parents=[anywhere])
        topic_parser.add_argument("topic")
        topic_parser.add_argument("--route", help="needed when several routes are configured")
    diff_parser = actions.add_parser(
        "diff", help="where the ideal state and the external view disagree", parents=[anywhere]
    )
    diff_parser.add_argument("--route", help=argparse.SUPPRESS)
    parser.set_defaults(func=_run)


def _absolute(layout: ZkLayout, path: str | None) -> str:
    if not path:
        return layout.root
    if path.startswith("/"):
        return path
    return layout.root.rstrip("/") + "/" + path


def _run(args: argparse.Namespace) -> int:
    require_option(args, "config", "--config", "zk")
    args.json = getattr(args, "json", False)
    logging.getLogger("kazoo").setLevel(logging.WARNING)  # connection chatter would mix with the output
    config = load_config(args.config)
    layout = ZkLayout(config.zookeeper.root)
    client = make_client(config.zookeeper)
    connect(client, config.zookeeper)  # unreachable, refused: one line (UnreachableError, ConfigError)
    try:
        return _dispatch(args, client, layout, config)
    except KazooException as exc:  # the connection lost for longer than the retry deadline, or refused
        raise InspectError(f"ZooKeeper at {config.zookeeper.connect}: {type(exc).__name__} {exc}".rstrip()) from None
    finally:
        client.stop()
        client.close()


def _dispatch(args: argparse.Namespace, client: KazooClient, layout: ZkLayout, config: FerryConfig) -> int:
    action = args.zk_action
    if action == "tree":
        nodes = list(walk(client, _absolute(layout, args.path)))
        if not nodes:
            raise InspectError(f"no node at {_absolute(layout, args.path)}")
        for node in nodes:
            destination = node_destination(config, layout, node["path"])
            if destination is not None:
                node["destination"] = destination
        if args.json:
            json.dump(nodes, sys.stdout, indent=1)
            print()
        else:
            columns = ["path", "size", "version", "ephemeral", "data"]
            if any("destination" in n for n in nodes):  # only a renaming route adds the column
                columns.insert(1, "destination")
            print_table(
                [{**n, "ephemeral": "yes" if n["ephemeral"] else "", "data": _short(n["data"])} for n in nodes],
                columns,
            )
        return 0
    if action == "get":
        node = get_node(client, _absolute(layout, args.path))
        if args.json:
            json.dump(node, sys.stdout, indent=1)
            print()
        else:
            flag = ", ephemeral" if node["ephemeral"] else ""
            print(f"{node['path']}  ({node['size']} bytes, version {node['version']}{flag})")
            print(json.dumps(node["data"], indent=2, sort_keys=True))
        return 0
    if action in ("ideal", "external"):
        route = _route(config, args.route)
        ideal = read_ideal(client, layout, route, args.topic)
        view = read_external(client, layout, route, args.topic)
        rows = topic_table(ideal, view)
        destination = destination_name(config, route, args.topic)
        if args.json:
            payload: Any = ideal.assignment if action == "ideal" else view.partitions
            body: dict[str, Any] = {"route": route, "topic": args.topic, "destination": destination or args.topic}
            json.dump({**body, action: {str(k): v for k, v in payload.items()}}, sys.stdout, indent=1)
            print()
        else:
            renamed = f" (destination {destination})" if destination else ""
            print(f"{route}/{args.topic}{renamed}: {ideal.partitions} partitions")
            columns = ["partition", "ideal"] if action == "ideal" else ["partition", "worker", "state", "reason"]
            print_table(rows, columns)
        return 0
    found = mismatches(client, layout, config)
    destinations = [destination_name(config, m.partition.route, m.partition.topic) for m in found]
    if args.json:
        json.dump(
            [{**m.to_json(), "destination": d or m.partition.topic} for m, d in zip(found, destinations, strict=True)],
            sys.stdout,
            indent=1,
        )
        print()
    elif not found:
        print("ideal state and external view agree")
    else:
        columns = ["partition", "problem", "ideal", "reported", "reason"]
        if any(destinations):  # only a renaming route adds the column
            columns.insert(1, "destination")
        print_table(
            [
                {
                    "partition": str(m.partition),
                    "destination": d,
                    "problem": m.problem,
                    "ideal": m.ideal_worker,
                    "reported": m.reported_worker,
                    "reason": m.reason,
                }
                for m, d in zip(found, destinations, strict=True)
            ],
            columns,
        )
    return 1 if found else 0
