"""``ferry failover``'s options, its dry run's summary and the confirmation an unplanned failover asks for
(controller/commands/failover.py), with fake standard streams."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry.cli import build_parser, main
from ferry.controller.commands import failover as failover_cli
from ferry.controller.errors import BadRequest
from ferry.controller.failover import states as fsm

pytestmark = pytest.mark.unit


class Terminal(io.StringIO):
    """A standard input that is a terminal, with the operator's answer typed in advance."""

    def isatty(self) -> bool:
        return True


def _args(*argv: str) -> Any:
    return build_parser().parse_args(["failover", "--route", "src.dst", *argv])


UNPLANNED_PLAN: dict[str, Any] = {
    "route": "src.dst",
    "source": "src",
    "destination": "dst",
    "dryRun": True,
    "state": "ACTIVE",
    "planned": False,
    "phases": ["REQUESTED", "SYNCING", "FAILED_OVER"],
    "groups": None,
    "topics": None,
    "partitions": {"orders": 2},
    "plan": {
        "sourceEndsSeenAt": 1700000000.5,
        "sourceUnseenS": 20.0,
        "rpo": [
            {
                "topic": "orders",
                "partition": 0,
                "sourceEnd": 350,
                "copied": 300,
                "notCopied": 50,
                "notCopiedUpperEstimate": 80,
                "produceRate": 1.5,
                "lastCopyMs": 1,
            },
            {
                "topic": "orders",
                "partition": 1,
                "sourceEnd": 10,
                "copied": 10,
                "notCopied": 0,
                "notCopiedUpperEstimate": 0,
                "produceRate": 0.0,
                "lastCopyMs": 2,
            },
        ],
        "notCopied": 50,
        "notCopiedUpperEstimate": 80,
        "rpoNote": None,
        "groups": [
            {
                "group": "app-1",
                "partitions": [
                    {
                        "topic": "orders",
                        "partition": 0,
                        "method": "exact",
                        "sourceOffset": 200,
                        "destinationOffset": 200,
                        "committed": None,
                    }
                ],
            }
        ],
    },
}


def test_the_failover_options_default_to_asking_and_doing_it() -> None:
    args = _args()
    assert (args.planned, args.dry_run, args.yes) == (False, False, False)
    assert failover_cli.needs_confirmation(args)
    for given in (["--yes"], ["--dry-run"], ["--planned"], ["--planned", "--dry-run"]):
        assert not failover_cli.needs_confirmation(_args(*given)), given


def test_an_unplanned_failover_without_yes_is_refused_when_stdin_is_not_a_terminal() -> None:
    with pytest.raises(BadRequest, match=r"^the unplanned failover needs --yes when not run on a terminal$"):
        failover_cli.refuse_without_terminal(_args(), io.StringIO("src.dst\n"))
    for given in (["--yes"], ["--dry-run"], ["--planned"]):
        failover_cli.refuse_without_terminal(_args(*given), io.StringIO())
    failover_cli.refuse_without_terminal(_args(), Terminal())  # a terminal: it will ask


@pytest.mark.parametrize(
    ("typed", "confirmed"),
    [("src.dst\n", True), ("  src.dst  \n", True), ("y\n", False), ("yes\n", False), ("dst.src\n", False), ("", False)],
    ids=["route", "route-with-spaces", "y", "yes", "another-route", "end-of-input"],
)
def test_only_the_route_name_typed_confirms_an_unplanned_failover(typed: str, confirmed: bool) -> None:
    out = io.StringIO()
    assert failover_cli.confirmed("src.dst", UNPLANNED_PLAN, Terminal(typed), out) is confirmed
    shown = out.getvalue()
    assert shown.endswith(failover_cli.PROMPT)
    assert "unplanned failover (the source is not waited for) of route src.dst, src -> dst; now ACTIVE" in shown


def test_the_summary_says_what_an_unplanned_failover_gives_up_and_what_it_commits() -> None:
    lines = failover_cli.summary(UNPLANNED_PLAN)
    assert lines[1] == "phases: REQUESTED -> SYNCING -> FAILED_OVER; the route stops copying at SYNCING"
    assert lines[2] == "topics (partitions): orders (2)"
    assert lines[3] == (
        "RPO: between 50 and about 80 records not copied "
        "(source log ends last seen at 2023-11-14 22:13:20 UTC, 20 s before this report)"
    )
    assert "  orders/0: source end 350, copied 300, not copied between 50 and about 80 (1.5 records/s)" in lines
    assert "  orders/1: source end 10, copied 10, not copied between 0 and about 0 (0 records/s)" in lines
    assert "groups committed on dst: app-1" in lines
    assert "  app-1 orders/0: none -> 200 (exact)" in lines


