"""``ferry offsets translate``: one consumer position translated between a route's clusters, from the config.

Runs :class:`controller.groups.translate.OffsetTranslator` once, no controller needed (a failover is when
the controllers may be gone too); ``--json`` prints what ``GET /translate`` answers.
"""

from __future__ import annotations

import argparse
import json

from ferry.controller.groups.translate import REVERSE, OffsetTranslator


def register(subparsers: argparse._SubParsersAction) -> None:
    from ferry.common.cli import config_and_json_anywhere

    common = config_and_json_anywhere(json_help="JSON output (as GET /translate answers)")
    parser = subparsers.add_parser(
        "offsets", parents=[common], help="offsets of any consumer: translate a position between a route's clusters"
    )
    actions = parser.add_subparsers(dest="offsets_action", required=True, metavar="ACTION")
    sub = actions.add_parser(
        "translate",
        parents=[common],
        help="the destination position that continues from a source position (or back, with --reverse)",
        description="Translates one consumer position (the next offset to read) exactly from the route's offset "
        "map, or by timestamp where no map covers it (marked so). No controller needed.",
    )
    sub.add_argument("--route", help="the route, <source>.<destination> (optional with one route)")
    sub.add_argument("--topic", required=True, help="the topic's name at the source")
    sub.add_argument("--partition", required=True, type=int)
    sub.add_argument("--offset", required=True, type=int, help="the position to translate")
    sub.add_argument("--reverse", action="store_true", help="translate a destination position back to the source")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ferry.common.cli import require_option
    from ferry.common.config import load_config
    from ferry.controller.api.rest_json import offset_translation_json

    require_option(args, "config", "--config", "offsets translate")
    config = load_config(args.config)
    translator = OffsetTranslator(config, "cli")
    try:
        result = translator.translate_offset(args.route, args.topic, args.partition, args.offset, args.reverse)
    finally:
        translator.close()
    shaped = offset_translation_json(result)
    if getattr(args, "json", False):
        print(json.dumps(shaped, indent=2))
        return 0
    src, dst = f"{result.topic}/{result.partition}", f"{result.destination_topic}/{result.partition}"
    frm, to = (dst, src) if result.direction == REVERSE else (src, dst)
    print(f"{result.route}\t{frm} {result.offset}\t-> {to} {shaped['translatedOffset']}\t{result.method}")
    return 0
