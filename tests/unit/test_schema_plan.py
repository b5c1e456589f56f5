"""The pure core of schema distribution: subject translation and the plan (common/core/schemas.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import parse_config
from ferry.common.core.schemas import (
    HELD_UNDER_ANOTHER_ID,
    SchemaVersion,
    SubjectFormat,
    TargetState,
    fingerprint,
    ids_to_check,
    plan,
    translate_subject,
)
from ferry.common.errors import ConfigError

topics = st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)
PLAIN = SubjectFormat("{topic}-value")
TENANT = SubjectFormat("{tenant}-{env}-{topic}-value", {"tenant": "acme", "env": "prod"})


def test_translation_examples() -> None:
    assert translate_subject("orders-value", PLAIN, TENANT) == "acme-prod-orders-value"
    assert translate_subject("acme-prod-orders-value", TENANT, PLAIN) == "orders-value"
    # The topic itself may end like the format: the whole subject decides.
    assert translate_subject("a-value-value", PLAIN, TENANT) == "acme-prod-a-value-value"
    assert translate_subject("orders-key", PLAIN, TENANT) is None  # not the primary's format
    assert translate_subject("other-prod-orders-value", TENANT, PLAIN) is None
    assert (
        translate_subject("orders-value", PLAIN, TENANT, rename_topic=lambda t: f"dr.{t}")
        == "acme-prod-dr.orders-value"
    )


def test_a_format_needs_topic_once_and_its_variables() -> None:
    with pytest.raises(ValueError, match="exactly once"):
        SubjectFormat("{topic}-{topic}")
    with pytest.raises(ValueError, match="tenant"):
        SubjectFormat("{tenant}-{topic}")


@given(topics)
def test_subject_and_topic_round_trip(topic: str) -> None:
    for fmt in (PLAIN, TENANT, SubjectFormat("{topic}")):
        assert fmt.topic(fmt.subject(topic)) == topic
    assert translate_subject(TENANT.subject(topic), TENANT, PLAIN) == PLAIN.subject(topic)


def test_fingerprint_ignores_layout_but_not_content() -> None:
    a = '{"type": "record", "name": "A", "fields": [{"name": "x", "type": "int"}]}'
    b = '{"fields":[{"type":"int","name":"x"}],"name":"A","type":"record"}'
    assert fingerprint(a) == fingerprint(b)
    assert fingerprint(a) != fingerprint(a.replace("int", "long"))
    assert fingerprint(a, "AVRO") != fingerprint(a, "JSON")


def _translate(subject: str, target: str) -> str | None:
    return translate_subject(subject, PLAIN, TENANT)


def v(subject: str, version: int, schema_id: int, fp: str) -> SchemaVersion:
    return SchemaVersion(subject, version, schema_id, fp)


def test_new_versions_are_copied_in_order_with_their_ids() -> None:
    primary = {"orders-value": [v("orders-value", 2, 7, "b"), v("orders-value", 1, 5, "a")]}
    result = plan(primary, ["dst"], {}, {"dst": {5: None, 7: None}}, _translate)
    assert [(c.version, c.schema_id, c.target_subject) for c in result.copies] == [
        (1, 5, "acme-prod-orders-value"),
        (2, 7, "acme-prod-orders-value"),
    ]
    assert result.statuses["orders-value"]["dst"].state == TargetState.PENDING


def test_an_id_taken_by_another_schema_is_a_conflict_and_blocks_later_versions() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a"), v("orders-value", 2, 7, "b")]}
    result = plan(primary, ["dst"], {}, {"dst": {5: "other", 7: None}}, _translate)
    assert result.copies == []
    assert [(c.version, c.schema_id) for c in result.conflicts] == [(1, 5)]
    status = result.statuses["orders-value"]["dst"]
    assert status.state == TargetState.CONFLICT and status.missing_versions == (1, 2)
    assert "ID 5" in (status.conflict or "")


def test_the_same_schema_at_that_id_is_fine() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a")]}
    result = plan(primary, ["dst"], {}, {"dst": {5: "a"}}, _translate)
    assert len(result.copies) == 1 and not result.conflicts


def test_a_free_id_whose_schema_the_target_holds_under_another_id_is_a_conflict() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a")]}
    result = plan(primary, ["dst"], {}, {"dst": {5: HELD_UNDER_ANOTHER_ID}}, _translate)
    assert not result.copies and "under another ID, so it cannot take ID 5" in result.conflicts[0].reason


def test_a_synced_versions_state_follows_the_primary() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a"), v("orders-value", 2, 6, "b")]}
    held = {"dst": {"acme-prod-orders-value": {1: (5, "a"), 2: (6, "b")}}}
    states = {("orders-value", 1): "DISABLED", ("orders-value", 2): "ENABLED"}
    there = {"dst": {("acme-prod-orders-value", 1): "ENABLED", ("acme-prod-orders-value", 2): "ENABLED"}}
    result = plan(primary, ["dst"], held, {"dst": {}}, _translate, states, there)
    assert [(c.version, c.state) for c in result.state_changes] == [(1, "DISABLED")]
    assert result.statuses["orders-value"]["dst"].state == TargetState.IN_SYNC


def test_a_version_held_with_another_id_is_a_conflict() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a")]}
    held = {"dst": {"acme-prod-orders-value": {1: (9, "a")}}}
    result = plan(primary, ["dst"], held, {"dst": {}}, _translate)
    assert not result.copies and result.conflicts[0].reason.startswith("version 1 of acme-prod-orders-value")


def test_unchecked_ids_wait_and_subjects_outside_the_format_are_ignored() -> None:
    primary = {"orders-value": [v("orders-value", 1, 5, "a")], "orders-key": [v("orders-key", 1, 6, "k")]}
    assert ids_to_check(primary, ["dst"], {}, _translate) == {"dst": {5}}
    result = plan(primary, ["dst"], {}, {"dst": {}}, _translate)
    assert not result.copies and result.statuses["orders-value"]["dst"].state == TargetState.PENDING
    assert "orders-key" not in result.statuses


fps = st.sampled_from("abcdef")


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, list[SchemaVersion]], dict[int, str | None]]:
    """A primary (subjects with versions 1..n, IDs unique per content) and a target's ID use."""
    ids_of: dict[str, int] = {}
    primary: dict[str, list[SchemaVersion]] = {}
    for subject in draw(st.lists(topics.map(PLAIN.subject), max_size=4, unique=True)):
        contents = draw(st.lists(fps, min_size=1, max_size=4, unique=True))
        primary[subject] = [
            v(subject, n, ids_of.setdefault(c, len(ids_of) + 1), c) for n, c in enumerate(contents, start=1)
        ]
    taken = draw(st.dictionaries(st.integers(1, 8), st.one_of(st.none(), fps), max_size=6))
    return primary, taken


