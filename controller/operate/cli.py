"""``ferry pause|resume``, ``ferry workers cordon|drain|uncordon|show``, ``ferry autobalancing``,
``ferry throttle``: an operator's controls over a running fleet, through a controller's REST API.

The controller is ``--url``, else the config's ``controller.rest_host``/``rest_port`` (``--config``).
A bearer token, when the API needs one, comes from the environment variable named by
``--token-env`` (default ``FERRY_TOKEN``). Any controller will do: standbys forward writes.
``ferry workers drain --wait S`` waits until the worker holds no partition (at most S seconds).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import requests

from ferry.common import endpoints
from ferry.common.config import load_config
from ferry.common.errors import ConfigError, FerryError

_TIMEOUT_S = 10.0


class ControlsError(FerryError):
    """The controller refused a control, or none answered (one line, an exit status)."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="Ferry's YAML config file (for the controller's address)")
    parser.add_argument("--url", help="a controller's REST URL (default: from the config)")
    parser.add_argument("--token-env", default="FERRY_TOKEN", help="environment variable holding a bearer token")


def register_pause(subparsers: argparse._SubParsersAction) -> None:
    for name, text in (("pause", "pause a topic or some of its partitions (they keep their worker)"),
                       ("resume", "resume a paused topic or some of its partitions")):
        parser = subparsers.add_parser(name, help=text)
        _common(parser)
        parser.add_argument("topic")
        parser.add_argument("partitions", nargs="*", type=int, help="partition ids (default: the whole topic)")
        parser.add_argument("--route", help="only this route, <source>.<destination>")
        parser.set_defaults(func=_pause, action=name)


def register_workers(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("workers", help="cordon, drain, uncordon or show a worker")
    _common(parser)
    parser.add_argument("action", choices=["cordon", "drain", "uncordon", "show"])
    parser.add_argument("worker", help="the worker's id")
    parser.add_argument("--wait", type=float, default=0.0, help="drain: wait at most this many seconds until it holds nothing")
    parser.set_defaults(func=_workers)


def register_autobalancing(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("autobalancing", help="show, or turn on/off, the rebalance after workers join")
    _common(parser)
    parser.add_argument("state", nargs="?", choices=["on", "off"])
    parser.set_defaults(func=_autobalancing)


def register_throttle(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("throttle", help="set a route's throttle across the fleet at run time")
    _common(parser)
    parser.add_argument("route", help="<source>.<destination>")
    parser.add_argument("--max-records-per-s", type=float, help="records per second (default: no limit)")
    parser.add_argument("--max-bytes-per-s", type=float, help="bytes per second (default: no limit)")
    parser.set_defaults(func=_throttle)


def _client(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    if args.url:
        url = args.url
    elif args.config:
        config = load_config(args.config)
        url = endpoints.local_url("http", config.controller.rest_host, config.controller.rest_port)
    else:
        raise ConfigError("give the controller as --url URL or --config FILE")
    token = os.environ.get(args.token_env)
    return url.rstrip("/"), ({"Authorization": f"Bearer {token}"} if token else {})


def call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """The controller's JSON answer; a refusal or no answer is a :class:`ControlsError`."""
    url, headers = _client(args)
    try:
        response = requests.request(method, f"{url}{path}", json=body, headers=headers, timeout=_TIMEOUT_S)
    except requests.RequestException as exc:
        raise ControlsError(f"no controller at {url}: {type(exc).__name__}") from None
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if response.status_code >= 400:
        message = answer.get("error") if isinstance(answer, dict) else response.text[:200]
        raise ControlsError(f"the controller answered {response.status_code}: {message}")
    return answer


def _print(answer: Any) -> None:
    json.dump(answer, sys.stdout, indent=2)
    print()


def _pause(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.partitions:
        body["partitions"] = args.partitions
    if args.route:
        body["route"] = args.route
    _print(call(args, "POST", f"/topics/{args.topic}/{args.action}", body))
    return 0


def _workers(args: argparse.Namespace) -> int:
    if args.action == "show":
        _print(call(args, "GET", f"/workers/{args.worker}"))
        return 0
    answer = call(args, "POST", f"/workers/{args.worker}/{args.action}")
    if args.action == "drain" and args.wait > 0:
        answer = wait_drained(args, args.worker, args.wait)
    _print(answer)
    return 0


def wait_drained(args: argparse.Namespace, worker: str, deadline_s: float, poll_s: float = 1.0) -> Any:
    """Waits until ``worker`` holds no partition; :class:`ControlsError` after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while True:
        answer = call(args, "GET", f"/workers/{worker}")
        if answer.get("partitions") == 0:
            return answer
        if time.monotonic() >= deadline:
            raise ControlsError(f"worker {worker} still holds {answer.get('partitions')} partitions after {deadline_s:g}s")
        time.sleep(poll_s)


def _autobalancing(args: argparse.Namespace) -> int:
    if args.state is None:
        _print(call(args, "GET", "/autobalancing"))
    else:
        _print(call(args, "PUT", "/autobalancing", {"enabled": args.state == "on"}))
    return 0


def _throttle(args: argparse.Namespace) -> int:
    _print(call(args, "PUT", f"/routes/{args.route}/throttle",
                {"max_records_per_s": args.max_records_per_s, "max_bytes_per_s": args.max_bytes_per_s}))
    return 0
