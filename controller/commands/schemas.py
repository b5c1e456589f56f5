"""``ferry schemas --config FILE [--url URL] [--json] status|sync|diff``: the schema distributor
through a controller's REST API (any controller; a standby forwards to the leader).

- ``status``: per primary subject, its latest version and ID, and each target's state.
- ``sync``: a distribution pass now; what it copied, and the conflicts. Exit 1 when not in sync.
- ``diff``: only what differs (missing versions with their IDs, conflicts). Exit 1 when anything does.

The controller is found and called as :mod:`controller.commands.rest_client` says (``--url``, else the
config's; the bearer token from ``--token-env``, default ``$FERRY_TOKEN``). Errors (no controller,
a refused request) are one line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ferry.common.errors import FerryError
from ferry.controller.commands.rest_client import (
    ControllerClient,
    ControllerRefused,
    ControllerUnreachable,
    add_options,
)

# A pass reads every subject of every registry: give it time.
TIMEOUT_S = 120.0


class SchemasCliError(FerryError):
    """The controller could not be asked, or refused."""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("schemas", help="schema distribution: status, sync now, diff")
    add_options(parser, config_required=True, config_help="Ferry's YAML config file (finds the controller)")
    parser.add_argument("--json", action="store_true", help="print the controller's JSON answer")
    parser.add_argument("action", choices=("status", "sync", "diff"))
    parser.set_defaults(func=_run)


def _ask(args: argparse.Namespace, method: str, path: str) -> dict[str, Any]:
    client = ControllerClient.from_args(args, timeout_s=TIMEOUT_S)
    try:
        body = client.call(method, path)
    except ControllerUnreachable as exc:
        raise SchemasCliError(f"the controller at {exc.url} did not answer: {exc.reason}") from None
    except ControllerRefused as exc:
        if not isinstance(exc.answer, dict):
            raise SchemasCliError(f"{method} {client.url}{path} answered {exc.status} without JSON") from None
        raise SchemasCliError(f"{method} {path}: {exc.answer.get('error', exc.text)} ({exc.status})") from None
    if not isinstance(body, dict):
        raise SchemasCliError(f"{method} {client.url}{path} answered without a JSON object")
    return body


def _run(args: argparse.Namespace) -> int:
    report = _ask(args, "POST", "/schemas/sync") if args.action == "sync" else _ask(args, "GET", "/schemas")
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    elif args.action == "diff":
        _print_diff(report)
    else:
        _print_status(report, copied=args.action == "sync")
    differs = not report.get("inSync", False)
    return 1 if differs and args.action in ("sync", "diff") else 0


def _print_status(report: dict[str, Any], copied: bool) -> None:
    age = time.time() - float(report.get("checkedAt", time.time()))
    print(f"primary {report['primary']}, targets {', '.join(report['targets']) or '-'}; checked {age:.0f}s ago")
    rows: list[tuple[str, ...]] = [("SUBJECT", "VERSION", "ID", "TARGET", "TARGET SUBJECT", "STATE")]
    for subject in report["subjects"]:
        for target, state in sorted(subject["targets"].items()):
            missing = state["missingVersions"]
            shown = state["state"] + (f" (missing {','.join(map(str, missing))})" if missing else "")
            states = set(subject.get("states", {}).values())
            name = subject["subject"] + (" (soft-deleted)" if states == {"DISABLED"} else "")
            rows.append((name, str(subject["version"]), str(subject["id"]), target, state["subject"], shown))
    _table(rows)
    if copied:
        for entry in report["copied"]:
            print(
                f"copied {entry['subject']} v{entry['version']} (ID {entry['id']}) -> "
                f"{entry['target']} {entry['targetSubject']}"
            )
        for entry in report.get("stateChanged", []):
            print(
                f"state of {entry['target']} {entry['targetSubject']} v{entry['version']} -> {entry['state']} "
                f"(as on the primary)"
            )
    for target, why in report.get("unreachable", {}).items():
        print(f"UNREACHABLE: {target}: {why}")
    for conflict in report["conflicts"]:
        print(f"CONFLICT: {conflict['reason']}")
    print(
        f"{len(report['subjects'])} subject(s); out of sync: "
        + ", ".join(f"{t} {n}" for t, n in report["outOfSync"].items())
        + f"; conflicts: {len(report['conflicts'])}"
    )


def _print_diff(report: dict[str, Any]) -> None:
    lines = []
    for subject in report["subjects"]:
        for target, state in sorted(subject["targets"].items()):
            if state["state"] == "in_sync":
                continue
            ids = [f"v{v} (ID {subject['versions'][str(v)]})" for v in state["missingVersions"]]
            lines.append(
                f"{target}: {state['subject']} lacks {', '.join(ids)} of {subject['subject']}"
                + (f"; conflict: {state['conflict']}" if state["conflict"] else "")
            )
    for line in lines:
        print(line)
    if not lines:
        print(f"every subject of {report['primary']} is in sync on {', '.join(report['targets'])}")


def _table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
