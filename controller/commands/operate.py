"""``ferry pause|resume``, ``ferry workers cordon|drain|uncordon|show``, ``ferry autobalancing``,
``ferry throttle``: an operator's controls over a running fleet, through a controller's REST API.

The controller's options and the calls are :mod:`controller.commands.rest_client`'s (``--config``, ``--url``,
``--token-env``); any controller will do: standbys forward writes.
``ferry workers drain --wait S`` waits until the worker holds no partition (at most S seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ferry.controller.commands.rest_client import ControllerCallError, ControllerClient, add_options


class ControlsError(ControllerCallError):
    """A drain that did not end within ``--wait`` (one line, an exit status)."""


def register_pause(subparsers: argparse._SubParsersAction) -> None:
    for name, text in (
        ("pause", "pause a topic or some of its partitions (they keep their worker)"),
        ("resume", "resume a paused topic or some of its partitions"),
    ):
        parser = subparsers.add_parser(name, help=text)
        add_options(parser)
        parser.add_argument("topic")
        parser.add_argument("partitions", nargs="*", type=int, help="partition ids (default: the whole topic)")
        parser.add_argument("--route", help="only this route, <source>.<destination>")
        parser.set_defaults(func=_pause, action=name)


def register_workers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workers", help="cordon, drain, uncordon or show a worker")
    add_options(parser)
    parser.add_argument("action", choices=["cordon", "drain", "uncordon", "show"])
    parser.add_argument("worker", help="the worker's id")
    parser.add_argument(
        "--wait", type=float, default=0.0, help="drain: wait at most this many seconds until it holds nothing"
    )
    parser.set_defaults(func=_workers)


def register_autobalancing(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("autobalancing", help="show, or turn on/off, the rebalance after workers join")
    add_options(parser)
    parser.add_argument("state", nargs="?", choices=["on", "off"])
    parser.set_defaults(func=_autobalancing)


def register_throttle(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("throttle", help="set a route's throttle across the fleet at run time")
    add_options(parser)
    parser.add_argument("route", help="<source>.<destination>")
    parser.add_argument("--max-records-per-s", type=float, help="records per second (default: no limit)")
    parser.add_argument("--max-bytes-per-s", type=float, help="bytes per second (default: no limit)")
    parser.set_defaults(func=_throttle)


def _print(answer: Any) -> None:
    json.dump(answer, sys.stdout, indent=2)
    print()


def _pause(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.partitions:
        body["partitions"] = args.partitions
    if args.route:
        body["route"] = args.route
    _print(ControllerClient.from_args(args).call("POST", f"/topics/{args.topic}/{args.action}", body))
    return 0


def _workers(args: argparse.Namespace) -> int:
    client = ControllerClient.from_args(args)
    if args.action == "show":
        _print(client.call("GET", f"/workers/{args.worker}"))
        return 0
    answer = client.call("POST", f"/workers/{args.worker}/{args.action}")
    if args.action == "drain" and args.wait > 0:
        answer = wait_drained(client, args.worker, args.wait)
    _print(answer)
    return 0


def wait_drained(
    client: ControllerClient,
    worker: str,
    deadline_s: float,
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
) -> Any:
    """Waits until ``worker`` holds no partition; :class:`ControlsError` after ``deadline_s``."""
    deadline = clock() + deadline_s
    while True:
        answer = client.call("GET", f"/workers/{worker}")
        if answer.get("partitions") == 0:
            return answer
        if clock() >= deadline:
            raise ControlsError(
                f"worker {worker} still holds {answer.get('partitions')} partitions after {deadline_s:g}s"
            )
        sleep(poll_s)


def _autobalancing(args: argparse.Namespace) -> int:
    if args.state is None:
        _print(ControllerClient.from_args(args).call("GET", "/autobalancing"))
    else:
        _print(ControllerClient.from_args(args).call("PUT", "/autobalancing", {"enabled": args.state == "on"}))
    return 0


def _throttle(args: argparse.Namespace) -> int:
    _print(
        ControllerClient.from_args(args).call(
            "PUT",
            f"/routes/{args.route}/throttle",
            {"max_records_per_s": args.max_records_per_s, "max_bytes_per_s": args.max_bytes_per_s},
        )
    )
    return 0