def test_the_rpo_line_says_when_the_produce_rate_is_unknown_or_the_source_was_never_seen() -> None:
    unrated = {
        **UNPLANNED_PLAN["plan"],
        "rpo": [{**UNPLANNED_PLAN["plan"]["rpo"][0], "notCopiedUpperEstimate": 50, "produceRate": None}],
        "notCopiedUpperEstimate": 50,
        "rpoNote": "the produce rate at the source is unknown for 1 partition (...)",
    }
    assert failover_cli.rpo_line(unrated) == (
        "RPO: between 50 and about 50 records not copied (source log ends last seen at 2023-11-14 22:13:20 UTC, "
        "20 s before this report); the produce rate at the source is unknown for 1 partition (...)"
    )
    lines = failover_cli.summary({**UNPLANNED_PLAN, "plan": unrated})
    assert "  orders/0: source end 350, copied 300, not copied 50 (produce rate unknown)" in lines
    never = {
        **UNPLANNED_PLAN["plan"],
        "sourceEndsSeenAt": None,
        "sourceUnseenS": 0.0,
        "rpo": [{**UNPLANNED_PLAN["plan"]["rpo"][0], "sourceEnd": None, "notCopied": None}],
        "notCopied": 0,
        "notCopiedUpperEstimate": 0,
        "rpoNote": "no source log ends the leader saw",
    }
    assert failover_cli.rpo_line(never) == (
        "RPO: between 0 and about 0 records not copied (source log ends last seen never); "
        "no source log ends the leader saw"
    )
    assert "  orders/0: source end None, copied 300, not copied unknown (never seen at the source)" in (
        failover_cli.summary({**UNPLANNED_PLAN, "plan": never})
    )


def test_the_summary_of_a_planned_failover_says_what_is_left_to_copy() -> None:
    plan = {
        **UNPLANNED_PLAN,
        "planned": True,
        "phases": ["REQUESTED", "DRAINING", "SYNCING", "FAILED_OVER"],
        "plan": {
            "partitions": [{"topic": "orders", "partition": 0, "sourceEnd": 300, "committed": 290, "lag": 10}],
            "groups": [],
        },
    }
    lines = failover_cli.summary(plan)
    assert lines[0] == "planned failover of route src.dst, src -> dst; now ACTIVE"
    assert "  orders/0: source end 300, copied 290, still to copy 10" in lines
    assert "groups committed on dst: none" in lines


def test_the_phases_ahead_start_where_a_failover_in_progress_stopped() -> None:
    assert fsm.phases_ahead(fsm.ACTIVE, planned=True) == [fsm.REQUESTED, fsm.DRAINING, fsm.SYNCING, fsm.FAILED_OVER]
    assert fsm.phases_ahead(fsm.ACTIVE, planned=False) == [fsm.REQUESTED, fsm.SYNCING, fsm.FAILED_OVER]
    assert fsm.phases_ahead(fsm.REQUESTED, planned=False) == [fsm.SYNCING, fsm.FAILED_OVER]
    assert fsm.phases_ahead(fsm.DRAINING, planned=True) == [fsm.DRAINING, fsm.SYNCING, fsm.FAILED_OVER]
    assert fsm.phases_ahead(fsm.SYNCING, planned=False) == [fsm.SYNCING, fsm.FAILED_OVER]


def test_the_command_refuses_before_connecting_to_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                # Nothing listens there: a command that tried to connect would say so, after its retries.
                "zookeeper": {"connect": "127.0.0.1:1", "root": "/ferry/refused", "retry_deadline_s": 60},
                "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:1"}},
                "routes": [{"source": "src", "destination": "dst"}],
            }
        )
    )
    monkeypatch.setattr("sys.stdin", io.StringIO("src.dst\n"))
    assert main(["failover", "--config", str(config), "--route", "src.dst"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "ferry: the unplanned failover needs --yes when not run on a terminal"
