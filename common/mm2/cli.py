"""``ferry import-mm2``: a MirrorMaker 2 properties file as Ferry's YAML config (stdout), and what was not converted
and what works differently (stderr)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ferry.common.config import parse_config
from ferry.common.errors import ConfigError
from ferry.common.mm2 import convert, properties

HEADER = (
    "# Converted from MirrorMaker 2's {path} by `ferry import-mm2`.\n"
    "# Check zookeeper.connect; settings without a Ferry counterpart, and notes, were listed on stderr.\n"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "import-mm2",
        help="convert a MirrorMaker 2 properties file to Ferry's config (YAML on stdout)",
        description="Reads MirrorMaker 2's properties (clusters, flows, filters, replication policy, checkpoints, "
        "heartbeats, exactly once) and prints Ferry's YAML config. Each setting without a Ferry counterpart, and "
        "each note on what works differently in Ferry, is listed on stderr, one line each.",
    )
    parser.add_argument("properties", help="MirrorMaker 2's properties file (e.g. mm2.properties)")
    parser.add_argument(
        "--zookeeper",
        default="localhost:2181",
        metavar="HOST:PORT[,...]",
        help="Ferry's ZooKeeper ensemble (zookeeper.connect; default localhost:2181)",
    )
    parser.add_argument(
        "--takeover",
        action="store_true",
        help="continue MirrorMaker 2's mirror: each route starts where MirrorMaker 2 stopped "
        "(its offsets and checkpoints), instead of copying again",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    path = Path(args.properties)
    try:
        text = path.read_text(encoding="latin-1" if path.suffix == ".properties" and _not_utf8(path) else "utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        conversion = convert.convert(properties.loads(text), zookeeper=args.zookeeper, takeover=args.takeover)
    except ValueError as exc:  # PropertiesError and Mm2Error
        raise ConfigError(f"{path}: {exc}") from None
    parse_config(conversion.config, origin=f"the config converted from {path}")  # never print what ferry refuses
    for item in conversion.not_converted:
        print(item.line(), file=sys.stderr)
    for note in conversion.notes:
        print(note.line(), file=sys.stderr)
    sys.stdout.write(HEADER.format(path=path.name))
    sys.stdout.write(yaml.safe_dump(conversion.config, sort_keys=False, default_flow_style=False, width=120))
    return 0


def _not_utf8(path: Path) -> bool:
    """Java reads a properties file given as a stream in ISO 8859-1; MirrorMaker 2 reads UTF-8 files fine too."""
    try:
        path.read_bytes().decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True
