"""common.preflight.route_topics: what ``ferry check --connect`` says a route's include mirrors and leaves out."""

from __future__ import annotations

import pytest

from ferry.common.config import RouteConfig
from ferry.common.preflight.route_topics import NAMED, included_topics, summary

pytestmark = pytest.mark.unit

TOPICS = ["orders", "payments", "tmp.x", "_schemas", "connect-offsets", "mm2-offsets.a.internal", "__consumer_offsets"]


def test_the_internal_topics_include_matches_are_named_apart_and_excluded_ones_not_at_all() -> None:
    route = RouteConfig(source="src", destination="dst", include=[".*"], exclude=[r"tmp\..*"])
    assert included_topics(route, TOPICS) == (
        ["orders", "payments"],
        ["__consumer_offsets", "_schemas", "connect-offsets", "mm2-offsets.a.internal"],
    )
    assert summary(route, TOPICS) == (
        "include mirrors 2 topics (orders, payments) of src; left out as internal (exclude_internal): "
        "4 topics (__consumer_offsets, _schemas, connect-offsets, mm2-offsets.a.internal)"
    )


def test_a_topic_include_does_not_match_is_not_named_and_a_long_list_is_cut() -> None:
    route = RouteConfig(source="src", destination="dst", include=["orders.*"])
    assert summary(route, TOPICS) == "include mirrors 1 topic (orders) of src"
    assert summary(route, ["_schemas"]) == "include mirrors no topic of src"
    many = [f"orders{i:03d}" for i in range(NAMED + 3)]
    assert summary(route, many).endswith(f"({', '.join(many[:NAMED])} and 3 more) of src")


def test_with_exclude_internal_emptied_only_kafkas_own_topics_stay_out() -> None:
    route = RouteConfig(source="src", destination="dst", include=[".*"], exclude_internal=[])
    mirrored, internal = included_topics(route, TOPICS)
    assert internal == ["__consumer_offsets"] and "_schemas" in mirrored
