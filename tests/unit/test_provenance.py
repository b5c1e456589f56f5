"""common.core.provenance: the header Ferry writes on every copy."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.core.provenance import (
    HEADER,
    Provenance,
    ProvenanceError,
    Stamper,
    TopicStamper,
    decode,
    encode,
    read,
    split,
    stamp,
    topic_tag,
)
from ferry.common.core.topology import copy_flags

pytestmark = pytest.mark.unit

clusters = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
topics = st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True)
TAG = topic_tag("t")  # the tests' topic


def _on_t(headers: Any, cluster: str, offset: int, flags: int | None = None) -> Any:
    """stamp() for a route copying topic t to topic t."""
    return stamp(headers, cluster, offset, flags, source_topic="t", destination_topic="t")


def test_a_local_record_gets_a_path_of_its_source_and_keeps_its_headers_in_order() -> None:
    headers = [("trace", b"1"), ("empty", None), ("trace", b"2")]
    copied = _on_t(headers, "a", 41)
    assert copied == [*headers, (HEADER, b"2|a|0|" + TAG + b"|41")]
    assert read(copied, "t") == read(copied) == Provenance(("a",), 0, 41, TAG)
    assert read(headers, "t") is None and read(None, "t") is None


def test_a_second_hop_extends_the_path_keeps_the_flags_and_replaces_the_header() -> None:
    once = _on_t([("app", b"x")], "a", 41, flags=4)
    twice = _on_t(once, "b", 7)
    assert twice == [("app", b"x"), (HEADER, b"2|a,b|4|" + TAG + b"|7")]
    got = read(twice, "t")
    assert got is not None and got.origin == "a" and got.source == "b" and got.passed_through("a")
    assert not got.passed_through("c")
    assert _on_t(once, "b", 7, flags=5)[-1] == (HEADER, b"2|a,b|5|" + TAG + b"|7")


def test_the_topic_tag_is_the_crc32_of_the_name_in_eight_hex_digits() -> None:
    assert topic_tag("orders") == b"e52ffdee"
    assert topic_tag("a") == b"e8b7be43" and len(topic_tag("x" * 249)) == 8
    assert stamp(None, "a", 41, source_topic="in", destination_topic="orders") == [(HEADER, b"2|a|0|e52ffdee|41")]


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"3|a|0|e52ffdee|1",
        b"2|a|0|1",
        b"2|a|0|E52FFDEE|1",
        b"2|a|0|e52ffde|1",
        b"2|a|0|e52ffdeg|1",
        b"2|a|0|e52ffdee|1|9",
        b"2||0|e52ffdee|1",
        b"2|a|0|e52ffdee|-1",
        b"1|a|0",
        b"1||0|1",
        b"1|a|x|1",
        b"1|a|0|-1",
        b"1|a,,b|0|1",
        b"1|a|0|1|9",
        None,
    ],
)
def test_malformed_or_unknown_headers_are_refused(value: bytes | None) -> None:
    with pytest.raises(ProvenanceError):
        decode(value)
    with pytest.raises(ProvenanceError):
        _on_t([(HEADER, value)], "b", 0)


@given(st.lists(clusters, min_size=1, max_size=6), st.integers(0, 2**32), st.integers(0, 2**63 - 1), topics)
def test_encode_and_decode_round_trip(path: list[str], flags: int, offset: int, topic: str) -> None:
    assert decode(encode(path, flags, offset, topic)) == Provenance(tuple(path), flags, offset, topic_tag(topic))
    assert decode(encode(path, flags, offset)) == Provenance(tuple(path), flags, offset)  # version 1


@given(st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=5))
def test_application_headers_survive_any_number_of_hops(headers: list[tuple[str, bytes | None]]) -> None:
    others = [(k, v) for k, v in headers if k != HEADER]
    copied = _on_t(_on_t(others, "a", 1), "b", 2)
    assert split(copied) == (others, b"2|a,b|0|" + TAG + b"|2")


# -- The binding: a header forwarded to another topic is foreign -----------------------------------


def test_a_header_from_before_the_topic_tag_is_read_as_bound_to_whatever_topic_it_is_on() -> None:
    old = [("app", b"x"), (HEADER, b"1|a|3|41")]
    assert read(old, "t") == read(old, "anything") == Provenance(("a",), 3, 41)
    assert _on_t(old, "b", 7) == [("app", b"x"), (HEADER, b"2|a,b|3|" + TAG + b"|7")]
    assert Stamper("b").for_topic("t", "t").stamp(old, 7) == _on_t(old, "b", 7)


def test_a_header_forwarded_to_another_topic_makes_the_record_local_and_is_replaced_not_kept_twice() -> None:
    # An application on b reads "orders" (copied from a) and writes a derived record, headers
    # forwarded, to "enriched" on b: the route b -> a reads it as produced on b.
    copy_on_b = stamp([("app", b"x")], "a", 41, source_topic="orders", destination_topic="orders")
    derived = [*copy_on_b, ("derived", b"1")]
    assert read(derived, "orders") is not None
    assert read(derived, "enriched") is None
    copied_to_a = stamp(derived, "b", 5, source_topic="enriched", destination_topic="enriched")
    tag = topic_tag("enriched")
    assert copied_to_a == [("app", b"x"), ("derived", b"1"), (HEADER, b"2|b|0|" + tag + b"|5")]
    back_to_b = Stamper("a", lambda p: copy_flags(p, "b", frozenset({"a", "b"}), None)).for_topic(
        "enriched", "enriched"
    )
    assert back_to_b.stamp(copied_to_a, 5) is None  # its copy on a is not copied back: loop prevention holds
    forward_from_b = Stamper("b", lambda p: copy_flags(p, "a", frozenset({"b"}), None)).for_topic(
        "enriched", "enriched"
    )
    assert forward_from_b.stamp(derived, 5) == copied_to_a  # copied, though its forwarded path names a


@given(
    st.lists(clusters, min_size=1, max_size=4),
    st.integers(0, 7),
    st.integers(0, 2**40),
    topics,
    topics,
    st.lists(st.tuples(st.sampled_from(["a", "trace"]), st.one_of(st.none(), st.binary(max_size=4))), max_size=3),
    st.sets(st.sampled_from(["a", "b", "src", "dst"])),
)
def test_a_foreign_header_counts_for_nothing(
    path: list[str], flags: int, offset: int, bound: str, topic: str, others: Any, origins: set[str]
) -> None:
    """A record whose header is bound to another topic is stamped, skipped and read exactly as the
    same record without the header."""
    foreign = [*others, (HEADER, encode(path, flags, offset, bound))]
    if topic_tag(bound) == topic_tag(topic):
        assert read(foreign, topic) is not None
        return
    assert read(foreign, topic) is None
    copied = stamp(foreign, "src", 9, source_topic=topic, destination_topic="d")
    assert copied == stamp(others, "src", 9, source_topic=topic, destination_topic="d")
    assert len([h for h in copied if h[0] == HEADER]) == 1
    for decide in (
        None,
        lambda p: copy_flags(p, "dst", frozenset(origins), None),
        lambda p: copy_flags(p, "dst", None, 2),
    ):
        stamper = Stamper("src", decide).for_topic(topic, "d")
        assert stamper.stamp(foreign, 9) == stamper.stamp(others, 9)


# -- Stamper: the copier's per-record form of stamp() and the route's copy decision ---------------

# Few clusters, flags and topics, so records share heads and hit the stamper's cache. The stamper
# under test copies topic t (to topic d): a header bound to u is foreign there; None is version 1.
_paths = st.lists(st.sampled_from(["a", "b", "src", "dst"]), min_size=1, max_size=3)
_valid_values = st.one_of(
    st.builds(encode, _paths, st.integers(0, 7), st.integers(0, 2**40), st.sampled_from(["t", "u", "d", None])),
    st.builds(encode, _paths, st.integers(0, 7), st.none(), st.sampled_from(["t", "u", "d"])),  # version 3
)
_any_values = st.one_of(
    _valid_values,
    st.none(),
    st.binary(max_size=12),
    st.sampled_from(
        [
            b"",
            b"1|a|0|",
            b"1|a|0|-1",
            b"1|a|0| 7",
            b"1|a|0|x",
            b"1|a|0|1_0",
            b"2|a|0|1",
            b"1|a|0|1|2",
            b"2|a|0|zzzzzzzz|1",
            b"3|a|0|zzzzzzzz",
            b"3|a|0",
            b"3|a|-1|" + TAG,
            b"3||0|" + TAG,
            b"3|a,|0|" + TAG,
            b"3|a|0|" + TAG + b"|5",
        ]
    ),
    # a valid head with any tail: the cached head must not let a bad offset through
    st.builds(lambda v, tail: v.rpartition(b"|")[0] + b"|" + tail, _valid_values, st.binary(max_size=6)),
)
# A record's headers: None, or any mix of application headers and Ferry's (none, one, or several).
_record_headers = st.one_of(
    st.none(),
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["a", "b", "trace"]), st.one_of(st.none(), st.binary(max_size=4))),
            st.tuples(st.just(HEADER), st.one_of(st.none(), _any_values)),
            st.tuples(st.just(HEADER), _valid_values),
        ),
        max_size=4,
    ),
)


def _decisions() -> st.SearchStrategy[Any]:
    """None (copy all, keep flags), loop prevention, or a tree level: the route's decision."""
    loop = st.builds(
        lambda origins: lambda p: copy_flags(p, "dst", frozenset(origins), None),
        st.sets(st.sampled_from(["a", "b", "src", "dst"])),
    )
    level = st.builds(lambda n: lambda p: copy_flags(p, "dst", None, n), st.integers(1, 4))
    return st.one_of(st.none(), loop, level)


