"""``ferry fleet``: run controllers and workers as containers on a Docker engine.

    ferry fleet engine up|down|status                 a dockerd of Ferry's own (no systemd needed)
    ferry fleet build [--base IMAGE]                  Ferry's image (cached: an unchanged tree builds nothing)
    ferry fleet up --config F --controllers N --workers M [--name NAME] [--image IMAGE]
    ferry fleet status [--name NAME] [--json]
    ferry fleet scale --workers M [--name NAME]
    ferry fleet restart --rolling [--name NAME]
    ferry fleet logs CONTAINER [--tail N]
    ferry fleet targets --dir DIR [--name NAME]       Prometheus file_sd files (deploy/monitoring)
    ferry fleet down [--name NAME]
    ferry fleet ls

Every subcommand takes ``--engine URL`` (default ``$DOCKER_HOST``, else the socket of ``ferry
fleet engine up``) and, except ``engine``, ``build``, ``logs`` and ``ls``, ``--name`` (default
``ferry``). Bad input (an unknown fleet, an engine that does not answer, a missing image) is one
line on stderr and exit status 2; so is a missing Docker SDK (the ``fleet`` extra,
``pip install 'kafka-ferry[fleet]'``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from ferry.common import extras

DEFAULT_FLEET = "ferry"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("fleet", help="run controllers and workers as containers on a Docker engine")
    commands = parser.add_subparsers(dest="fleet_command", required=True, metavar="SUBCOMMAND")

    engine_opt = argparse.ArgumentParser(add_help=False)
    engine_opt.add_argument(
        "--engine", metavar="URL", help="Docker engine (default $DOCKER_HOST, else Ferry's own engine)"
    )
    name_opt = argparse.ArgumentParser(add_help=False)
    name_opt.add_argument("--name", default=DEFAULT_FLEET, help=f"the fleet's name (default {DEFAULT_FLEET})")
    both = [engine_opt, name_opt]

    engine = commands.add_parser("engine", help="start, stop or show a dockerd of Ferry's own ($FERRY_DOCKER_DIR)")
    engine.add_argument("action", choices=["up", "down", "status"])
    engine.set_defaults(func=_engine)

    build = commands.add_parser("build", parents=[engine_opt], help="build Ferry's image (nothing when unchanged)")
    build.add_argument("--base", help="base image (default: a local Debian bookworm minbase made with debootstrap)")
    build.set_defaults(func=_build)

    up = commands.add_parser("up", parents=both, help="start a fleet and wait until every partition is ONLINE")
    up.add_argument("--config", required=True, type=Path, help="Ferry's YAML config (mounted read-only)")
    up.add_argument("--controllers", type=int, default=1, help="controllers (default 1)")
    up.add_argument("--workers", type=int, default=1, help="workers (default 1)")
    up.add_argument("--image", default=None, help="image to run (default ferry:latest, see `ferry fleet build`)")
    up.set_defaults(func=_up)

    status = commands.add_parser("status", parents=both, help="containers, leader, workers' health and partitions")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=_status)

    scale = commands.add_parser("scale", parents=both, help="add workers, or drain and remove them one at a time")
    scale.add_argument("--workers", type=int, required=True, help="how many workers the fleet should have")
    scale.add_argument("--no-rebalance", action="store_true", help="do not rebalance onto added workers at once")
    scale.set_defaults(func=_scale)

    restart = commands.add_parser("restart", parents=both, help="restart the fleet's containers")
    restart.add_argument(
        "--rolling",
        action="store_true",
        required=True,
        help="one at a time, each waiting until every partition is ONLINE again",
    )
    restart.set_defaults(func=_restart)

    logs = commands.add_parser("logs", parents=[engine_opt], help="a container's output")
    logs.add_argument("container", help="the container's name (see `ferry fleet status`)")
    logs.add_argument("--tail", type=int, help="only the last N lines")
    logs.set_defaults(func=_logs)

    down = commands.add_parser("down", parents=both, help="stop and remove every container and network of the fleet")
    down.set_defaults(func=_down)

    targets = commands.add_parser(
        "targets", parents=both, help="write Prometheus file_sd target files for the fleet (deploy/monitoring)"
    )
    targets.add_argument(
        "--dir", type=Path, required=True, help="where ferry-controllers.json and ferry-workers.json go"
    )
    targets.set_defaults(func=_targets)

    ls = commands.add_parser("ls", parents=[engine_opt], help="the fleets on the engine")
    ls.set_defaults(func=_ls)

    for command in commands.choices.values():  # every one talks to the engine through the Docker SDK
        command.set_defaults(func=extras.needing("fleet", "fleet", command.get_default("func")))


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _client(args: argparse.Namespace) -> Any:
    from ferry.fleet.engine import connect

    return connect(args.engine)


def _manager(args: argparse.Namespace) -> Any:
    from ferry.fleet.manager import FleetManager

    # The rolling restart reads the ZooKeeper election; kazoo's connection chatter is not news.
    logging.getLogger("kazoo.client").setLevel(logging.WARNING)
    return FleetManager(client=_client(args), name=args.name, log=_say)


def _engine(args: argparse.Namespace) -> int:
    from ferry.fleet import engine

    if args.action == "up":
        print(engine.up())
    elif args.action == "down":
        print("stopped" if engine.down() else "not running")
    else:
        state = engine.status()
        print(f"{state['state']}  {state['url']}  pid {state['pid'] or '-'}  log {state['log']}")
    return 0


def _build(args: argparse.Namespace) -> int:
    from ferry.fleet.image import build

    result = build(_client(args), base=args.base)
    what = "built" if result.built_image else "up to date (nothing built)"
    base = "; base image built" if result.built_base else ""
    print(f"{result.tag}: {what}{base}, {result.seconds:.1f} s (also tagged ferry:latest)")
    return 0


def _up(args: argparse.Namespace) -> int:
    from ferry.fleet.image import DEFAULT_IMAGE

    manager = _manager(args)
    manager.up(args.config, args.controllers, args.workers, args.image or DEFAULT_IMAGE)
    _print_status(manager.status())
    return 0


def _status(args: argparse.Namespace) -> int:
    status = _manager(args).status()
    if args.json:
        print(json.dumps(status, indent=1, sort_keys=True))
    else:
        _print_status(status)
    return 0


def _scale(args: argparse.Namespace) -> int:
    manager = _manager(args)
    manager.scale(args.workers, rebalance=not args.no_rebalance)
    _print_status(manager.status())
    return 0


def _restart(args: argparse.Namespace) -> int:
    manager = _manager(args)
    manager.restart_rolling()
    _print_status(manager.status())
    return 0


def _logs(args: argparse.Namespace) -> int:
    from ferry.fleet.manager import logs

    sys.stdout.write(logs(_client(args), args.container, args.tail))
    return 0


def _down(args: argparse.Namespace) -> int:
    removed = _manager(args).down()
    print(f"fleet {args.name}: removed {len(removed)} container(s)")
    return 0


def _targets(args: argparse.Namespace) -> int:
    groups = _manager(args).scrape_targets()
    args.dir.mkdir(parents=True, exist_ok=True)
    for file, content in groups.items():
        # Written whole, then renamed: Prometheus never reads half a file.
        partial = args.dir / f".{file}.tmp"
        partial.write_text(json.dumps(content, indent=1) + "\n")
        partial.replace(args.dir / file)
        print(f"{args.dir / file}: {len(content)} target(s)")
    return 0


def _ls(args: argparse.Namespace) -> int:
    from ferry.fleet.manager import fleets

    for name in fleets(_client(args)):
        print(name)
    return 0


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def format_status(status: dict[str, Any]) -> str:
    """The status as a table: one row per container, then the leader and the partition summary."""
    rows = []
    for m in status["members"]:
        states = m.get("states")
        detail = (", ".join(f"{n} {s}" for s, n in sorted(states.items()) if n) or None) if states else None
        rows.append(
            [m["name"], m["role"], m["state"], m["port"], m.get("leader"), m["health"], m.get("partitions"), detail]
        )
    header = ["NAME", "ROLE", "STATE", "PORT", "LEADER", "HEALTH", "PARTITIONS", "REPORTED"]
    table = [header, *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    summary = status.get("summary")
    parts = (
        f"{summary['partitions']} partitions: {summary['online']} ONLINE, {summary['offline']} OFFLINE, "
        f"{summary['error']} ERROR"
        if summary
        else "partitions: no controller answers"
    )
    lines.append(f"fleet {status['fleet']}: leader {status['leader'] or 'NONE'}; {parts}")
    return "\n".join(lines)


def _print_status(status: dict[str, Any]) -> None:
    print(format_status(status))
