"""The layout marker of Ferry's ZooKeeper root: its bytes, and when a process must refuse a root."""

from __future__ import annotations

from ferry.common.model import LAYOUT_VERSION, LayoutMarker, newer_layout_problem


def test_a_marker_reads_back_what_it_wrote() -> None:
    marker = LayoutMarker(LAYOUT_VERSION, "1.0.0")
    assert LayoutMarker.from_bytes(marker.to_bytes()) == marker
    assert marker.to_bytes() == b'{"ferry":"1.0.0","version":1}'


def test_a_marker_ignores_fields_a_newer_ferry_adds() -> None:
    assert LayoutMarker.from_bytes(b'{"ferry":"1.4.0","version":1,"migrated":true}') == LayoutMarker(1, "1.4.0")


def test_no_marker_or_a_known_version_is_no_problem() -> None:
    assert newer_layout_problem(None, "/ferry", "1.0.0") is None
    assert newer_layout_problem(LayoutMarker(LAYOUT_VERSION, "1.0.0"), "/ferry", "1.0.0") is None
    assert newer_layout_problem(LayoutMarker(LAYOUT_VERSION - 1, "0.1.0"), "/ferry", "1.0.0") is None


def test_a_newer_layout_names_the_root_both_releases_and_what_to_do() -> None:
    problem = newer_layout_problem(LayoutMarker(LAYOUT_VERSION + 1, "2.0.0"), "/ferry", "1.0.0")
    assert problem is not None
    assert "/ferry" in problem and "2.0.0" in problem and "1.0.0" in problem
    assert f"layout version {LAYOUT_VERSION + 1}" in problem and "\n" not in problem