def _reference(headers: list[tuple[str, bytes | None]] | None, offset: int | None, decide: Any) -> Any:
    """split + decode + the decision + encode: what the copier did per record before the stamper."""
    others, own = split(headers)
    previous = None if own is None else decode(own)
    if previous is not None and not previous.bound_to("t"):
        previous = None  # foreign: the record is local
    flags = (previous.flags if previous is not None else 0) if decide is None else decide(previous)
    if flags is None:
        return None
    path = (*previous.path, "src") if previous is not None else ("src",)
    return [*others, (HEADER, encode(path, flags, offset, "d"))]


@given(
    st.lists(st.tuples(_record_headers, st.integers(0, 2**63 - 1)), min_size=1, max_size=12),
    _decisions(),
    st.integers(1, 3),
    st.booleans(),
)
def test_the_stamper_is_byte_identical_to_stamp_with_the_decision_in_both_versions(
    records: list[Any], decide: Any, cache_size: int, transactional: bool
) -> None:
    # Several records through one stamper, so later ones hit its cache (also when it overflows).
    stamper = Stamper("src", decide).for_topic("t", "d")
    stamper.MAX_CACHED = cache_size
    form = stamper.stamp_transactional if transactional else stamper.stamp
    for headers, offset in records:
        given_headers = None if headers is None else list(headers)
        try:
            expected = _reference(headers, None if transactional else offset, decide)
        except ProvenanceError as exc:
            with pytest.raises(ProvenanceError) as raised:
                form(headers, offset)
            assert str(raised.value) == str(exc)
        else:
            assert form(headers, offset) == expected
        assert headers == given_headers  # the record's own list is never changed


