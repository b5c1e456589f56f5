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
    decode,
    encode,
    read,
    split,
    stamp,
)
from ferry.common.core.topology import copy_flags

pytestmark = pytest.mark.unit

clusters = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)


def test_a_local_record_gets_a_path_of_its_source_and_keeps_its_headers_in_order() -> None:
    headers = [("trace", b"1"), ("empty", None), ("trace", b"2")]
    copied = stamp(headers, "a", 41)
    assert copied == [*headers, (HEADER, b"1|a|0|41")]
    assert read(copied) == Provenance(("a",), 0, 41)
    assert read(headers) is None and read(None) is None


def test_a_second_hop_extends_the_path_keeps_the_flags_and_replaces_the_header() -> None:
    once = stamp([("app", b"x")], "a", 41, flags=4)
    twice = stamp(once, "b", 7)
    assert twice == [("app", b"x"), (HEADER, b"1|a,b|4|7")]
    got = read(twice)
    assert got is not None and got.origin == "a" and got.source == "b" and got.passed_through("a")
    assert not got.passed_through("c")
    assert stamp(once, "b", 7, flags=5)[-1] == (HEADER, b"1|a,b|5|7")


@pytest.mark.parametrize(
    "value", [b"", b"2|a|0|1", b"1|a|0", b"1||0|1", b"1|a|x|1", b"1|a|0|-1", b"1|a,,b|0|1", b"1|a|0|1|9", None]
)
def test_malformed_or_unknown_headers_are_refused(value: bytes | None) -> None:
    with pytest.raises(ProvenanceError):
        decode(value)
    with pytest.raises(ProvenanceError):
        stamp([(HEADER, value)], "b", 0)


@given(st.lists(clusters, min_size=1, max_size=6), st.integers(0, 2**32), st.integers(0, 2**63 - 1))
def test_encode_and_decode_round_trip(path: list[str], flags: int, offset: int) -> None:
    assert decode(encode(path, flags, offset)) == Provenance(tuple(path), flags, offset)


@given(st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=5))
def test_application_headers_survive_any_number_of_hops(headers: list[tuple[str, bytes | None]]) -> None:
    others = [(k, v) for k, v in headers if k != HEADER]
    copied = stamp(stamp(others, "a", 1), "b", 2)
    assert split(copied) == (others, b"1|a,b|0|2")


# -- Stamper: the copier's per-record form of stamp() and the route's copy decision ---------------

# Few clusters and flags, so records share heads and hit the stamper's cache.
_valid_values = st.builds(
    encode,
    st.lists(st.sampled_from(["a", "b", "src", "dst"]), min_size=1, max_size=3),
    st.integers(0, 7),
    st.integers(0, 2**40),
)
_any_values = st.one_of(
    _valid_values,
    st.none(),
    st.binary(max_size=12),
    st.sampled_from([b"", b"1|a|0|", b"1|a|0|-1", b"1|a|0| 7", b"1|a|0|x", b"1|a|0|1_0", b"2|a|0|1", b"1|a|0|1|2"]),
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


def _reference(headers: list[tuple[str, bytes | None]] | None, offset: int, decide: Any) -> Any:
    """split + decode + the decision + encode: what the copier did per record before the stamper."""
    others, own = split(headers)
    previous = None if own is None else decode(own)
    flags = (previous.flags if previous is not None else 0) if decide is None else decide(previous)
    if flags is None:
        return None
    path = (*previous.path, "src") if previous is not None else ("src",)
    return [*others, (HEADER, encode(path, flags, offset))]


@given(
    st.lists(st.tuples(_record_headers, st.integers(0, 2**63 - 1)), min_size=1, max_size=12),
    _decisions(),
    st.integers(1, 3),
)
def test_the_stamper_is_byte_identical_to_stamp_with_the_decision(
    records: list[Any], decide: Any, cache_size: int
) -> None:
    # Several records through one stamper, so later ones hit its cache (also when it overflows).
    stamper = Stamper("src", decide)
    stamper.MAX_CACHED = cache_size
    for headers, offset in records:
        given_headers = None if headers is None else list(headers)
        try:
            expected = _reference(headers, offset, decide)
        except ProvenanceError as exc:
            with pytest.raises(ProvenanceError) as raised:
                stamper.stamp(headers, offset)
            assert str(raised.value) == str(exc)
        else:
            assert stamper.stamp(headers, offset) == expected
        assert headers == given_headers  # the record's own list is never changed


def test_the_stamper_copies_a_local_record_without_any_headers_and_skips_what_the_route_must_not_copy() -> None:
    assert Stamper("src").stamp(None, 41) == [(HEADER, b"1|src|0|41")]
    assert Stamper("src").stamp([], 41) == [(HEADER, b"1|src|0|41")]
    looping = Stamper("src", lambda p: copy_flags(p, "dst", frozenset({"src"}), None))
    assert looping.stamp([(HEADER, b"1|dst|0|7")], 8) is None
    assert looping.stamp([(HEADER, b"1|dst|0|7")], 9) is None  # from the cache
    with pytest.raises(ProvenanceError):
        looping.stamp([(HEADER, b"1|dst|0|-7")], 10)  # a cached head, a bad offset