@given(worlds())
def test_plan_never_overwrites_and_applying_it_converges(
    world: tuple[dict[str, list[SchemaVersion]], dict[int, str | None]],
) -> None:
    primary, taken = world
    ids = {i: taken.get(i) for vs in primary.values() for version in vs for i in [version.schema_id]}
    first = plan(primary, ["dst"], {}, {"dst": ids}, _translate)
    by_id = {version.schema_id: version.fingerprint for vs in primary.values() for version in vs}
    for copy in first.copies:  # never onto an ID that holds something else
        assert ids[copy.schema_id] in (None, by_id[copy.schema_id])
    # Apply the copies as a registry would, then plan again: nothing left to copy, nothing twice.
    held: dict[str, dict[int, tuple[int, str]]] = {}
    after = dict(ids)
    for copy in first.copies:
        held.setdefault(copy.target_subject, {})[copy.version] = (copy.schema_id, by_id[copy.schema_id])
        after[copy.schema_id] = by_id[copy.schema_id]
    second = plan(primary, ["dst"], {"dst": held}, {"dst": after}, _translate)
    assert second.copies == []
    assert {(c.subject, c.version) for c in second.conflicts} == {(c.subject, c.version) for c in first.conflicts}
    for _subject, per_target in second.statuses.items():
        status = per_target["dst"]
        assert status.state in (TargetState.IN_SYNC, TargetState.CONFLICT)
        # Synced versions are always a prefix 1..k of the subject's history (order kept).
        assert status.synced_versions == tuple(range(1, len(status.synced_versions) + 1))


# -- the schemas config section ---------------------------------------------------------------


def _config(**schemas: Any) -> dict[str, Any]:
    return {
        "zookeeper": {"connect": "zk:2181"},
        "clusters": {"src": {"bootstrap.servers": "s:9092"}, "dst": {"bootstrap.servers": "d:9092"}},
        "routes": [{"source": "src", "destination": "dst"}],
        "schemas": {
            "primary": "src",
            "registries": {"src": {"url": "http://s:8080"}, "dst": {"url": "http://d:8080"}},
            **schemas,
        },
    }


def test_a_valid_schemas_section() -> None:
    schemas = parse_config(_config(include=["orders-.*"])).schemas
    assert schemas is not None and schemas.target_names == ["dst"] and schemas.wants("orders-x-value")
    assert not schemas.wants("payments-value")
    assert parse_config(_config()).schemas.registries["dst"].subject_format == "{topic}-value"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"primary": "nowhere"}, "primary 'nowhere' has no entry in registries"),
        ({"targets": ["src"]}, "is the primary"),
        (
            {"registries": {"src": {"url": "http://s"}, "elsewhere": {"url": "http://e"}}},
            "unknown clusters ['elsewhere']",
        ),
        ({"registries": {"src": {"url": "ftp://s"}}}, "schemas.registries.src.url"),
        (
            {"registries": {"src": {"url": "http://s", "subject_format": "{tenant}-{topic}"}}},
            "subject_vars does not define",
        ),
        ({"registries": {"src": {"url": "http://s", "subject_format": "static"}}}, "exactly once"),
        ({"registries": {"src": {"url": "http://s", "auth": {"username": "u"}}}}, "password: Field required"),
        ({"include": ["("]}, "not a valid regular expression"),
        ({"interval_s": 0}, "schemas.interval_s"),
    ],
)
def test_a_bad_schemas_section_names_the_problem(change: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_config(_config(**change))
