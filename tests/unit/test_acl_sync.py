"""ACL sync per route (common/core/acl_sync.py): which source bindings a route copies, renamed, and
what a failover grants; never a WRITE in a sync."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import parse_config
from ferry.common.core import acl_sync
from ferry.common.core.acl_sync import (
    ALLOW,
    DENY,
    DESCRIBE,
    GROUP,
    LITERAL,
    PREFIXED,
    READ,
    TOPIC,
    WILDCARD,
    WRITE,
    Binding,
    Remembered,
    Skipped,
)


def _route(naming: str = "identity", groups: list[str] | None = None) -> Any:
    config = parse_config(
        {
            "zookeeper": {"connect": "127.0.0.1:2181"},
            "clusters": {"src": {"bootstrap.servers": "src:9092"}, "dst": {"bootstrap.servers": "dst:9092"}},
            "routes": [{"source": "src", "destination": "dst", "naming": naming, "groups": groups or []}],
        }
    )
    return config.routes[0]


def _b(
    name: str,
    operation: str = READ,
    pattern: str = LITERAL,
    kind: str = TOPIC,
    principal: str = "User:app",
    permission: str = ALLOW,
) -> Binding:
    return Binding(kind, name, pattern, principal, "*", operation, permission)


def test_a_read_acl_on_a_mirrored_topic_is_synced_and_a_write_never_is() -> None:
    bindings = [_b("orders"), _b("orders", DESCRIBE), _b("orders", WRITE), _b("orders", "ALL"), _b("orders", "ALTER")]
    plan = acl_sync.synced(_route(), bindings, ["orders"], [])
    assert plan.bindings == [_b("orders", DESCRIBE), _b("orders")]
    assert plan.skipped == []


def test_bindings_of_topics_the_route_does_not_mirror_are_left_out() -> None:
    bindings = [_b("orders"), _b("payments"), _b("pay", pattern=PREFIXED), _b("ord", pattern=PREFIXED)]
    plan = acl_sync.synced(_route(), bindings, ["orders"], [])
    assert plan.bindings == [_b("ord", pattern=PREFIXED), _b("orders")]


def test_deny_read_is_synced_so_it_narrows_a_synced_allow_on_the_destination_too() -> None:
    bindings = [_b("orders", pattern=PREFIXED), _b("orders.secret", permission=DENY)]
    plan = acl_sync.synced(_route(), bindings, ["orders.eu", "orders.secret"], [])
    assert _b("orders.secret", permission=DENY) in plan.bindings


@pytest.mark.parametrize(
    ("naming", "binding", "expected"),
    [
        ("identity", _b("orders"), _b("orders")),
        ("prefix", _b("orders"), _b("src.orders")),
        ("{topic}-dr", _b("orders"), _b("orders-dr")),
        ("identity", _b("ord", pattern=PREFIXED), _b("ord", pattern=PREFIXED)),
        ("prefix", _b("ord", pattern=PREFIXED), _b("src.ord", pattern=PREFIXED)),
        ("dr-{topic}", _b("ord", pattern=PREFIXED), _b("dr-ord", pattern=PREFIXED)),
        ("identity", _b(WILDCARD), _b(WILDCARD)),
        ("prefix", _b(WILDCARD), _b("src.", pattern=PREFIXED)),
        ("identity", _b("app", kind=GROUP), _b("app", kind=GROUP)),
        ("prefix", _b("app", kind=GROUP), _b("app", kind=GROUP)),
    ],
)
def test_topic_resources_take_the_destination_names_and_groups_keep_theirs(
    naming: str, binding: Binding, expected: Binding
) -> None:
    assert acl_sync.renamed(_route(naming), binding) == expected


@pytest.mark.parametrize("binding", [_b("ord", pattern=PREFIXED), _b(WILDCARD)])
def test_a_prefix_is_skipped_where_the_naming_puts_text_after_the_topic(binding: Binding) -> None:
    route = _route("{topic}-dr")
    found = acl_sync.renamed(route, binding)
    assert isinstance(found, Skipped) and "after the topic name" in found.why
    plan = acl_sync.synced(route, [binding, _b("orders")], ["orders"], [])
    assert plan.bindings == [_b("orders-dr")] and [s.binding for s in plan.skipped] == [binding]


def test_group_bindings_of_the_routes_groups_are_synced_read_and_describe_only() -> None:
    route = _route(groups=["app-.*"])
    bindings = [
        _b("app-1", kind=GROUP),
        _b("app-2", DESCRIBE, kind=GROUP),  # not listed on the source, but the route selects its name
        _b("app-", pattern=PREFIXED, kind=GROUP),
        _b("app-1", "DELETE", kind=GROUP),
        _b("other", kind=GROUP),
        _b("ferry.src.dst", kind=GROUP),  # Ferry's own groups never
    ]
    plan = acl_sync.synced(route, bindings, [], ["app-1"])
    assert plan.bindings == [
        _b("app-", pattern=PREFIXED, kind=GROUP),
        _b("app-1", kind=GROUP),
        _b("app-2", DESCRIBE, kind=GROUP),
    ]


def test_a_failover_grants_every_operation_write_included_renamed() -> None:
    bindings = [_b("orders"), _b("orders", WRITE), _b("orders", "ALL"), _b("payments", WRITE)]
    plan = acl_sync.failover_grants(_route("prefix"), bindings, ["orders"], [])
    assert plan.bindings == [_b("src.orders", "ALL"), _b("src.orders"), _b("src.orders", WRITE)]


def test_only_the_missing_bindings_are_created_and_none_is_ever_removed() -> None:
    wanted = [_b("a"), _b("b")]
    present = [_b("a"), _b("c")]  # c: the destination's own, or removed at the source since: stays
    assert acl_sync.missing(wanted, present) == [_b("b")]


def test_the_remembered_set_round_trips_and_compares_without_its_time() -> None:
    remembered = Remembered(at=12.5, topics=["orders"], groups=["app"], bindings=[_b("orders", WRITE), _b("orders")])
    again = Remembered.from_bytes(remembered.to_bytes())
    assert again == Remembered(at=12.5, topics=["orders"], groups=["app"], bindings=sorted(remembered.bindings))
    assert again.same_as(
        Remembered(at=99.0, topics=["orders"], groups=["app"], bindings=[_b("orders"), _b("orders", WRITE)])
    )
    assert not again.same_as(Remembered(at=12.5, topics=["orders"], groups=["app"], bindings=[_b("orders")]))
    with pytest.raises(ValueError):
        Remembered.from_bytes(b'{"at": 1}')


_NAMES = st.text("abo.-", min_size=1, max_size=5)
_BINDINGS = st.builds(
    Binding,
    st.sampled_from([TOPIC, GROUP]),
    st.one_of(_NAMES, st.just(WILDCARD)),
    st.sampled_from([LITERAL, PREFIXED]),
    st.sampled_from(["User:a", "User:b", "User:*"]),
    st.sampled_from(["*", "10.0.0.1"]),
    st.sampled_from([READ, WRITE, DESCRIBE, "ALL", "CREATE", "DELETE", "ALTER", "DESCRIBE_CONFIGS"]),
    st.sampled_from([ALLOW, DENY]),
)


@given(
    st.sampled_from(["identity", "prefix", "dr-{topic}", "{topic}.{source}-copy", "{source}_{topic}_x"]),
    st.lists(_BINDINGS, max_size=12),
    st.lists(_NAMES, min_size=1, max_size=4),
    st.lists(_NAMES, max_size=3),
)
def test_no_write_is_ever_synced_and_every_synced_binding_names_a_destination_topic_of_the_route(
    naming: str, bindings: list[Binding], topics: list[str], groups: list[str]
) -> None:
    route = _route(naming, groups=["a.*"])
    groups = [g for g in groups if route.wants_group(g)]
    plan = acl_sync.synced(route, bindings, topics, groups)
    destination_topics = {route.destination_topic(t) for t in topics}
    for binding in plan.bindings:
        assert binding.operation in (READ, DESCRIBE)
        if binding.resource_type == TOPIC:
            assert any(binding.covers(name) for name in destination_topics), (binding, destination_topics)
            if binding.pattern == LITERAL and binding.name != WILDCARD:
                assert binding.name in destination_topics
        else:
            assert binding.resource_type == GROUP
            assert any(binding.covers(g) for g in groups) or route.wants_group(binding.name)
    # A failover grants a superset: the sync's bindings and the rest, WRITE included.
    granted = acl_sync.failover_grants(route, bindings, topics, groups)
    assert set(plan.bindings) <= set(granted.bindings)