def test_a_version_3_header_carries_no_source_offset_and_is_read_like_version_2() -> None:
    value = encode(("a", "b"), 5, None, "orders")
    assert value == b"3|a,b|5|e52ffdee"
    assert decode(value) == Provenance(("a", "b"), 5, None, b"e52ffdee")
    assert read([(HEADER, value)], "orders") == decode(value) and read([(HEADER, value)], "other") is None
    with pytest.raises(ValueError):
        encode(("a",), 0, None)  # version 1 always carried an offset
    for bad in (b"3|a|0|e52ffdee|1", b"3|a|0", b"3|a|x|e52ffdee", b"3|a|0|E52FFDEE"):
        with pytest.raises(ProvenanceError):
            decode(bad)


def test_copies_of_records_without_headers_share_one_list_in_version_3() -> None:
    orders = Stamper("src").for_topic("orders", "orders")
    first, second = orders.stamp_transactional(None, 1), orders.stamp_transactional([], 2)
    assert first is second and first == [(HEADER, b"3|src|0|e52ffdee")]
    # A version 3 header on the source is one more hop: loop prevention reads it as it reads version 2.
    looping = Stamper("src", lambda p: copy_flags(p, "dst", frozenset({"src"}), None)).for_topic("t", "t")
    assert looping.stamp_transactional([(HEADER, b"3|dst|0|" + TAG)], 8) is None
    assert looping.stamp([(HEADER, b"3|dst|0|" + TAG)], 8) is None
    forwarded = [("app", b"x"), (HEADER, b"3|dst|0|" + topic_tag("u"))]  # foreign: local here
    assert Stamper("src").for_topic("t", "t").stamp_transactional(forwarded, 3) == [
        ("app", b"x"),
        (HEADER, b"3|src|0|" + TAG),
    ]


def test_the_stamper_copies_a_local_record_without_any_headers_and_skips_what_the_route_must_not_copy() -> None:
    assert Stamper("src").for_topic("t", "t").stamp(None, 41) == [(HEADER, b"2|src|0|" + TAG + b"|41")]
    assert Stamper("src").for_topic("t", "t").stamp([], 41) == [(HEADER, b"2|src|0|" + TAG + b"|41")]
    looping = Stamper("src", lambda p: copy_flags(p, "dst", frozenset({"src"}), None)).for_topic("t", "t")
    assert looping.stamp([(HEADER, b"2|dst|0|" + TAG + b"|7")], 8) is None
    assert looping.stamp([(HEADER, b"2|dst|0|" + TAG + b"|7")], 9) is None  # from the cache
    assert looping.stamp([(HEADER, b"1|dst|0|7")], 9) is None  # version 1: bound to t too
    with pytest.raises(ProvenanceError):
        looping.stamp([(HEADER, b"2|dst|0|" + TAG + b"|-7")], 10)  # a cached head, a bad offset


def test_a_route_keeps_one_stamper_per_topic_and_stamps_for_its_destination_topic() -> None:
    route = Stamper("src")
    orders = route.for_topic("orders", "a.orders")
    assert route.for_topic("orders", "a.orders") is orders
    assert isinstance(orders, TopicStamper)
    assert orders.stamp(None, 3) == [(HEADER, b"2|src|0|" + topic_tag("a.orders") + b"|3")]
    route.MAX_TOPICS = 2
    route.for_topic("x", "x")
    route.for_topic("y", "y")  # beyond the bound: all are dropped, then rebuilt on demand
    assert route.for_topic("orders", "a.orders") is not orders
    assert route.for_topic("orders", "a.orders").stamp(None, 3) == orders.stamp(None, 3)
