"""The pure parts of ``ferry audit``: time parsing, route choice, classification, the report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import parse_config
from ferry.pipeline import PipelineError
from ferry.pipeline.audit import build_report, classify, iso_ms, parse_time, pick_route


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1700000000000", 1_700_000_000_000),
        ("2023-11-14T22:13:20Z", 1_700_000_000_000),
        ("2023-11-14T22:13:20.5+00:00", 1_700_000_000_500),
        ("2023-11-15T00:13:20+02:00", 1_700_000_000_000),
        ("2023-11-14T22:13:20", 1_700_000_000_000),  # no zone: UTC
        ("2023-11-14", 1_699_920_000_000),
    ],
)
def test_parse_time_accepts_epoch_ms_and_iso(text: str, expected: int) -> None:
    assert parse_time(text) == expected


def test_parse_time_rejects_anything_else() -> None:
    with pytest.raises(PipelineError, match="neither epoch milliseconds nor an ISO-8601"):
        parse_time("yesterday")


def test_iso_ms_round_trips() -> None:
    assert iso_ms(1_700_000_000_500) == "2023-11-14T22:13:20.500Z"
    assert parse_time(iso_ms(1_700_000_000_500)) == 1_700_000_000_500


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        (1, 1, (0, 0, 0)),
        (1, 0, (1, 0, 0)),
        (3, 1, (2, 0, 0)),
        (1, 3, (0, 2, 0)),
        (0, 2, (0, 0, 2)),
    ],
)
def test_classify(source: int, destination: int, expected: tuple[int, int, int]) -> None:
    found = classify(source, destination)
    assert (found["missing"], found["duplicated"], found["extra"]) == expected


@given(st.integers(0, 50), st.integers(0, 50))
def test_classify_accounts_for_every_difference(source: int, destination: int) -> None:
    found = classify(source, destination)
    # Whatever is not matched one to one is counted exactly once, on one side.
    assert destination - source == found["duplicated"] + found["extra"] - found["missing"]
    assert sum(1 for v in found.values() if v) <= 1


def _config(routes: list[dict[str, str]]) -> dict[str, object]:
    return {
        "zookeeper": {"connect": "127.0.0.1:2181"},
        "clusters": {n: {"bootstrap.servers": f"{n}:9092"} for n in ("a", "b", "c")},
        "routes": routes,
    }


def test_pick_route() -> None:
    one = parse_config(_config([{"source": "a", "destination": "b"}]))
    assert pick_route(one, None).name == "a.b"
    two = parse_config(_config([{"source": "a", "destination": "b"}, {"source": "a", "destination": "c"}]))
    assert pick_route(two, "a.c").destination == "c"
    with pytest.raises(PipelineError, match="pass --route"):
        pick_route(two, None)


def test_build_report_sums_and_sorts() -> None:
    zero = {"missing": 0, "duplicated": 0, "extra": 0}
    partitions = [
        {"partition": 1, "source": 5, "destination": 6, **zero, "extra": 1},
        {"partition": 0, "source": 4, "destination": 4, **zero},
    ]
    buckets = [
        {"startMs": 60_000, "source": 3, "destination": 4, **zero, "extra": 1},
        {"startMs": 0, "source": 6, "destination": 6, **zero},
    ]
    report = build_report("t", "a.b", partitions, buckets, 60, (0, 120_000))
    assert (report["source"], report["destination"], report["extra"], report["ok"]) == (9, 10, 1, False)
    assert [p["partition"] for p in report["partitions"]] == [0, 1]
    assert [b["start"] for b in report["buckets"]] == ["1970-01-01T00:00:00.000Z", "1970-01-01T00:01:00.000Z"]
    assert (report["from"], report["to"]) == ("1970-01-01T00:00:00.000Z", "1970-01-01T00:02:00.000Z")
    assert build_report("t", "a.b", [partitions[1]], [buckets[1]], 60)["ok"] is True


def test_a_loop_prevention_routes_other_records_are_reported_apart_not_as_problems(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Records produced on the destination of an active-active pair are not "extra".
    from ferry import cli
    from ferry.pipeline import audit

    counts = {"missing": 0, "duplicated": 0, "extra": 0, "sourceSkipped": 3, "destinationLocal": 4, "otherRoutes": 1}
    report = build_report(
        "t",
        "a.b",
        [{"partition": 0, "source": 5, "destination": 5, **counts}],
        [{"startMs": 0, "source": 5, "destination": 5, **counts}],
        60,
    )
    assert report["ok"] is True and (report["sourceSkipped"], report["destinationLocal"], report["otherRoutes"]) == (
        3,
        4,
        1,
    )
    config = tmp_path / "ferry.yaml"
    config.write_text(
        yaml.safe_dump(
            _config(
                [
                    {"source": "a", "destination": "b", "loop_prevention": True},
                    {"source": "b", "destination": "a", "loop_prevention": True},
                ]
            )
        )
    )
    monkeypatch.setattr(audit, "run_audit", lambda *args, **kwargs: report)
    assert cli.main(["audit", "--config", str(config), "--topic", "t", "--route", "a.b"]) == 0
    out = capsys.readouterr().out
    assert "OK: source 5, destination 5" in out
    assert "3 source records it skips, 4 produced on the destination, 1 copied by other routes" in out
