"""common.provenance: the header Ferry writes on every copy."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.provenance import HEADER, Provenance, ProvenanceError, decode, encode, read, split, stamp

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


@pytest.mark.parametrize("value", [b"", b"2|a|0|1", b"1|a|0", b"1||0|1", b"1|a|x|1", b"1|a|0|-1", b"1|a,,b|0|1",
                                   b"1|a|0|1|9", None])
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
